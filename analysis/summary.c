#include "summary.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gsl/gsl_sort_float.h>
#include <gsl/gsl_statistics_float.h>

enum { HIST_BINS = PKV_HIST_OCTAVES << PKV_HIST_SUB_BITS };

int pkv_summary_init(pkv_summary *s) {
    *s = (pkv_summary){.t_measure_begin = NAN,
                       .pcts = {50, 90, 99},
                       .n_pcts = 3,
                       .t_first_arrival = INFINITY,
                       .t_last_finish = -INFINITY};
    s->ttft_d.keep = s->tpot_d.keep = s->e2el_d.keep = PKV_LATENCY_KEEP;
    s->itl_d.hist = calloc(HIST_BINS, sizeof *s->itl_d.hist); /* binned from the first */
    return s->itl_d.hist ? 0 : -1;
}

/* A value's bin: its binary exponent and the top PKV_HIST_SUB_BITS bits of its
 * mantissa (no logarithm: a step of 4096 rows adds 4096 gaps). */
static int hist_bin(double x) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    int exp = (int)((b >> 52) & 0x7ff) - 1023,
        sub = (int)((b >> (52 - PKV_HIST_SUB_BITS)) & ((1u << PKV_HIST_SUB_BITS) - 1));
    if (x <= 0 || exp < PKV_HIST_EXP_LO) return 0;
    int i = ((exp - PKV_HIST_EXP_LO) << PKV_HIST_SUB_BITS) + sub;
    return i < HIST_BINS ? i : HIST_BINS - 1;
}

/* k values x joined to the moments of n values in all (k of them these): Welford's running
 * mean and sum of squared deviations, stably (its step for k equal values at once). */
static void moments_add(double *mean, double *m2, uint64_t n, double x, uint64_t k) {
    const double delta = x - *mean;
    *mean += delta * (double)k / (double)n;
    *m2 += delta * (x - *mean) * (double)k;
}

/* The pending run in the bins and moments (its values are in the count already). */
static void dist_settle(pkv_dist *d) {
    if (!d->run_n) return;
    d->hist[hist_bin(d->run_x)] += d->run_n;
    moments_add(&d->mean, &d->m2, d->n, d->run_x, d->run_n);
    d->run_n = 0;
}

int pkv_dist_add(pkv_dist *d, double x) {
    if (!(x >= 0)) return 0;           /* no latency is negative or NaN */
    if (!d->hist && d->n == d->keep) { /* the values to the histogram, from now on */
        d->hist = calloc(HIST_BINS, sizeof *d->hist);
        if (!d->hist) return -1;
        for (uint64_t i = 0; i < d->n; i++) d->hist[hist_bin(d->v[i])]++;
        free(d->v);
        d->v = NULL, d->cap = 0;
    }
    if (d->hist) { /* equal values in a row are binned and weighed as one run */
        if (!d->run_n || x != d->run_x) {
            dist_settle(d);
            d->run_x = x;
        }
        d->run_n++, d->n++;
        return 0;
    }
    if (d->n == d->cap) {
        size_t c = d->cap ? d->cap * 2 : 4096;
        if (c > d->keep) c = d->keep;
        float *p = realloc(d->v, c * sizeof *p);
        if (!p) return -1;
        d->v = p, d->cap = c;
    }
    d->v[d->n++] = (float)x;
    moments_add(&d->mean, &d->m2, d->n, x, 1);
    return 0;
}

/* The value at rank h (0-based, fractional) of the histogram: its bin's centre. */
static double hist_at(const pkv_dist *d, double h) {
    uint64_t want = (uint64_t)floor(h), seen = 0;
    for (int i = 0; i < HIST_BINS; i++) {
        seen += d->hist[i];
        if (seen > want)
            return ldexp(1 + ((i & ((1 << PKV_HIST_SUB_BITS) - 1)) + 0.5) /
                                 (1 << PKV_HIST_SUB_BITS),
                         (i >> PKV_HIST_SUB_BITS) + PKV_HIST_EXP_LO);
    }
    return NAN;
}

double pkv_dist_quantile(const pkv_dist *d, double q) {
    if (d->n == 0) return NAN;
    if (d->hist) return hist_at(d, q * (double)(d->n - 1));
    return gsl_stats_float_quantile_from_sorted_data(d->v, 1, d->n, q);
}

