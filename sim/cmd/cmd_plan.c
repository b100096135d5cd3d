/* pkvsim plan: the capacity question in one command. A plan file is an experiment (the
 * model, the workload, a fleet) with a `plan` section: the SLOs, the loads to plan for
 * (an axis), the candidates (axes whose product is every configuration weighed) and the
 * replica bounds. For each load and candidate the fewest replicas that meet every SLO
 * are searched (replicas are monotone: doubling, then bisection; each load starts from
 * the answer of the load below it), the cheapest candidate is the plan, and each answer
 * carries its margin: how far its figures are from their targets against the error
 * pkvsim's predictions of that figure showed on held-out published runs. */
#include "plan_run.h"
#include "cli.h"
#include "jsonv.h"
#include "pkv_files.h"
#include "runner.h"
#include "sweep.h"
#include "vfile.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { MAX_EVALS = 16384, PKV_PLAN_MAX_JOBS = 64 };

static void plan_usage(void) {
    fputs(
        "usage: pkvsim plan PLAN.json [--json OUT] [-o OUT.h5 [-j N]] [-b BACKEND] [-c CAL] [-q]\n"
        "\n"
        "The fewest replicas, and the cheapest configuration, that meet a workload's SLOs\n"
        "at each load. PLAN.json is an experiment (model, workload, serving, fleet) with a\n"
        "`plan` section (experiments/README.md, Plans): `slo` (figures of /summary with\n"
        "their limits: {\"figure\": \"ttft_p99\", \"max_ms\": 1000}), `loads` (an axis:\n"
        "{\"path\": \"workload.trace.rate_scale\", \"values\": [1, 4, 8]}), `candidates`\n"
        "(axes whose product is weighed: GPUs, routers, engines, ...), `replicas` (the\n"
        "path searched, fleet.replicas by default, and its bounds), `prices` (per GPU hour:\n"
        "experiments/planning/prices.json by default) and `held_out` (the held-out errors of\n"
        "`validate --by-source --json`: experiments/planning/held_out.json).\n"
        "\n"
        "For each load and candidate, the fewest replicas meeting every SLO (every request\n"
        "finished but those past the model's context, each figure within its limit) are\n"
        "searched by doubling and bisection; the cheapest candidate per load is the plan.\n"
        "Each answer says its margin: the figure nearest its limit, how much higher it may\n"
        "be than predicted before the answer fails, and pkvsim's held-out error on that\n"
        "kind of figure.\n"
        "\n"
        "  --json OUT          the plans and every run searched, as JSON\n"
        "  -o, --output OUT.h5 every run searched, as a sweep's file (/points/NNNNN and\n"
        "                      /sweep/index: the load, the candidate's axes, the replicas):\n"
        "                      for report and plot.py; a plan run again with it reads the\n"
        "                      runs it finished (of the same experiment text and options)\n"
        "                      instead of running them, so a stopped plan goes on\n"
        "  -j, --jobs N        with -o: N processes search the candidates (a share each),\n"
        "                      then the plan reads their runs (default 1)\n"
        "  -b, --backend NAME  model (default: the experiment's run.backend) | cpu | cuda\n"
        "  -c, --calibration FILE  for every run (default: route.calibration / route.gpu)\n"
        "  -q, --quiet         the plans only, no progress\n"
        "\n"
        "Exit status: 0 with a plan for every load, 3 when a load has none (no candidate\n"
        "meets the SLOs within the replica bound), 1 on an error, 2 on bad usage, 128 + the\n"
        "signal when one stopped it.\n",
        stdout);
}

/* Its GPUs and their price per hour: each replica's (or pool's) route.gpu, times the
 * replicas and the GPUs a tensor-parallel model spans. */
static int cost_of(const pkv_plan_spec *p, const pkv_config *cfg, eval_t *ev, pkv_err *e) {
    const int n_groups = cfg->fleet.n_pools ? cfg->fleet.n_pools : 1;
    ev->cost = 0, ev->gpus = 0;
    for (int g = 0; g < n_groups; g++) {
        const pkv_config *c = cfg->fleet.n_pools ? cfg->fleet.pools[g].cfg : cfg;
        const int replicas = cfg->fleet.n_pools
                                 ? cfg->fleet.pools[g].replicas
                                 : (cfg->fleet.replicas > 0 ? cfg->fleet.replicas : 1);
        const pkv_gpu_price *pr = pkv_plan_price(p, c->gpu);
        if (!pr)
            return pkv_fail(e, "%s has no price for route.gpu \"%s\" (add it to its gpus)",
                            p->prices_file, c->gpu);
        ev->gpus += replicas * c->model.tp;
        ev->cost += replicas * c->model.tp * pr->usd_per_hour;
    }
    return 0;
}

