/* Request traces: CSV with a header and a column mapping, JSON Lines, or a JSON
 * array of objects. Each row gives an arrival time, a prompt length and a decode
 * length. Bad rows are reported with file, line and field; a policy stops at the
 * first one (default) or skips and counts them. */
#ifndef PKV_TRACE_H
#define PKV_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "pkv_err.h"

typedef enum pkv_trace_format {
    PKV_TRACE_AUTO = 0, /* from the extension: .csv, .jsonl, .json */
    PKV_TRACE_CSV,
    PKV_TRACE_JSONL,
    PKV_TRACE_JSON,
} pkv_trace_format;
extern const char *const pkv_trace_format_names[];

typedef enum pkv_time_unit {
    PKV_TIME_SECONDS = 0,
    PKV_TIME_MS,
    PKV_TIME_DATETIME, /* "YYYY-MM-DD HH:MM:SS[.fraction]", naive (no zone) */
    PKV_TIME_STEPS,    /* decode steps; seconds = steps * step_s */
} pkv_time_unit;
extern const char *const pkv_time_unit_names[];

/* Built-in column mappings (name: time, prompt, decode columns, unit). */
typedef struct pkv_trace_columns {
    char time[64]; /* "" = no time column: every request at t = 0 */
    char prompt[64];
    char decode[64];
    pkv_time_unit unit;
    char hashes[64]; /* "" = none; JSON only: a list of the prompt's block ids (optional) */
} pkv_trace_columns;
/* "azure" (TIMESTAMP datetime, ContextTokens, GeneratedTokens), "vidur" (arrived_at
 * seconds, num_prefill_tokens, num_decode_tokens), "study" (prompt_len, decode_len,
 * optional arrival_step), "mooncake" (timestamp ms, input_length, output_length,
 * hash_ids: the prompt's 512-token block ids).
 * Returns -1 for an unknown name. */
int pkv_trace_columns_builtin(const char *name, pkv_trace_columns *out);

typedef struct pkv_trace_spec {
    char path[1024];
    pkv_trace_format format;
    pkv_trace_columns cols;
    int time_optional;    /* a missing time column means t = 0 (the study's format) */
    double step_s;        /* seconds per step for PKV_TIME_STEPS */
    double time_scale;    /* multiply times (after making them relative to the first row) */
    double rate_scale;    /* multiply the arrival rate: times divided by this */
    int64_t first_n;      /* keep the first N good rows (0: all) */
    double window_begin;  /* seconds (trace time, before scaling): keep rows in [begin, end) */
    double window_end;    /* 0: no end */
    int skip_bad;         /* 0: stop at the first bad row; 1: skip and count */
    double spread_tick_s; /* > 0: rows sharing a timestamp are spread uniformly over the tick */
    double
        target_rate; /* > 0: rescale times to this mean rate (requests/s), applied by the caller */
} pkv_trace_spec;

void pkv_trace_spec_default(pkv_trace_spec *s);

typedef struct pkv_trace {
    size_t n;
    double *t;       /* [n] seconds from the first kept row, after scaling */
    int32_t *prompt; /* [n] */
    int32_t *decode; /* [n] */
    /* The prompts' block ids where the trace gives them (hash_ids: equal ids, equal
     * prefixes): row i's are hashes[hash_off[i] .. hash_off[i + 1]); NULL: none. */
    int64_t *hashes;
    size_t *hash_off; /* [n + 1] */
    size_t skipped;   /* bad rows skipped (skip_bad) */
    size_t lines;     /* data rows read */
} pkv_trace;

/* Load the trace; on error nothing is kept and e names file:line: field: problem. */
int pkv_trace_load(pkv_trace *tr, const pkv_trace_spec *s, pkv_err *e);
void pkv_trace_free(pkv_trace *tr);

#endif
