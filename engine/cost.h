/* Per-step counters of a plan and the cost model. Two forms, per route:
 *
 * The study's (DESIGN.md), where the calibration fits no model for the route:
 *   T_r = s_r * (KVBytes/beta * max(1, C_min/C_r) + L_r * lambda + MergeBytes_r/beta)
 * with C_r the decode CTAs per SM, L_r the launches and s_r the route's fitted scale
 * (calibration route_scale, 1 by default).
 *
 * The structured one, where the calibration's route_model holds the route's fitted
 * constants (pkvsim fit): with W = resident CTAs per SM x SMs (FlashInfer's CUDA-core
 * decode at its own occupancy), waves = ceil(CTAs / W), b_r the bytes per second one
 * CTA streams and peak_r the most the route's kernels stream,
 *   T_r = fixed_r + L_r * launch_r + waves * cta_r
 *         + max(KVBytes / min(peak_r, min(CTAs, W) * b_r), MaxCTABytes / b_r)
 *         + MergeBytes_r / merge_r
 * : the bandwidth a grid of too few CTAs cannot fill, the route's own ceiling, the
 * longest CTA's range as the critical path of a ragged step, a fixed cost per CTA paid
 * once a wave (pipeline fill, early exit), the launches and the merge's traffic. The
 * route's host_us (host wall beyond the device time) is not part of T_r: the policy
 * adds it on a wall clock (t_host). */
#ifndef PKV_COST_H
#define PKV_COST_H

#include "routes.h"

/* The study's formula above without the route's scale s_r (what calibrate fits s_r
 * against). */
double pkv_cost_time(const pkv_calib *c, const pkv_counters *k);
/* Route r's predicted time from its counters: the structured model where the
 * calibration has one for r (m: its constants; NULL: the calibration's for the
 * counters' q_len, pkv_calib_route_model), else the study's formula times s_r. */
double pkv_cost_route_time(const pkv_calib *c, pkv_route r, const pkv_route_model *m,
                           const pkv_counters *k);
/* q_len: the rows' query tokens (1: a decode step; a verify step's k + 1): PersistentKV's
 * CTAs pack them beside the group's heads, 8 or 16 MMA rows a CTA (pkvk_verify_pack), so a
 * range runs in pkvk_verify_blocks query blocks, which read its KV side by side (each
 * past the first re-reading PKV_VERIFY_REREAD of it: L2 holds the rest), and every split
 * writes q_len times the states. FlashInfer's decode routes take one token a row: their
 * verify (its prefill path, as fast as its decode within 5% up to 4 tokens a row on the
 * H100, and past them over 16-bit KV) is priced as their decode, over FP8 KV plus
 * PKV_FI_VERIFY_FP8_REREAD of the KV for each 16 query rows past the first. */
#define PKV_VERIFY_REREAD 0.15
/* FlashInfer's verify over FP8 KV: each 16 query rows (q_len x G) past the first read the KV
 * again at this share (the H100: 4 to 5 tokens at G 4 took it from 1.0 to 1.56-1.85x its
 * decode's time on bandwidth-bound steps, 1.17-1.32x at B = 1 8K-32K; bench/RESULTS.md, the
 * verify step in 16 MMA rows). */
#define PKV_FI_VERIFY_FP8_REREAD 0.7
void pkv_cost_counters(const pkv_calib *c, const pkvk_shape *s, const pkvk_plan *p,
                       const int32_t *seq_lens, int q_len, pkv_counters *out);
/* The CTAs of route r's kernel one wave holds: the counters' own where they have it
 * (the occupancy the step was planned at), else the calibration's. */
double pkv_cost_wave(const pkv_calib *c, pkv_route r, const pkv_counters *k);

#endif