/* The searched count n into root: at path, or, where path is fleet.replicas and the
 * experiment gives fleet.pools (a layout: prefill 1 + decode 2), n units of the layout,
 * each pool n times its replicas. */
static int set_replicas(cJSON *root, const char *path, int n, pkv_err *e) {
    cJSON *pools =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "fleet"), "pools");
    if (strcmp(path, "fleet.replicas") || !cJSON_IsArray(pools)) {
        cJSON *nv = cJSON_CreateNumber(n);
        const int rc = nv ? pkv_json_set_path(root, path, nv, e) : pkv_fail(e, "out of memory");
        cJSON_Delete(nv);
        return rc;
    }
    cJSON *pool;
    cJSON_ArrayForEach(pool, pools) {
        if (!cJSON_IsObject(pool)) continue; /* the configuration's check names it */
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(pool, "replicas");
        cJSON *nv = cJSON_CreateNumber((cJSON_IsNumber(r) ? r->valuedouble : 1) * n);
        if (!nv) return pkv_fail(e, "out of memory");
        if (r)
            cJSON_ReplaceItemInObjectCaseSensitive(pool, "replicas", nv);
        else
            cJSON_AddItemToObject(pool, "replicas", nv);
    }
    return 0;
}

/* Run one point (load l, candidate c, n replicas): *ev, its figures and whether it meets
 * every SLO (with --output, a finished run of its key is read instead, and a new one
 * kept in the points folder). -1 only for an error that stops the plan (out of memory, a
 * signal). */
static int evaluate(planner *pl, int l, size_t c, int n, eval_t *ev) {
    pkv_plan_spec *p = &pl->p;
    *ev = (eval_t){.load = l, .cand = (int)c, .replicas = n, .cost = NAN, .old = -1};
    for (int s = 0; s < p->n_slo; s++) ev->fig[s] = NAN;
    pkv_err e;
    cJSON *root = cJSON_Duplicate(pl->base, 1);
    int rc = root ? 0 : pkv_fail(&e, "out of memory");
    if (!rc) rc = pkv_json_set_path(root, p->load.path, cJSON_GetArrayItem(p->load.values, l), &e);
    for (int a = 0; a < p->n_cand && !rc; a++)
        rc = pkv_json_set_path(root, p->cand[a].path, pkv_plan_cand_value(p, c, a), &e);
    if (!rc) rc = set_replicas(root, p->rep_path, n, &e);
    char *text = rc ? NULL : cJSON_Print(root);
    cJSON_Delete(root);
    if (!rc && !text) rc = pkv_fail(&e, "out of memory");
    if (rc) goto failed;
    char file[1200] = "";
    pkv_cli_overrides o = pl->ov;
    if (pl->out) {
        pkv_sweep_point_key(text, &pl->ov, ev->key);
        pkv_plan_point_file(pl, ev, file, sizeof file);
        o.output = file;
    }
    pkv_config cfg;
    if (pkv_config_parse(&cfg, text, pl->path, &e)) goto failed; /* takes the text */
    if (pkv_cli_apply(&cfg, &o)) {
        pkv_config_free(&cfg);
        return -1; /* printed; every point would fail so */
    }
    if (cost_of(p, &cfg, ev, &e)) {
        pkv_config_free(&cfg);
        goto failed;
    }
    if (pl->out && pkv_plan_reuse(pl, ev, file)) {
        pkv_config_free(&cfg);
        return 0;
    }
    pkv_run_opts ro = {.quiet = 1,
                       .stop = pl->stop,
                       .record = pl->out != NULL,
                       .sweep_point = pl->out ? ev->key : NULL};
    pkv_summary sum;
    rc = pkv_run_experiment(&cfg, &ro, &sum, &e);
    pkv_config_free(&cfg);
    if (pl->stop && *pl->stop) {
        if (pl->out) unlink(file); /* not a finished point */
        return -1;
    }
    if (rc) goto failed;
    ev->kept = pl->out != NULL;
    for (int s = 0; s < p->n_slo; s++) ev->fig[s] = pkv_summary_figure_value(&sum, p->slo[s].f);
    const double sv[PKV_PLAN_N_SERVED] = {sum.bounded, (double)sum.offered, (double)sum.arrived,
                                          (double)sum.finished, (double)sum.refused};
    pkv_plan_judge(p, ev, sv);
    return 0;
failed:
    if (!strcmp(e.msg, "out of memory")) {
        fprintf(stderr, "pkvsim plan: out of memory\n");
        return -1;
    }
    snprintf(ev->why, sizeof ev->why, "%.159s", e.msg);
    return 0;
}

