#include "summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <gsl/gsl_sort_float.h>
#include <gsl/gsl_statistics_float.h>

void pkv_summary_init(pkv_summary *s) {
    *s = (pkv_summary){.t_measure_begin = NAN};
}

void pkv_summary_add_step(pkv_summary *s, const pkv_step_rec *r, double advance) {
    s->steps++;
    if (r->warmup) return;
    if (s->steps_measured++ == 0) s->t_measure_begin = r->t_sim;
    s->decode_tokens += r->rows;
    s->step_time_sum += advance;
    if (!isnan(r->t_wall)) {
        s->wall_sum += r->t_wall;
        s->wall_n++;
    }
    if (!isnan(r->t_device)) {
        /* The step's device work: attention, and the MLP tail where there is one. */
        s->device_sum +=
            r->t_device + (isnan(r->t_mlp) ? 0 : r->t_mlp) + (isnan(r->t_dense) ? 0 : r->t_dense);
        s->device_n++;
    }
    if (!isnan(r->t_meta)) {
        s->meta_sum += r->t_meta;
        s->meta_n++;
    }
    if (r->route < PKV_ROUTE_COUNT) s->route_steps[r->route]++;
}

static void percentiles(float *x, size_t n, double *p50, double *p90, double *p99) {
    if (n == 0) {
        *p50 = *p90 = *p99 = NAN;
        return;
    }
    gsl_sort_float(x, 1, n);
    *p50 = gsl_stats_float_quantile_from_sorted_data(x, 1, n, 0.50);
    *p90 = gsl_stats_float_quantile_from_sorted_data(x, 1, n, 0.90);
    *p99 = gsl_stats_float_quantile_from_sorted_data(x, 1, n, 0.99);
}

static int push(float **a, size_t *n, size_t *cap, double v) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 4096;
        float *p = realloc(*a, c * sizeof *p);
        if (!p) return -1;
        *a = p;
        *cap = c;
    }
    (*a)[(*n)++] = (float)v;
    return 0;
}

void pkv_summary_add_prefill(pkv_summary *s, const pkv_prefill_rec *p) {
    s->prefills++;
    s->prefill_tokens += p->tokens;
    s->prefill_time_s += p->t_advance;
}

int pkv_summary_add_request(pkv_summary *s, const pkv_request_rec *r) {
    s->arrived++;
    s->preemptions += (uint64_t)r->preemptions;
    if (!isnan(r->t_first_token) &&
        push(&s->ttft, &s->n_ttft, &s->cap_ttft, r->t_first_token - r->t_arrival))
        return -1;
    if (r->state == PKV_REQ_FINISHED) {
        s->finished++;
        if (r->decode_len > 1 && push(&s->tpot, &s->n_tpot, &s->cap_tpot,
                                      (r->t_finish - r->t_first_token) / (r->decode_len - 1)))
            return -1;
    }
    return 0;
}

void pkv_summary_free(pkv_summary *s) {
    free(s->ttft);
    free(s->tpot);
    s->ttft = s->tpot = NULL;
    s->n_ttft = s->n_tpot = s->cap_ttft = s->cap_tpot = 0;
}

int pkv_summary_finish(pkv_summary *s, double t_end) {
    percentiles(s->ttft, s->n_ttft, &s->ttft_p50, &s->ttft_p90, &s->ttft_p99);
    percentiles(s->tpot, s->n_tpot, &s->tpot_p50, &s->tpot_p90, &s->tpot_p99);
    pkv_summary_free(s);
    s->t_end = t_end;
    double span = t_end - s->t_measure_begin;
    s->decode_tok_s = s->steps_measured && span > 0 ? s->decode_tokens / span : NAN;
    s->decode_tok_s_wall =
        s->wall_n == s->steps_measured && s->wall_sum > 0 ? s->decode_tokens / s->wall_sum : NAN;
    s->decode_tok_s_device = s->device_n == s->steps_measured && s->device_sum > 0
                                 ? s->decode_tokens / s->device_sum
                                 : NAN;
    s->mean_rows = s->steps_measured ? s->decode_tokens / (double)s->steps_measured : NAN;
    s->host_overhead_s = s->wall_n && s->wall_n == s->device_n
                             ? (s->wall_sum - s->device_sum) / (double)s->wall_n
                             : NAN;
    return 0;
}

void pkv_summary_print(const pkv_summary *s, FILE *f) {
    fprintf(f, "  requests     %llu arrived, %llu finished, %llu preemptions\n",
            (unsigned long long)s->arrived, (unsigned long long)s->finished,
            (unsigned long long)s->preemptions);
    fprintf(f, "  steps        %llu (%llu after warm-up), mean %.2f rows, %.6g s simulated\n",
            (unsigned long long)s->steps, (unsigned long long)s->steps_measured, s->mean_rows,
            s->t_end);
    if (s->prefills)
        fprintf(f, "  prefill      %llu batches, %llu tokens, %.6g s simulated (%.0f tokens/s)\n",
                (unsigned long long)s->prefills, (unsigned long long)s->prefill_tokens,
                s->prefill_time_s,
                s->prefill_time_s > 0 ? s->prefill_tokens / s->prefill_time_s : 0.0);
    fprintf(f, "  decode       %.1f tokens/s (simulated clock)", s->decode_tok_s);
    if (s->decode_tok_s_wall == s->decode_tok_s_wall)
        fprintf(f, ", %.1f (wall)", s->decode_tok_s_wall);
    if (s->decode_tok_s_device == s->decode_tok_s_device)
        fprintf(f, ", %.1f (device)", s->decode_tok_s_device);
    if (s->host_overhead_s == s->host_overhead_s) {
        fprintf(f, "\n  host         %.2f us per step (wall minus device time)",
                s->host_overhead_s * 1e6);
        if (s->meta_n > 0)
            fprintf(f,
                    ",\n               of which %.2f us on the device before attention (uploads, "
                    "K/V append; %llu steps sampled)",
                    s->meta_sum / s->meta_n * 1e6, (unsigned long long)s->meta_n);
    }
    fprintf(f, "\n  TTFT         p50 %.4g s  p90 %.4g s  p99 %.4g s\n", s->ttft_p50, s->ttft_p90,
            s->ttft_p99);
    fprintf(f, "  TPOT         p50 %.4g s  p90 %.4g s  p99 %.4g s\n", s->tpot_p50, s->tpot_p90,
            s->tpot_p99);
    fprintf(f, "  routes      ");
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        if (s->route_steps[r])
            fprintf(f, " %s %llu", pkv_route_name((pkv_route)r),
                    (unsigned long long)s->route_steps[r]);
    fprintf(f, "%s\n", s->interrupted ? "\n  (interrupted: the run stopped early)" : "");
}