/* The kept values in ascending order: a least-significant-digit radix sort of their bits,
 * three passes of 11, 11 and 10 (a latency is never negative, so a float's bits order as
 * its value does; -0 is taken as 0), through a buffer of n; where that buffer cannot be
 * had, gsl_sort_float (a heapsort: at a million values a long run's largest part). */
static void sort_kept(pkv_dist *d) {
    const size_t n = d->n;
    float *tmp = n > 1 ? malloc(n * sizeof *tmp) : NULL;
    if (!tmp) {
        if (n > 1) gsl_sort_float(d->v, 1, n);
        return;
    }
    static const int shift[3] = {0, 11, 22};
    size_t count[3][2048] = {{0}};
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &d->v[i], sizeof u);
        if (u == 0x80000000u) d->v[i] = 0.f, u = 0;
        for (int p = 0; p < 3; p++) count[p][(u >> shift[p]) & 2047]++;
    }
    float *src = d->v, *dst = tmp;
    for (int p = 0; p < 3; p++) {
        size_t at = 0;
        for (int b = 0; b < 2048; b++) {
            const size_t c = count[p][b];
            count[p][b] = at, at += c;
        }
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &src[i], sizeof u);
            dst[count[p][(u >> shift[p]) & 2047]++] = src[i];
        }
        float *t = src;
        src = dst, dst = t;
    }
    if (src != d->v) memcpy(d->v, src, n * sizeof *src); /* three passes: in tmp */
    free(tmp);
}

void pkv_dist_stats(pkv_dist *d, const double *pcts, int n_pcts, pkv_latency *out) {
    dist_settle(d);
    *out = (pkv_latency){.mean = NAN, .median = NAN, .std = NAN, .n = d->n};
    for (int k = 0; k < n_pcts; k++) out->pct[k] = NAN;
    if (d->n == 0) return;
    if (!d->hist) sort_kept(d);
    out->mean = d->mean;
    out->std = sqrt(d->m2 / (double)d->n);
    out->median = pkv_dist_quantile(d, 0.5);
    for (int k = 0; k < n_pcts; k++) out->pct[k] = pkv_dist_quantile(d, pcts[k] / 100);
}

void pkv_dist_free(pkv_dist *d) {
    free(d->v);
    free(d->hist);
    d->v = NULL, d->hist = NULL, d->cap = 0;
}

int pkv_summary_add_itl(pkv_summary *s, uint32_t replica, int64_t id, double gap) {
    if (s->itl_d.hist) pkv_dist_add(&s->itl_d, gap); /* binned: no allocation */
    pkv_request_log *l = s->log;
    if (!l) return 0;
    if (l->n_itl == l->cap_itl) {
        const size_t cap = l->cap_itl ? 2 * l->cap_itl : 4096;
        pkv_itl_row *a = realloc(l->itl, cap * sizeof *a);
        if (!a) return -1;
        l->itl = a, l->cap_itl = cap;
    }
    l->itl[l->n_itl++] = (pkv_itl_row){id, replica, gap};
    return 0;
}

void pkv_request_log_free(pkv_request_log *l) {
    free(l->req);
    free(l->itl);
    *l = (pkv_request_log){0};
}

void pkv_summary_add_step(pkv_summary *s, const pkv_step_rec *r, double advance) {
    s->steps++;
    s->mixed_steps += r->prefill_chunks > 0;
    s->mixed_prefill_tokens += r->prefill_tokens;
    if (r->warmup) return;
    if (s->steps_measured++ == 0) s->t_measure_begin = r->t_sim;
    s->decode_tokens += r->rows + r->spec_accepted;
    s->row_steps += r->rows;
    s->spec_proposed += r->spec_proposed, s->spec_accepted += r->spec_accepted;
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
    if (!isnan(r->t_plan)) {
        s->plan_sum += r->t_plan;
        s->choose_sum += r->t_choose;
        s->plan_n++;
    }
    if (r->route < PKV_ROUTE_COUNT) s->route_steps[r->route]++;
}

void pkv_summary_add_prefill(pkv_summary *s, const pkv_prefill_rec *p) {
    s->prefills++;
    s->prefill_tokens += p->tokens;
    s->prefill_time_s += p->t_advance;
}