/* The evaluation of (l, c, n), run now if not yet; NULL when the plan must stop. */
static const eval_t *at(planner *pl, int l, size_t c, int n) {
    for (int i = 0; i < pl->n_evals; i++)
        if (pl->evals[i].load == l && pl->evals[i].cand == (int)c && pl->evals[i].replicas == n)
            return &pl->evals[i];
    if (pl->n_evals == MAX_EVALS) {
        fprintf(stderr, "pkvsim plan: more than %d runs\n", MAX_EVALS);
        return NULL;
    }
    eval_t *ev = &pl->evals[pl->n_evals];
    if (evaluate(pl, l, c, n, ev)) return NULL;
    pl->n_evals++;
    if (!pl->quiet && isatty(2)) {
        char d[256];
        pkv_plan_describe(&pl->p, c, d, sizeof d);
        fprintf(stderr, "pkvsim plan: load %d, %s, %d replica%s: %s%s\n", l, d, n,
                n == 1 ? "" : "s",
                ev->pass ? "meets the SLOs" : "misses: ", ev->pass ? "" : ev->why);
    }
    return ev;
}

/* The fewest replicas in [lo, max] meeting the SLOs at load l for candidate c (lo: the
 * answer at a lower load, or the minimum); 0 when none does; -1 to stop. */
static int search(planner *pl, int l, size_t c, int lo) {
    const pkv_plan_spec *p = &pl->p;
    const eval_t *ev = at(pl, l, c, lo);
    if (!ev) return -1;
    if (ev->pass) return lo;
    if (!ev->ran) return 0; /* an error no count mends (printed in the table) */
    int fail = lo, hi = lo;
    for (;;) { /* doubling */
        if (hi == p->rep_max) return 0;
        hi = hi > p->rep_max / 2 ? p->rep_max : hi * 2;
        if (!(ev = at(pl, l, c, hi))) return -1;
        if (ev->pass) break;
        fail = hi;
    }
    while (hi - fail > 1) { /* bisection: fail misses, hi meets */
        const int mid = fail + (hi - fail) / 2;
        if (!(ev = at(pl, l, c, mid))) return -1;
        *(ev->pass ? &hi : &fail) = mid;
    }
    return hi;
}

/* How much higher the figures of the answer may be than predicted before one misses
 * (the nearest: its SLO s), as a fraction; how far the count below missed, likewise. */
static double headroom(const pkv_plan_spec *p, const eval_t *ev, int *s_near) {
    double best = INFINITY;
    *s_near = -1;
    for (int s = 0; s < p->n_slo; s++) {
        const pkv_plan_slo *o = &p->slo[s];
        const double v = ev->fig[s];
        const double h = o->is_max ? o->limit / v - 1 : v / o->limit - 1;
        if (isfinite(h) && h < best) best = h, *s_near = s;
    }
    return best;
}

static double shortfall(const pkv_plan_spec *p, const eval_t *ev, int *s_miss) {
    double worst = -INFINITY;
    *s_miss = -1;
    for (int s = 0; s < p->n_slo; s++) {
        const pkv_plan_slo *o = &p->slo[s];
        const double v = ev->fig[s];
        const double m = o->is_max ? v / o->limit - 1 : o->limit / v - 1;
        if (isfinite(m) && m > worst) worst = m, *s_miss = s;
    }
    return worst;
}

typedef struct answer {
    size_t cand;
    int replicas; /* 0: none within the bound */
    const eval_t *ev, *below;
} answer;

static const pkv_plan_spec *g_sort_spec; /* by_cost's headroom (qsort takes no context) */

/* The cheapest first; at a tie the fewer GPUs, then the wider headroom, then the order
 * given. Candidates with no answer last. */
