#include "pkv_record.h"

#define STEP_COL_(name, ctype, kind, measured, unit)                                               \
    {#name, offsetof(pkv_step_rec, name), kind, measured, unit},
#define REQ_COL_(name, ctype, kind, measured, unit)                                                \
    {#name, offsetof(pkv_request_rec, name), kind, measured, unit},

#define PRE_COL_(name, ctype, kind, measured, unit)                                                \
    {#name, offsetof(pkv_prefill_rec, name), kind, measured, unit},

const pkv_column pkv_step_columns[] = {PKV_STEP_COLUMNS(STEP_COL_)};
const int pkv_step_column_count = (int)(sizeof pkv_step_columns / sizeof pkv_step_columns[0]);
const pkv_column pkv_request_columns[] = {PKV_REQUEST_COLUMNS(REQ_COL_)};
const int pkv_request_column_count =
    (int)(sizeof pkv_request_columns / sizeof pkv_request_columns[0]);

const pkv_column pkv_prefill_columns[] = {PKV_PREFILL_COLUMNS(PRE_COL_)};
const int pkv_prefill_column_count =
    (int)(sizeof pkv_prefill_columns / sizeof pkv_prefill_columns[0]);

#define REP_COL_(name, ctype, kind, measured, unit)                                                \
    {#name, offsetof(pkv_replica_rec, name), kind, measured, unit},
const pkv_column pkv_replica_columns[] = {PKV_REPLICA_COLUMNS(REP_COL_)};
const int pkv_replica_column_count =
    (int)(sizeof pkv_replica_columns / sizeof pkv_replica_columns[0]);

#define SCA_COL_(name, ctype, kind, measured, unit)                                                \
    {#name, offsetof(pkv_scale_rec, name), kind, measured, unit},
const pkv_column pkv_scale_columns[] = {PKV_SCALE_COLUMNS(SCA_COL_)};
const int pkv_scale_column_count = (int)(sizeof pkv_scale_columns / sizeof pkv_scale_columns[0]);

const char *pkv_request_state_name(pkv_request_state s) {
    static const char *const names[PKV_REQ_STATE_COUNT] = {"waiting", "prefill", "running",
                                                           "finished", "refused"};
    return (unsigned)s < PKV_REQ_STATE_COUNT ? names[s] : "unknown";
}

size_t pkv_col_size(pkv_col_kind k) {
    switch (k) {
    case PKV_COL_U32:
    case PKV_COL_I32:
        return 4;
    case PKV_COL_U64:
    case PKV_COL_I64:
    case PKV_COL_F64:
        return 8;
    default:
        return 1;
    }
}
