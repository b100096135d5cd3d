/* Every key of an experiment file, declared once (sim/config_keys.c): the rows drive
 * the unknown-key check, parsing, defaults and resolution in config.c and
 * config_workload.c, and `pkvsim keys` lists them for the documentation check. */
#ifndef PKV_CONFIG_KEYS_H
#define PKV_CONFIG_KEYS_H

#include "pkv_keys.h"

/* The object names of the rows that serve several places. */
#define PKV_OBJ_LENGTH        "(length)"  /* workload.prompt, workload.decode */
#define PKV_OBJ_TRACE         "(trace)"   /* workload.trace, an empirical length's trace */
#define PKV_OBJ_COLUMNS       "(columns)" /* a trace's columns object */
#define PKV_OBJ_AXIS          "(axis)"    /* an axis of sweep.axes */
#define PKV_OBJ_RANGE         "(range)"   /* an axis's range */
#define PKV_OBJ_POOL          "(pool)"    /* a pool of fleet.pools */
#define PKV_OBJ_ENGINE        "(engine)"  /* an engine profile's file (serving.engine) */
#define PKV_OBJ_SOURCE        "(source)" /* validation.source: where a published figure came from */
#define PKV_OBJ_EXPECT        "(expect)" /* a row of validation.expect: one published figure */
#define PKV_OBJ_PLAN_SLO      "(slo target)"    /* a row of plan.slo */
#define PKV_OBJ_PLAN_REPLICAS "(plan replicas)" /* plan.replicas */

extern const char *const pkv_clock_names[];      /* run.clock: predicted, wall, device, auto */
extern const char *const pkv_page_table_modes[]; /* allocator, generator */
enum { PKV_PAGE_TABLES_GENERATOR = 1 };
extern const char *const pkv_scheduler_names[]; /* prefill_first, chunked */
enum { PKV_SCHED_PREFILL_FIRST = 0, PKV_SCHED_CHUNKED = 1 };
extern const char *const pkv_preemption_names[]; /* recompute, swap */
enum { PKV_PREEMPT_RECOMPUTE = 0, PKV_PREEMPT_SWAP = 1 };
extern const char *const pkv_metadata_uploads[];   /* params, copy */
extern const char *const pkv_cuda_graph_modes[];   /* auto, false, true (JSON booleans too) */
extern const char *const pkv_prefill_attentions[]; /* auto, flashinfer, cublas: PKVK_PREFILL_* */
/* model.kv_dtype: fp16, bf16, fp8_e4m3 (the pkvk_dtype values), auto (model.dtype's) */
extern const char *const pkv_kv_dtypes[];
enum { PKV_KV_DTYPE_AUTO = 3 };
enum { PKV_METADATA_COPY = 1 };
extern const char *const pkv_workload_presets[];
/* serving.client: the measurement's client talks to a server (the engine profile's
 * request work applies), or runs in the engine's process (vllm bench latency and
 * throughput: none). */
extern const char *const pkv_client_names[];
enum { PKV_CLIENT_SERVER = 0, PKV_CLIENT_OFFLINE = 1 };

pkv_keys pkv_config_keys(void);

#endif