static int by_cost(const void *a, const void *b) {
    const answer *x = a, *y = b;
    if (!x->replicas != !y->replicas) return x->replicas ? -1 : 1;
    if (x->replicas) {
        if (x->ev->cost != y->ev->cost) return x->ev->cost < y->ev->cost ? -1 : 1;
        if (x->ev->gpus != y->ev->gpus) return x->ev->gpus < y->ev->gpus ? -1 : 1;
        int s;
        const double hx = headroom(g_sort_spec, x->ev, &s), hy = headroom(g_sort_spec, y->ev, &s);
        if (hx != hy) return hx > hy ? -1 : 1;
    }
    return x->cand < y->cand ? -1 : (x->cand > y->cand);
}

/* The margin of an answer, in words, into buf. */
static void margin_text(const pkv_plan_spec *p, const answer *a, char *buf, size_t n) {
    int sn, sm;
    const double h = headroom(p, a->ev, &sn);
    buf[0] = 0;
    if (sn >= 0) {
        int k;
        const double err = pkv_plan_held_out(p, pkv_vfile_figure_kind(p->slo[sn].f->name), &k);
        snprintf(buf, n, "%s %.0f%% from its limit", p->slo[sn].f->name, 100 * h);
        if (!isnan(err))
            snprintf(buf + strlen(buf), n - strlen(buf),
                     " (held-out %s error %.0f%%, 4 in 5 within it: %s)", pkv_vfile_kind_names[k],
                     100 * err, h < err ? "it may need more replicas" : "safe at that error");
    }
    if (a->below && a->below->ran) {
        const double m = shortfall(p, a->below, &sm);
        if (sm >= 0) {
            int k;
            const double err = pkv_plan_held_out(p, pkv_vfile_figure_kind(p->slo[sm].f->name), &k);
            snprintf(buf + strlen(buf), n - strlen(buf), "; %d replica%s miss%s %s by %.0f%%%s",
                     a->below->replicas, a->below->replicas == 1 ? "" : "s",
                     a->below->replicas == 1 ? "es" : "", p->slo[sm].f->name, 100 * m,
                     !isnan(err) && m < err ? " (within the held-out error: it may suffice)" : "");
        } else {
            snprintf(buf + strlen(buf), n - strlen(buf), "; %d: %s", a->below->replicas,
                     a->below->why);
        }
    }
}

static void print_load(const planner *pl, int l, answer *ans, size_t n) {
    const pkv_plan_spec *p = &pl->p;
    char *lv = pkv_json_value_text(cJSON_GetArrayItem(p->load.values, l));
    printf("\nload %s = %s\n", p->load.path, lv ? lv : "?");
    free(lv);
    int w = 9; /* the candidates' column: as wide as the longest, up to 100 */
    for (size_t i = 0; i < n; i++) {
        char d[256];
        pkv_plan_describe(p, ans[i].cand, d, sizeof d);
        if ((int)strlen(d) > w) w = strlen(d) < 100 ? (int)strlen(d) : 100;
    }
    printf("  %-*s %8s %5s %9s", w, "candidate", "replicas", "GPUs", "USD/hour");
    for (int s = 0; s < p->n_slo; s++) printf("  %20s", p->slo[s].label);
    printf("\n");
    for (size_t i = 0; i < n; i++) {
        char d[256];
        pkv_plan_describe(p, ans[i].cand, d, sizeof d);
        printf("%c %-*.*s", i == 0 && ans[i].replicas ? '*' : ' ', w, w, d);
        if (!ans[i].replicas) {
            const eval_t *last = NULL;
            for (int k = 0; k < pl->n_evals; k++)
                if (pl->evals[k].load == l && pl->evals[k].cand == (int)ans[i].cand &&
                    (!last || pl->evals[k].replicas > last->replicas))
                    last = &pl->evals[k];
            if (last && !last->ran)
                printf(" cannot run: %s\n", last->why);
            else
                printf(" none up to %d replicas%s%s\n", p->rep_max, last ? ": " : "",
                       last ? last->why : "");
            continue;
        }
        const eval_t *ev = ans[i].ev;
        printf(" %8d %5d %9.2f", ans[i].replicas, ev->gpus, ev->cost);
        for (int s = 0; s < p->n_slo; s++)
            printf("  %20.4g", p->slo[s].is_max ? ev->fig[s] * 1e3 : ev->fig[s]);
        printf("\n");
    }
    if (!ans[0].replicas) {
        printf("  plan: none: no candidate meets the SLOs with at most %d replicas\n", p->rep_max);
        return;
    }
    char d[256], m[512];
    pkv_plan_describe(p, ans[0].cand, d, sizeof d);
    margin_text(p, &ans[0], m, sizeof m);
    printf("  plan: %d replica%s (%d GPUs), %s, USD %.2f an hour\n  margin: %s\n", ans[0].replicas,
           ans[0].replicas == 1 ? "" : "s", ans[0].ev->gpus, d, ans[0].ev->cost, m);
    for (size_t i = 1; i < n && ans[i].replicas; i++) {
        pkv_plan_describe(p, ans[i].cand, d, sizeof d);
        const double more = ans[i].ev->cost - ans[0].ev->cost;
        int sa, sb;
        const double ha = headroom(p, ans[0].ev, &sa), hb = headroom(p, ans[i].ev, &sb);
        if (more > 0)
            printf("  %s: USD %.2f an hour more (%d replica%s)\n", d, more, ans[i].replicas,
                   ans[i].replicas == 1 ? "" : "s");
        else if (hb == ha)
            printf("  %s: the same cost and headroom\n", d);
        else
            printf("  %s: the same cost, less headroom (%s %.1f%% from its limit, against "
                   "%.1f%%)\n",
                   d, sb >= 0 ? p->slo[sb].f->name : "-", 100 * hb, 100 * ha);
    }
}

