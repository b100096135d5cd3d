#include "summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

void pkv_summary_init(pkv_summary *s) {
    *s = (pkv_summary){.t_measure_begin = NAN};
}

void pkv_summary_add_step(pkv_summary *s, const pkv_step_rec *r, double advance) {
    s->steps++;
    if (r->warmup) return;
    if (s->steps_measured++ == 0) s->t_measure_begin = r->t_sim;
    s->decode_tokens += r->rows;
    s->step_time_sum += advance;
    if (r->t_wall == r->t_wall) {
        s->wall_sum += r->t_wall;
        s->wall_n++;
    }
    if (r->t_device == r->t_device) {
        /* The step's device work: attention, and the MLP tail where there is one. */
        s->device_sum += r->t_device + (r->t_mlp == r->t_mlp ? r->t_mlp : 0);
        s->device_n++;
    }
    if (r->t_meta == r->t_meta) {
        s->meta_sum += r->t_meta;
        s->meta_n++;
    }
    if (r->route < PKVK_ROUTE_COUNT) s->route_steps[r->route]++;
}

static void percentiles(double *x, size_t n, double *p50, double *p90, double *p99) {
    if (n == 0) {
        *p50 = *p90 = *p99 = NAN;
        return;
    }
    gsl_sort(x, 1, n);
    *p50 = gsl_stats_quantile_from_sorted_data(x, 1, n, 0.50);
    *p90 = gsl_stats_quantile_from_sorted_data(x, 1, n, 0.90);
    *p99 = gsl_stats_quantile_from_sorted_data(x, 1, n, 0.99);
}

int pkv_summary_finish(pkv_summary *s, const pkv_request_rec *req, size_t n, double t_end) {
    double *ttft = malloc(sizeof(double) * (n ? n : 1));
    double *tpot = malloc(sizeof(double) * (n ? n : 1));
    if (!ttft || !tpot) {
        free(ttft);
        free(tpot);
        return -1;
    }
    size_t nt = 0, np = 0;
    s->arrived = n;
    s->finished = s->preemptions = 0;
    for (size_t i = 0; i < n; i++) {
        const pkv_request_rec *r = &req[i];
        s->preemptions += (uint64_t)r->preemptions;
        if (r->t_first_token == r->t_first_token) ttft[nt++] = r->t_first_token - r->t_arrival;
        if (r->state == PKV_REQ_FINISHED) {
            s->finished++;
            if (r->decode_len > 1)
                tpot[np++] = (r->t_finish - r->t_first_token) / (r->decode_len - 1);
        }
    }
    percentiles(ttft, nt, &s->ttft_p50, &s->ttft_p90, &s->ttft_p99);
    percentiles(tpot, np, &s->tpot_p50, &s->tpot_p90, &s->tpot_p99);
    free(ttft);
    free(tpot);
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
    for (int r = 0; r < PKVK_ROUTE_COUNT; r++)
        if (s->route_steps[r])
            fprintf(f, " %s %llu", pkvk_route_name((pkvk_route)r),
                    (unsigned long long)s->route_steps[r]);
    fprintf(f, "%s\n", s->interrupted ? "\n  (interrupted: the run stopped early)" : "");
}