int pkv_summary_add_request(pkv_summary *s, const pkv_request_rec *r) {
    pkv_request_log *l = s->log;
    if (l && l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 1024;
        pkv_request_rec *a = realloc(l->req, cap * sizeof *a);
        if (!a) return -1;
        l->req = a, l->cap = cap;
    }
    if (l) l->req[l->n++] = *r;
    s->arrived++;
    s->preemptions += (uint64_t)r->preemptions;
    if (r->t_arrival < s->t_first_arrival) s->t_first_arrival = r->t_arrival;
    s->refused += r->state == PKV_REQ_REFUSED;
    if (r->state != PKV_REQ_FINISHED) return 0;
    s->finished++;
    const double ttft = r->t_first_token - r->t_arrival, e2el = r->t_finish - r->t_arrival;
    const double tpot = r->decode_len > 1 ? (e2el - ttft) / (r->decode_len - 1) : NAN;
    if (pkv_dist_add(&s->ttft_d, ttft)) return -1;
    if (!isnan(tpot) && pkv_dist_add(&s->tpot_d, tpot)) return -1;
    if (pkv_dist_add(&s->e2el_d, e2el)) return -1;
    s->input_tokens += (uint64_t)r->prompt_len;
    s->output_tokens += (uint64_t)r->generated;
    if (r->t_finish > s->t_last_finish) s->t_last_finish = r->t_finish;
    const int k = s->n_classes && r->slo_class < s->n_classes ? r->slo_class : -1;
    const pkv_slo *o = k >= 0 ? &s->class_slo[k] : &s->slo; /* a class's SLOs where it has */
    const int good = (o->ttft <= 0 || ttft <= o->ttft) &&   /* a TPOT SLO holds for one token */
                     (o->tpot <= 0 || isnan(tpot) || tpot <= o->tpot) &&
                     (o->e2el <= 0 || e2el <= o->e2el);
    s->good += good;
    if (k >= 0) s->class_finished[k]++, s->class_good[k] += good;
    return 0;
}

/* A distribution's bytes: its count and moments, whether binned, then its values or
 * bins. */
typedef struct dist_head {
    uint64_t n;
    double mean, m2;
    uint64_t binned;
} dist_head;

static size_t dist_bytes(const pkv_dist *d) {
    return sizeof(dist_head) + (d->hist ? HIST_BINS * sizeof *d->hist : d->n * sizeof *d->v);
}

static char *dist_pack(const pkv_dist *d, char *p) {
    dist_head h = {d->n, d->mean, d->m2, d->hist != NULL};
    if (d->run_n) moments_add(&h.mean, &h.m2, h.n, d->run_x, d->run_n); /* its pending run */
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    const size_t b = dist_bytes(d) - sizeof h;
    if (b) memcpy(p, d->hist ? (const void *)d->hist : (const void *)d->v, b);
    if (d->run_n) { /* binned: the run's bin in the copy */
        uint64_t c;
        char *at = p + (size_t)hist_bin(d->run_x) * sizeof c;
        memcpy(&c, at, sizeof c);
        c += d->run_n;
        memcpy(at, &c, sizeof c);
    }
    return p + b;
}

/* The packed distribution at p: its head, and where it ends (NULL: not one, or past
 * end). */
static const char *dist_next(const char *p, const char *end, dist_head *h) {
    if ((size_t)(end - p) < sizeof *h) return NULL;
    memcpy(h, p, sizeof *h);
    p += sizeof *h;
    const size_t b = h->binned ? HIST_BINS * sizeof(uint64_t) : h->n * sizeof(float);
    if (h->binned > 1 || (!h->binned && h->n > PKV_LATENCY_KEEP) || (size_t)(end - p) < b)
        return NULL;
    return p + b;
}

/* Join a packed distribution (checked by dist_next) into d, its moments by Chan's
 * formula; NULL: out of memory. */