static cJSON *eval_json(const planner *pl, const eval_t *ev) {
    const pkv_plan_spec *p = &pl->p;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "load",
                          cJSON_Duplicate(cJSON_GetArrayItem(p->load.values, ev->load), 1));
    cJSON *cand = cJSON_AddObjectToObject(o, "candidate");
    for (int a = 0; a < p->n_cand; a++)
        cJSON_AddItemToObject(cand, p->cand[a].path,
                              cJSON_Duplicate(pkv_plan_cand_value(p, (size_t)ev->cand, a), 1));
    cJSON_AddNumberToObject(o, "replicas", ev->replicas);
    cJSON_AddNumberToObject(o, "gpus", ev->gpus);
    if (isfinite(ev->cost)) cJSON_AddNumberToObject(o, "usd_per_hour", ev->cost);
    cJSON_AddBoolToObject(o, "meets_slo", ev->pass);
    if (!ev->pass) cJSON_AddStringToObject(o, "why", ev->why);
    cJSON *f = cJSON_AddObjectToObject(o, "figures");
    for (int s = 0; s < p->n_slo; s++)
        if (isfinite(ev->fig[s])) cJSON_AddNumberToObject(f, p->slo[s].f->name, ev->fig[s]);
    return o;
}

/* Every load's answers (n_loads x n_candidates, each load sorted by cost) as JSON. */
static int write_json(const planner *pl, answer *ans, const char *out) {
    const pkv_plan_spec *p = &pl->p;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "experiment", pl->path);
    cJSON_AddStringToObject(root, "load_path", p->load.path);
    cJSON_AddStringToObject(root, "prices", p->prices_file);
    cJSON_AddStringToObject(root, "held_out", p->held_out_file);
    cJSON *he = cJSON_AddObjectToObject(root, "held_out_error");
    for (int k = 0; k < PKV_FIG_KINDS; k++)
        if (!isnan(p->held_out[k]))
            cJSON_AddNumberToObject(he, pkv_vfile_kind_names[k], p->held_out[k]);
    cJSON *plans = cJSON_AddArrayToObject(root, "plans");
    for (int l = 0; l < p->load.n; l++) {
        const answer *a = &ans[(size_t)l * p->n_candidates];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(plans, o);
        cJSON_AddItemToObject(o, "load", cJSON_Duplicate(cJSON_GetArrayItem(p->load.values, l), 1));
        cJSON *cs = cJSON_AddArrayToObject(o, "candidates");
        for (size_t i = 0; i < p->n_candidates; i++) {
            cJSON *c = a[i].replicas ? eval_json(pl, a[i].ev) : cJSON_CreateObject();
            if (!a[i].replicas) {
                cJSON *cand = cJSON_AddObjectToObject(c, "candidate");
                for (int x = 0; x < p->n_cand; x++)
                    cJSON_AddItemToObject(cand, p->cand[x].path,
                                          cJSON_Duplicate(pkv_plan_cand_value(p, a[i].cand, x), 1));
                cJSON_AddNullToObject(c, "replicas");
            } else {
                char m[512];
                margin_text(p, &a[i], m, sizeof m);
                cJSON_AddStringToObject(c, "margin", m);
                int sn;
                const double h = headroom(p, a[i].ev, &sn);
                if (sn >= 0) {
                    cJSON_AddStringToObject(c, "nearest_slo", p->slo[sn].f->name);
                    cJSON_AddNumberToObject(c, "headroom", h);
                }
            }
            cJSON_AddBoolToObject(c, "chosen", i == 0 && a[i].replicas);
            cJSON_AddItemToArray(cs, c);
        }
    }
    cJSON *runs = cJSON_AddArrayToObject(root, "runs");
    for (int i = 0; i < pl->n_evals; i++) cJSON_AddItemToArray(runs, eval_json(pl, &pl->evals[i]));
    return pkv_vfile_write_doc(root, out, "plan", "--json");
}

