/* The figures of /summary by name (summary.h's pkv_summary_figures): what `report`,
 * `validate` and a plan's SLOs read, each with its unit and description. */
#include "summary.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define U(n, unit, ix, desc)                                                                       \
    { #n, PKV_FIGURE_U64, offsetof(pkv_summary, n), unit, ix, desc }
#define D(n, unit, ix, desc)                                                                       \
    { #n, PKV_FIGURE_F64, offsetof(pkv_summary, n), unit, ix, desc }
#define LAT(n, median_ix, desc)                                                                    \
    {"mean_" #n, PKV_FIGURE_F64, offsetof(pkv_summary, n.mean), "s", true, "mean " desc},          \
        {"median_" #n, PKV_FIGURE_F64, offsetof(pkv_summary, n.median),                            \
         "s",          median_ix,      "median " desc},                                            \
        {"std_" #n, PKV_FIGURE_F64, offsetof(pkv_summary, n.std),                                  \
         "s",       false,          "standard deviation (population) of the " desc},               \
    {                                                                                              \
#n, PKV_FIGURE_PCTS, offsetof(pkv_summary, n), "s", false, "run.percentiles of the " desc  \
    }
const pkv_summary_figure pkv_summary_figures[] = {
    U(steps, "steps", true, "decode steps, warm-up included"),
    U(steps_measured, "steps", false, "decode steps after run.warmup_steps"),
    U(decode_tokens, "tokens", false, "decode tokens of the measured steps"),
    U(spec_proposed, "tokens", false,
      "speculative decoding: tokens proposed in the measured steps (beyond the rows' own)"),
    U(spec_accepted, "tokens", false, "speculative decoding: of them, the tokens accepted"),
    U(arrived, "requests", false, "requests that arrived"),
    U(finished, "requests", true, "requests finished"),
    U(refused, "requests", false,
      "requests past workload.max_context, refused as an engine refuses them (failed; "
      "workload.over_context)"),
    U(preemptions, "", true, "preemptions (recompute and swap)"),
    U(prefills, "batches", true, "prefill batches"),
    U(prefill_tokens, "tokens", false, "prompt tokens of the prefill batches"),
    U(mixed_steps, "steps", false, "decode steps that carried prompt chunks"),
    U(mixed_prefill_tokens, "tokens", false, "prompt tokens of those chunks"),
    U(prefix_blocks, "blocks", false, "full prompt blocks of the admissions (prefix cache)"),
    U(prefix_tokens, "tokens", false, "tokens of the admissions' prompts (prefix cache)"),
    U(prefix_hits, "blocks", false, "prompt blocks found in the prefix cache"),
    U(prefix_hit_tokens, "tokens", false, "prompt tokens found cached (not prefilled)"),
    U(prefix_evictions, "blocks", false, "cached blocks evicted"),
    U(swap_outs, "requests", false, "requests swapped out to the host pool"),
    U(swap_ins, "requests", false, "requests swapped back in"),
    U(swap_pages, "pages", false, "pages copied by swaps, both ways"),
    D(swap_time_s, "s", false, "seconds the swap copies took under the run's clock"),
    D(swap_predicted_s, "s", false, "seconds the cost model predicts for the swap copies"),
    {"", PKV_FIGURE_BY_CLASS, 0, "requests", false,
     "per workload class: finished_CLASS, good_CLASS, slo_attainment_CLASS (fraction)"},
    D(prefill_time_s, "s", false, "simulated seconds the prefills took"),
    D(model_weight_bytes, "bytes", false, "the served model's weights per GPU (0: study layer)"),
    D(model_dense_flops_per_token, "FLOP", false, "dense FLOPs per token per GPU"),
    D(model_kv_bytes_per_token, "bytes", false, "KV bytes per token per GPU, every layer"),
    {"completed", PKV_FIGURE_U64, offsetof(pkv_summary, finished), "requests", false,
     "vLLM's name for finished"},
    U(good, "requests", false, "finished requests that met every SLO set"),
    U(input_tokens, "tokens", false, "prompt tokens of the finished requests"),
    U(output_tokens, "tokens", false, "output tokens of the finished requests"),
    D(duration, "s", false, "first arrival to last finish"),
    D(request_throughput, "requests/s", true, "finished requests per second of duration"),
    D(request_goodput, "good requests/s", true, "good requests per second of duration"),
    D(output_throughput, "output tokens/s", true, "output tokens per second of duration"),
    D(total_token_throughput, "tokens/s", false, "prompt and output tokens per second"),
    D(slo_attainment, "fraction", true, "good / finished"),
    LAT(ttft, false, "time to first token"),
    LAT(tpot, false, "time per output token after the first"),
    LAT(itl, true, "inter-token latency"),
    LAT(e2el, true, "end-to-end latency"),
    D(decode_tok_s, "decode tokens/s", true, "decode tokens per simulated second after warm-up"),
    D(decode_tok_s_wall, "decode tokens/s", true, "decode tokens per second of measured wall"),
    D(decode_tok_s_device, "decode tokens/s", true,
      "decode tokens per second of measured device time"),
    D(mean_rows, "rows", true, "mean rows of a measured step"),
    D(host_overhead_s, "s", false, "mean wall minus device time of a measured step"),
    D(host_plan_s, "s", false, "of it, mean planning (/steps t_plan)"),
    D(host_choose_s, "s", false, "of it, mean staging and choice (/steps t_choose)"),
    D(t_end, "s", false, "simulated time at the end of the run"),
    D(ttft_p50, "s", true, "TTFT median"),
    D(ttft_p90, "s", true, "TTFT 90th percentile"),
    D(ttft_p99, "s", true, "TTFT 99th percentile"),
    D(tpot_p50, "s", true, "TPOT median"),
    D(tpot_p90, "s", true, "TPOT 90th percentile"),
    D(tpot_p99, "s", true, "TPOT 99th percentile"),
    D(itl_p50, "s", true, "ITL median"),
    D(itl_p99, "s", true, "ITL 99th percentile"),
    D(e2el_p50, "s", true, "end-to-end latency median"),
    D(e2el_p99, "s", true, "end-to-end latency 99th percentile"),
    D(prefix_hit_rate, "fraction", true,
      "prompt tokens found in the prefix cache over those admitted (NaN: no prefix cache)"),
    U(clamped, "requests", false,
      "requests whose prompt or decode length was cut to workload.max_context (an engine "
      "would refuse them)"),
    U(prefix_unbounded_hit_tokens, "tokens", false,
      "prompt tokens a prefix cache that never evicted would have found"),
    D(prefix_unbounded_hit_rate, "fraction", true,
      "of the admitted prompt tokens, those a cache that never evicted would have found (so a "
      "low prefix_hit_rate reads right: the pool's evictions, or prompts that share little)"),
    {"steps_", PKV_FIGURE_BY_ROUTE, offsetof(pkv_summary, route_steps), "steps", false,
     "measured steps per route: steps_ROUTE"},
    {"interrupted", PKV_FIGURE_INT, offsetof(pkv_summary, interrupted), "", false,
     "1: the run was interrupted (SIGINT, SIGTERM)"},
    {"bounded", PKV_FIGURE_INT, offsetof(pkv_summary, bounded), "", false,
     "1: run.max_steps or run.max_time_s ended the run"},
    U(offered, "requests", false, "requests the workload holds (0: unbounded)"),
};
#undef U
#undef D
#undef LAT
const int pkv_summary_n_figures = sizeof pkv_summary_figures / sizeof pkv_summary_figures[0];

const pkv_summary_figure *pkv_summary_figure_find(const char *name) {
    for (int i = 0; i < pkv_summary_n_figures; i++) {
        const pkv_summary_figure *f = &pkv_summary_figures[i];
        if (f->type <= PKV_FIGURE_INT && !strcmp(f->name, name)) return f;
    }
    return NULL;
}

double pkv_summary_figure_value(const pkv_summary *s, const pkv_summary_figure *f) {
    const char *p = (const char *)s + f->offset;
    switch (f->type) {
    case PKV_FIGURE_U64:
        return (double)*(const uint64_t *)p;
    case PKV_FIGURE_F64:
        return *(const double *)p;
    case PKV_FIGURE_INT:
        return *(const int *)p;
    default:
        return NAN;
    }
}