static const char *dist_merge(pkv_dist *d, const char *p, const char *end) {
    dist_settle(d);
    dist_head h;
    const char *next = dist_next(p, end, &h);
    p += sizeof h;
    const size_t b = (size_t)(next - p);
    if (!d->hist && (h.binned || d->n + h.n > d->keep)) { /* to bins, as pkv_dist_add does */
        if (!(d->hist = calloc(HIST_BINS, sizeof *d->hist))) return NULL;
        for (uint64_t i = 0; i < d->n; i++) d->hist[hist_bin(d->v[i])]++;
        free(d->v);
        d->v = NULL, d->cap = 0;
    }
    if (d->hist && h.binned) {
        for (int i = 0; i < HIST_BINS; i++) {
            uint64_t c;
            memcpy(&c, p + (size_t)i * sizeof c, sizeof c);
            d->hist[i] += c;
        }
    } else if (d->hist) {
        for (uint64_t i = 0; i < h.n; i++) {
            float v;
            memcpy(&v, p + i * sizeof v, sizeof v);
            d->hist[hist_bin(v)]++;
        }
    } else if (h.n) {
        if (d->n + h.n > d->cap) {
            float *a = realloc(d->v, (d->n + h.n) * sizeof *a);
            if (!a) return NULL;
            d->v = a, d->cap = d->n + h.n;
        }
        memcpy(d->v + d->n, p, b);
    }
    const uint64_t n = d->n + h.n;
    if (n) {
        const double delta = h.mean - d->mean;
        d->mean += delta * (double)h.n / (double)n;
        d->m2 += h.m2 + delta * delta * (double)d->n * (double)h.n / (double)n;
    }
    d->n = n;
    return next;
}

int pkv_summary_pack(const pkv_summary *s, void **buf, size_t *len) {
    const pkv_dist *ds[4] = {&s->ttft_d, &s->tpot_d, &s->e2el_d, &s->itl_d};
    size_t n = sizeof *s;
    for (int k = 0; k < 4; k++) n += dist_bytes(ds[k]);
    char *p = malloc(n);
    if (!p) return -1;
    *buf = p, *len = n;
    memcpy(p, s, sizeof *s);
    p += sizeof *s;
    for (int k = 0; k < 4; k++) p = dist_pack(ds[k], p);
    return 0;
}

int pkv_summary_merge(pkv_summary *s, const void *buf, size_t len) {
    pkv_summary o;
    if (len < sizeof o) return -1;
    memcpy(&o, buf, sizeof o);
    const char *p = (const char *)buf + sizeof o, *end = (const char *)buf + len, *q = p;
    dist_head h;
    for (int k = 0; k < 4 && q; k++) q = dist_next(q, end, &h); /* every length first */
    if (q != end) return -1;
    pkv_dist *ds[4] = {&s->ttft_d, &s->tpot_d, &s->e2el_d, &s->itl_d};
    for (int k = 0; k < 4 && p; k++) p = dist_merge(ds[k], p, end);
    if (!p) return -1;
#define ADD(f) s->f += o.f
    ADD(steps), ADD(steps_measured), ADD(decode_tokens), ADD(row_steps), ADD(step_time_sum);
    ADD(wall_sum), ADD(spec_proposed), ADD(spec_accepted);
    ADD(device_sum), ADD(wall_n), ADD(device_n), ADD(meta_sum), ADD(meta_n), ADD(plan_sum);
    ADD(choose_sum), ADD(plan_n), ADD(arrived), ADD(finished), ADD(refused), ADD(preemptions),
        ADD(prefills);
    ADD(prefill_tokens), ADD(mixed_steps), ADD(mixed_prefill_tokens), ADD(prefill_time_s);
    ADD(good), ADD(input_tokens), ADD(output_tokens);
    for (int k = 0; k < 8; k++) ADD(class_finished[k]), ADD(class_good[k]);
    for (int k = 0; k < PKV_ROUTE_COUNT; k++) ADD(route_steps[k]);
#undef ADD
    if (isnan(s->t_measure_begin) || o.t_measure_begin < s->t_measure_begin)
        s->t_measure_begin = o.t_measure_begin; /* the first measured step's (NaN: none) */
    s->t_first_arrival = fmin(s->t_first_arrival, o.t_first_arrival);
    s->t_last_finish = fmax(s->t_last_finish, o.t_last_finish);
    s->interrupted |= o.interrupted;
    s->bounded |= o.bounded;
    return 0;
}

void pkv_summary_free(pkv_summary *s) {
    pkv_dist_free(&s->ttft_d);
    pkv_dist_free(&s->tpot_d);
    pkv_dist_free(&s->e2el_d);
    pkv_dist_free(&s->itl_d);
}