/* Every load's answers into ans (n_loads x n_candidates, each load sorted by cost, printed
 * unless this is one of --jobs' children: then only the candidates of its share, c %
 * jobs == job, are searched); *all: whether every load has a plan. -1 to stop. */
static int search_all(planner *pl, answer *ans, bool *all) {
    const pkv_plan_spec *p = &pl->p;
    const size_t nc = p->n_candidates;
    *all = true;
    for (int l = 0; l < p->load.n; l++) {
        answer *a = &ans[(size_t)l * nc], *below = l ? a - nc : NULL;
        /* Loads given in increasing numbers: a load's answer is at least the one below's
         * (that load's answers are sorted by cost: found by candidate). */
        const cJSON *lv = cJSON_GetArrayItem(p->load.values, l),
                    *lp = l ? cJSON_GetArrayItem(p->load.values, l - 1) : NULL;
        const bool above =
            lp && cJSON_IsNumber(lv) && cJSON_IsNumber(lp) && lv->valuedouble >= lp->valuedouble;
        for (size_t c = 0; c < nc; c++) {
            a[c] = (answer){.cand = c};
            if (pl->jobs > 1 && (int)(c % (size_t)pl->jobs) != pl->job) continue;
            int prev = 0;
            for (size_t i = 0; above && i < nc; i++)
                if (below[i].cand == c) prev = below[i].replicas;
            if (above && prev == 0) continue; /* none at a lower load: none here */
            const int n = search(pl, l, c, prev > 0 ? prev : p->rep_min);
            if (n < 0) return -1;
            a[c].replicas = n;
            if (n > 0) { /* the count below, for the margin (evaluations stay put) */
                a[c].ev = at(pl, l, c, n);
                if (n > p->rep_min && !(a[c].below = at(pl, l, c, n - 1))) return -1;
            }
        }
        g_sort_spec = p;
        qsort(a, nc, sizeof *a, by_cost);
        *all &= a[0].replicas > 0;
        if (pl->jobs <= 1) print_load(pl, l, a, nc);
    }
    return 0;
}

/* --jobs N: N - 1 children and this process each search a share of the candidates, every
 * run kept as its point file; the plan then runs whole here, reading them (-o's resume).
 * -1 to stop (a signal). */
static int spread(planner *pl, answer *ans, int jobs) {
    fflush(stdout), fflush(stderr);
    pid_t kids[PKV_PLAN_MAX_JOBS];
    int n = 0;
    for (int k = 1; k < jobs; k++) {
        const pid_t pid = fork();
        if (pid < 0) break; /* fewer jobs */
        if (pid == 0) {
            pl->job = k, pl->jobs = jobs, pl->quiet = 1;
            bool all;
            const int rc = search_all(pl, ans, &all);
            _exit(rc ? 1 : 0); /* its runs are in the folder; nothing else is its own */
        }
        kids[n++] = pid;
    }
    pl->job = 0, pl->jobs = n + 1;
    bool all;
    int rc = pl->jobs > 1 ? search_all(pl, ans, &all) : 0;
    for (int k = 0; k < n; k++)
        while (waitpid(kids[k], NULL, 0) < 0 && errno == EINTR) continue;
    pl->jobs = 1;
    return rc || (pl->stop && *pl->stop) ? -1 : 0;
}

