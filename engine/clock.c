/* The engine's clock: which time a step, a prefill or a swap advances the simulation by
 * (run.clock: the cost model's prediction, the host's wall time, the device's time;
 * "auto" the backend's own, pkv_backend_caps.clock), and the engine profile's host work
 * added to it. */
#include "engine_parts.h"

#include <math.h>

pkv_clock_source pkv_engine_clock_of(int configured, pkv_backend_kind k) {
    return configured == PKV_CLOCK_AUTO ? (pkv_clock_source)pkv_backend_caps_of(k)->clock
                                        : (pkv_clock_source)configured;
}

/* The one place a time under the engine's clock is chosen, for decode steps,
 * prefills and swaps alike: the cost model's prediction, the host's wall time or
 * the device's time. */
double pkv_engine_clock_time(const pkv_engine *eng, double predicted, double wall, double device) {
    return eng->opts.clock == PKV_CLOCK_WALL     ? wall
           : eng->opts.clock == PKV_CLOCK_DEVICE ? device
                                                 : predicted;
}

/* An iteration's time with the engine's host work: requests and prompt tokens it
 * scheduled, tokens it sampled, its share of the scheduling's work (a decode step's of its
 * window, else 1; the exposed work and the sampled tokens' are every step's own), whether its
 * forward is replayed from a graph (else launched layer by layer, at least layers x eager_layer_s).
 * Over several GPUs each all-reduce of a forward over prompt tokens that no graph replays waits
 * eager_allreduce_s for the slowest rank, in series; a decode step's does not (the published eager
 * decode batches at tensor parallel 4 show no such wait: bench/RESULTS.md, "The eager all-reduce
 * wait in prefills alone"). What the GPU waits for counts as host work; *host receives the host
 * work alone. */
double pkv_engine_with_host(const pkv_engine *eng, double gpu, int64_t requests, int64_t tokens,
                            int64_t sampled, double share, bool replayed, double *host) {
    const pkv_engine_host *h = &eng->opts.host;
    gpu += h->prefill_token_s * (double)tokens;
    const double waits = replayed || tokens == 0 || eng->model.tp < 2
                             ? 0
                             : 2.0 * eng->model.layers * h->eager_allreduce_s;
    gpu += waits;
    const double launched = replayed ? 0 : h->eager_layer_s * eng->model.layers - gpu;
    if (launched > 0) gpu += launched;
    *host = share * (h->iteration_s + h->per_request_s * (double)requests +
                     h->per_prompt_token_s * (double)tokens);
    const double t = h->overlap ? fmax(gpu, *host) : gpu + *host;
    const double serial = h->exposed_s + h->per_output_token_s * (double)sampled;
    *host += serial + waits + (launched > 0 ? launched : 0);
    return t + serial;
}