int pkv_summary_finish(pkv_summary *s, double t_end) {
    /* vLLM's figures, over the finished requests (and every token's gap). */
    pkv_dist_stats(&s->ttft_d, s->pcts, s->n_pcts, &s->ttft);
    pkv_dist_stats(&s->tpot_d, s->pcts, s->n_pcts, &s->tpot);
    pkv_dist_stats(&s->e2el_d, s->pcts, s->n_pcts, &s->e2el);
    pkv_dist_stats(&s->itl_d, s->pcts, s->n_pcts, &s->itl);
    s->ttft_p50 = s->ttft.median, s->ttft_p90 = pkv_dist_quantile(&s->ttft_d, 0.9);
    s->ttft_p99 = pkv_dist_quantile(&s->ttft_d, 0.99);
    s->tpot_p50 = s->tpot.median, s->tpot_p90 = pkv_dist_quantile(&s->tpot_d, 0.9);
    s->tpot_p99 = pkv_dist_quantile(&s->tpot_d, 0.99);
    s->itl_p50 = s->itl.median, s->itl_p99 = pkv_dist_quantile(&s->itl_d, 0.99);
    s->e2el_p50 = s->e2el.median, s->e2el_p99 = pkv_dist_quantile(&s->e2el_d, 0.99);
    s->prefix_hit_rate = s->prefix_tokens ? (double)s->prefix_hit_tokens / s->prefix_tokens : NAN;
    s->prefix_unbounded_hit_rate =
        s->prefix_tokens ? (double)s->prefix_unbounded_hit_tokens / s->prefix_tokens : NAN;
    s->duration = s->finished ? s->t_last_finish - s->t_first_arrival : NAN;
    const double d = s->duration > 0 ? s->duration : NAN;
    s->request_throughput = s->finished / d;
    s->request_goodput = s->good / d;
    s->output_throughput = s->output_tokens / d;
    s->total_token_throughput = (s->input_tokens + s->output_tokens) / d;
    s->slo_attainment = s->finished ? (double)s->good / s->finished : NAN;
    pkv_summary_free(s);
    s->t_end = t_end;
    double span = t_end - s->t_measure_begin;
    s->decode_tok_s = s->steps_measured && span > 0 ? s->decode_tokens / span : NAN;
    s->decode_tok_s_wall =
        s->wall_n == s->steps_measured && s->wall_sum > 0 ? s->decode_tokens / s->wall_sum : NAN;
    s->decode_tok_s_device = s->device_n == s->steps_measured && s->device_sum > 0
                                 ? s->decode_tokens / s->device_sum
                                 : NAN;
    s->mean_rows = s->steps_measured ? s->row_steps / (double)s->steps_measured : NAN;
    s->host_overhead_s = s->wall_n && s->wall_n == s->device_n
                             ? (s->wall_sum - s->device_sum) / (double)s->wall_n
                             : NAN;
    s->host_plan_s = s->plan_n ? s->plan_sum / (double)s->plan_n : NAN;
    s->host_choose_s = s->plan_n ? s->choose_sum / (double)s->plan_n : NAN;
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
    if (s->prefix_tokens)
        fprintf(f,
                "  prefix cache %.1f%% of %llu prompt blocks hit, %llu of %llu prompt tokens "
                "(%.1f%%) not prefilled (a cache that never evicts: %.1f%%), %llu blocks "
                "evicted\n",
                s->prefix_blocks ? 100.0 * (double)s->prefix_hits / (double)s->prefix_blocks : 0,
                (unsigned long long)s->prefix_blocks, (unsigned long long)s->prefix_hit_tokens,
                (unsigned long long)s->prefix_tokens,
                100.0 * (double)s->prefix_hit_tokens / (double)s->prefix_tokens,
                100.0 * (double)s->prefix_unbounded_hit_tokens / (double)s->prefix_tokens,
                (unsigned long long)s->prefix_evictions);
    if (s->refused)
        fprintf(f,
                "  refused      %llu requests past workload.max_context, failed as an "
                "engine's server fails them, out of the latencies (workload.over_context)\n",
                (unsigned long long)s->refused);
    if (s->clamped)
        fprintf(f,
                "  WARNING      %llu requests had their prompt or decode length cut to "
                "workload.max_context (an engine would refuse them)\n",
                (unsigned long long)s->clamped);
    for (int k = 0; k < s->n_classes; k++)
        fprintf(f, "  class %-6s %llu finished, %.1f%% within its SLOs\n", s->class_names[k],
                (unsigned long long)s->class_finished[k],
                s->class_finished[k]
                    ? 100.0 * (double)s->class_good[k] / (double)s->class_finished[k]
                    : 0.0);
    if (s->swap_outs)
        fprintf(f,
                "  swap         %llu requests out, %llu in, %llu pages copied, %.6g s (%.6g s "
                "predicted)\n",
                (unsigned long long)s->swap_outs, (unsigned long long)s->swap_ins,
                (unsigned long long)s->swap_pages, s->swap_time_s, s->swap_predicted_s);
    if (s->mixed_steps)
        fprintf(f, "  chunks       %llu prompt tokens inside %llu decode steps\n",
                (unsigned long long)s->mixed_prefill_tokens, (unsigned long long)s->mixed_steps);
    if (s->spec_proposed)
        fprintf(f,
                "  speculative  %.2f tokens a row and step; %.3f of the proposed tokens "
                "accepted\n",
                s->decode_tokens / (double)s->row_steps,
                s->spec_accepted / (double)s->spec_proposed);
    fprintf(f, "  decode       %.1f tokens/s (simulated clock)", s->decode_tok_s);
    if (s->decode_tok_s_wall == s->decode_tok_s_wall)
        fprintf(f, ", %.1f (wall)", s->decode_tok_s_wall);
    if (s->decode_tok_s_device == s->decode_tok_s_device)
        fprintf(f, ", %.1f (device)", s->decode_tok_s_device);
    if (s->host_overhead_s == s->host_overhead_s) {
        fprintf(f, "\n  host         %.2f us per step (wall minus device time)",
                s->host_overhead_s * 1e6);
        if (s->plan_n > 0)
            fprintf(f, ",\n               of which %.2f us planning, %.2f us staging and choice",
                    s->host_plan_s * 1e6, s->host_choose_s * 1e6);
        if (s->meta_n > 0)
            fprintf(f,
                    ",\n               of which %.2f us on the device before attention (uploads, "
                    "K/V append; %llu steps sampled)",
                    s->meta_sum / s->meta_n * 1e6, (unsigned long long)s->meta_n);
    }
    fprintf(f, "\n  TTFT         p50 %.4g s  p90 %.4g s  p99 %.4g s\n", s->ttft_p50, s->ttft_p90,
            s->ttft_p99);
    if (s->ttft_parts_n) { /* where the time to the first token went (its tail: the queue) */
        const double n = (double)s->ttft_parts_n;
        fprintf(f,
                "               mean %.4g s waiting for admission + %.4g s for the prompt's "
                "first piece to run\n"
                "               + %.4g s of prefill to the first token + %.4g s the client's "
                "(over %llu requests)\n",
                s->ttft_parts_s[0] / n, s->ttft_parts_s[1] / n, s->ttft_parts_s[2] / n,
                s->ttft_parts_s[3] / n, (unsigned long long)s->ttft_parts_n);
    }
    fprintf(f, "  TPOT         p50 %.4g s  p90 %.4g s  p99 %.4g s\n", s->tpot_p50, s->tpot_p90,
            s->tpot_p99);
    fprintf(f, "  ITL          mean %.4g s  median %.4g s  (%llu gaps)\n", s->itl.mean,
            s->itl.median, (unsigned long long)s->itl.n);
    fprintf(f, "  E2E          mean %.4g s  median %.4g s  (%llu finished in %.6g s: %.4g req/s)\n",
            s->e2el.mean, s->e2el.median, (unsigned long long)s->finished, s->duration,
            s->request_throughput);
    if (s->slo.ttft > 0 || s->slo.tpot > 0 || s->slo.e2el > 0)
        fprintf(f, "  goodput      %.4g req/s, %llu of %llu requests within the SLOs (%.1f%%)\n",
                s->request_goodput, (unsigned long long)s->good, (unsigned long long)s->finished,
                100 * s->slo_attainment);
    fprintf(f, "  routes      ");
    for (int r = 0; r < PKV_ROUTE_COUNT; r++)
        if (s->route_steps[r])
            fprintf(f, " %s %llu", pkv_route_name((pkv_route)r),
                    (unsigned long long)s->route_steps[r]);
    fprintf(f, "%s\n", s->interrupted ? "\n  (interrupted: the run stopped early)" : "");
    if (s->bounded)
        fprintf(f,
                "  (run.max_steps or run.max_time_s ended the run: %llu of %llu requests "
                "arrived, %llu finished)\n",
                (unsigned long long)s->arrived, (unsigned long long)s->offered,
                (unsigned long long)s->finished);
}