int pkv_cmd_plan(int argc, char **argv, volatile sig_atomic_t *stop) {
    const char *json = NULL, *backend = NULL, *cal = NULL, *output = NULL, *jobs_s = "1";
    int quiet = 0;
    const pkv_cli_opt opts[] = {{"json", 0, PKV_CLI_STRING, &json, 0},
                                {"output", 'o', PKV_CLI_STRING, &output, 0},
                                {"jobs", 'j', PKV_CLI_STRING, &jobs_s, 0},
                                {"backend", 'b', PKV_CLI_STRING, &backend, 0},
                                {"calibration", 'c', PKV_CLI_STRING, &cal, 0},
                                {"quiet", 'q', PKV_CLI_FLAG, &quiet, 0}};
    int rc = pkv_cli_options("plan", argc, argv, opts, sizeof opts / sizeof *opts, plan_usage);
    if (rc >= 0) return rc;
    if (optind != argc - 1) {
        fprintf(stderr, "usage: pkvsim plan PLAN.json [--json OUT] [-b BACKEND] [-c CAL] [-q] "
                        "(pkvsim plan --help)\n");
        return 2;
    }
    char *end;
    const long jobs = strtol(jobs_s, &end, 10);
    if (*end || end == jobs_s || jobs < 1 || jobs > PKV_PLAN_MAX_JOBS || (jobs > 1 && !output)) {
        fprintf(stderr, "pkvsim plan: --jobs %s: %s\n", jobs_s,
                jobs > 1 && jobs <= PKV_PLAN_MAX_JOBS && !*end
                    ? "give -o OUT.h5 too (the processes' runs meet in its folder)"
                    : "a count of processes from 1 to 64");
        return 2;
    }
    planner pl = {.path = argv[optind],
                  .ov = {.backend = backend, .calibration = cal},
                  .stop = stop,
                  .quiet = quiet,
                  .out = output,
                  .lock = -1};
    pkv_err e;
    answer *ans = NULL;
    rc = 1;
    const char *in[] = {pl.path, output};
    const char *what[] = {"the plan file", "--output"};
    if ((json && pkv_output_ok(json, in, what, output ? 2 : 1, "--json", &e)) ||
        (output && pkv_output_ok(output, in, what, 1, "--output", &e))) {
        fprintf(stderr, "pkvsim plan: %s\n", e.msg);
        return 2;
    }
    if (!(pl.base = pkv_json_read(pl.path, &e))) goto fail;
    cJSON *plan = cJSON_DetachItemFromObjectCaseSensitive(pl.base, "plan");
    const int prc = pkv_plan_parse(&pl.p, plan, pl.path, &pl.ov, &e);
    cJSON_Delete(plan);
    if (prc || (pl.out && pkv_plan_open_output(&pl, &e))) goto fail;
    pl.evals = malloc(sizeof *pl.evals * MAX_EVALS);
    ans = calloc((size_t)pl.p.load.n * pl.p.n_candidates, sizeof *ans);
    if (!pl.evals || !ans) {
        pkv_fail(&e, "out of memory");
        goto fail;
    }
    if (jobs > 1 && spread(&pl, ans, jobs)) goto stopped;
    bool all = true;
    if (search_all(&pl, ans, &all)) goto stopped;
    printf("\n%d runs", pl.n_evals);
    if (pl.out) printf(" (%d read from runs kept before), into %s", pl.reused, pl.out);
    printf("; prices %s; held-out errors %s\n", pl.p.prices_note,
           pkv_vfile_stem(pl.p.held_out_file));
    rc = json && write_json(&pl, ans, json) ? 1 : all ? 0 : 3;
    goto out;
stopped:
    rc = stop && *stop ? 128 + (int)*stop : 1;
    if (stop && *stop)
        fprintf(stderr, "pkvsim plan: stopped by a signal after %d runs%s\n", pl.n_evals,
                pl.out ? " (kept: running it again goes on from them)" : "");
    goto out;
fail:
    fprintf(stderr, "pkvsim plan: %s\n", e.msg);
out:
    if (pl.out && pl.evals && pkv_plan_assemble(&pl, &e)) {
        fprintf(stderr, "pkvsim plan: %s\n", e.msg);
        rc = 1;
    }
    pkv_plan_close_output(&pl);
    free(ans), free(pl.evals);
    pkv_plan_free(&pl.p);
    cJSON_Delete(pl.base);
    return rc;
}
