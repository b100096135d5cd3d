/* Internal to engine/: the backends' constructors, called by pkv_engine_init and the
 * proposer's set-up, which size them from their planners (backend.h: what a backend is). */
#ifndef PKV_BACKENDS_H
#define PKV_BACKENDS_H

#include "backend.h"

/* The model backend: nothing is measured; step time comes from the cost model. */
pkv_backend *pkv_backend_model_create(void);
/* The cpu backend: the kernels' CPU mirror on a host KV pool of spec->kv_pages pages
 * filled from the tensor stream of spec->seed (the study layer), or a full model's CPU
 * mirror with that many pages per layer (its experts routed by spec->experts); for small
 * shapes. Plans of up to cap_slots partial states, rows of up to q_len_cap query tokens (a
 * verify step's k + 1; 1 without speculation); nothing is allocated after start. */
pkv_backend *pkv_backend_cpu_create(const pkv_model *md, const pkv_backend_spec *spec,
                                    int32_t cap_rows, int32_t cap_slots, int32_t q_len_cap,
                                    pkv_err *e);
/* The cuda backend: the real kernels on a GPU KV pool of spec->kv_pages pages.
 * Fails with a message naming the bytes needed and free when the pool does not fit.
 * A model with a dense part runs whole (one KV pool per layer; a verify step's rows of up
 * to q_len_cap query tokens through its verify forward); the study layer's
 * mlp_tail > 0 adds the gated MLP tail (hidden = hq * d) after attention;
 * spec->cuda_graph replays each step's work as a CUDA graph (an ablation);
 * spec->metadata_copy says how each step's metadata reaches the device
 * (pkvk_step_upload); spec->swap_slots > 0 makes the pinned host pool of
 * preemption by swap. */
pkv_backend *pkv_backend_cuda_create(const pkv_model *m, const pkv_backend_spec *spec,
                                     int32_t cap_rows, int32_t cap_slots, int32_t cap_tasks,
                                     int32_t q_len_cap, pkv_err *e);

/* A backend of kind `kind` (resolved) for model m from spec: the model backend, or the
 * cpu or cuda backend for plans of up to cap_tasks tasks and rows of up to q_len query
 * tokens, a mixture's experts routed by `experts` (NULL: a dense model). */
pkv_backend *pkv_backend_make(pkv_backend_kind kind, const pkv_model *m, int32_t cap_tasks,
                              int32_t q_len, struct pkv_moe *experts, const pkv_backend_spec *spec,
                              int32_t cap_rows, pkv_err *e);

#endif
