/* Helpers shared by the pkvsim commands. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "pkv_assert.h"

int pkv_cli_options(const char *cmd, int argc, char **argv, const pkv_cli_opt *opts, int n,
                    void (*help)(void)) {
    enum { MOST = 16, HELP = 1000 };
    struct option lo[MOST + 2];
    char shorts[3 * MOST + 3], *sp = shorts;
    PKV_ASSERT(n <= MOST);
    for (int i = 0; i < n; i++) {
        const bool arg = opts[i].kind != PKV_CLI_FLAG && opts[i].kind != PKV_CLI_BITS;
        lo[i] = (struct option){opts[i].name, arg ? required_argument : no_argument, 0,
                                opts[i].letter ? opts[i].letter : 256 + i};
        if (opts[i].letter) {
            *sp++ = opts[i].letter;
            if (arg) *sp++ = ':';
        }
    }
    lo[n] = (struct option){"help", no_argument, 0, HELP};
    lo[n + 1] = (struct option){0, 0, 0, 0};
    *sp++ = 'h', *sp = 0;
    optind = 1;
    opterr = 0; /* the message below names the command */
    for (int c; (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1;) {
        if (c == HELP || c == 'h') {
            help();
            return 0;
        }
        int i = 0;
        while (i < n && (opts[i].letter ? opts[i].letter : 256 + i) != c) i++;
        if (i == n) { /* getopt's '?': an unknown option, or one without its value */
            fprintf(
                stderr,
                "pkvsim %s: %s: unknown option, or its value is missing (see pkvsim %s --help)\n",
                cmd, argv[optind - 1], cmd);
            return 2;
        }
        const pkv_cli_opt *o = &opts[i];
        switch (o->kind) {
        case PKV_CLI_STRING:
            *(const char **)o->dst = optarg;
            break;
        case PKV_CLI_FLAG:
            *(int *)o->dst = 1;
            break;
        case PKV_CLI_BITS:
            *(unsigned *)o->dst |= (unsigned)o->most;
            break;
        case PKV_CLI_COUNT:
            if (pkv_cli_parse_count(cmd, o->name, optarg, o->most, o->dst)) return 2;
            break;
        case PKV_CLI_LIST: {
            pkv_cli_list *l = o->dst;
            if (l->n == o->most) {
                fprintf(stderr, "pkvsim %s: more than %d --%s values\n", cmd, o->most, o->name);
                return 2;
            }
            l->v[l->n++] = optarg;
            break;
        }
        }
    }
    return -1;
}

int pkv_cli_parse_count(const char *cmd, const char *opt, const char *s, int most, int *out) {
    uint64_t v;
    if (pkv_cli_parse_u64(s, &v) || v < 1 || v > (uint64_t)most) {
        fprintf(stderr, "pkvsim %s: --%s: \"%s\" is not in 1..%d\n", cmd, opt, s, most);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int pkv_cli_parse_widths(const char *cmd, const char *s, int *out, int cap, int *n) {
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 8192 || *n == cap || (*end && *end != ',')) {
            fprintf(stderr,
                    "pkvsim %s: --rows: \"%s\" is not a list of up to %d widths in 1..8192\n", cmd,
                    s, cap);
            return -1;
        }
        out[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

int pkv_cli_parse_u64(const char *s, uint64_t *out) {
    char *end;
    if (!s || !isdigit((unsigned char)*s)) return -1; /* no sign, no space */
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno == ERANGE) return -1;
    *out = v;
    return 0;
}

/* --seed: a whole number in [0, 2^64 - 1], the range run.seed takes. */
static int parse_seed(const char *text, uint64_t *seed) {
    uint64_t v;
    if (pkv_cli_parse_u64(text, &v)) {
        fprintf(stderr, "pkvsim: --seed: \"%s\" is not a whole number in [0, 2^64 - 1]\n", text);
        return -1;
    }
    *seed = v;
    return 0;
}

/* The one EXPERIMENT.json argument left after the options, loaded, with --seed
 * applied. Returns 0, or the exit code (the message is printed). */
int pkv_cli_load_experiment(int argc, char **argv, const char *cmd, const char *seed,
                            pkv_config *cfg) {
    if (optind + 1 != argc) {
        fprintf(stderr, "pkvsim %s: expected exactly one EXPERIMENT.json (see pkvsim --help)\n",
                cmd);
        return 2;
    }
    pkv_err e;
    if (pkv_config_load(cfg, argv[optind], &e)) {
        fprintf(stderr, "pkvsim: %s\n", e.msg);
        return 1;
    }
    if (seed && parse_seed(seed, &cfg->seed)) {
        pkv_config_free(cfg);
        return 1;
    }
    return 0;
}

int pkv_cli_apply(pkv_config *cfg, const pkv_cli_overrides *o) {
    if (o->seed && parse_seed(o->seed, &cfg->seed)) return 1;
    if (o->backend) {
        int k = -1;
        for (int i = 0; pkv_backend_names[i]; i++)
            if (strcmp(pkv_backend_names[i], o->backend) == 0) k = i;
        if (k < 0) {
            fprintf(stderr, "pkvsim: --backend: \"%s\" is not one of auto, model, cpu, cuda\n",
                    o->backend);
            return 1;
        }
        cfg->backend = k;
    }
    const char *paths[2][2] = {{"--output", o->output}, {"--calibration", o->calibration}};
    for (int i = 0; i < 2; i++)
        if (paths[i][1] && (!*paths[i][1] || strlen(paths[i][1]) >= sizeof cfg->output)) {
            fprintf(stderr, "pkvsim: %s: %s\n", paths[i][0],
                    *paths[i][1] ? "longer than 1023 characters" : "names no file");
            return 1;
        }
    if (o->output) snprintf(cfg->output, sizeof cfg->output, "%s", o->output);
    if (o->calibration) snprintf(cfg->calibration, sizeof cfg->calibration, "%s", o->calibration);
    if (o->route) {
        pkv_route_policy probe;
        if (pkv_policy_init(&probe, o->route)) {
            fprintf(stderr,
                    "pkvsim: --route: \"%s\" is not a route or policy (ref_paged, pkv_bucket, "
                    "pkv_workqueue, pkv_fused, flashinfer, flashinfer_tc, adaptive, oracle)\n",
                    o->route);
            return 1;
        }
        snprintf(cfg->policy, sizeof cfg->policy, "%s", o->route);
    }
    for (const char *p = o->slo; p && *p;) {
        char key[8];
        double ms;
        int used;
        if (sscanf(p, "%7[a-z2]=%lf%n", key, &ms, &used) != 2 || !(ms >= 0 && ms <= 1e12) ||
            (strcmp(key, "ttft") && strcmp(key, "tpot") && strcmp(key, "e2el")) ||
            (p[used] && p[used] != ',')) {
            fprintf(stderr,
                    "pkvsim: --slo: \"%s\" is not ttft=MS,tpot=MS,e2el=MS (any of them, "
                    "milliseconds >= 0)\n",
                    o->slo);
            return 1;
        }
        double *dst = !strcmp(key, "ttft")   ? &cfg->slo.ttft
                      : !strcmp(key, "tpot") ? &cfg->slo.tpot
                                             : &cfg->slo.e2el;
        *dst = ms * 1e-3;
        p += used + (p[used] == ',');
    }
    /* a fleet's pools take the calibration and policy given here, unless they name
     * their own */
    for (int i = 0; i < cfg->fleet.n_pools; i++) {
        pkv_pool *p = &cfg->fleet.pools[i];
        if (o->calibration && !p->own_calibration)
            snprintf(p->cfg->calibration, sizeof p->cfg->calibration, "%s", o->calibration);
        if (o->route && !p->own_policy)
            snprintf(p->cfg->policy, sizeof p->cfg->policy, "%s", o->route);
        if (pkv_config_resolve(p->cfg)) {
            fputs("pkvsim: out of memory\n", stderr);
            return 1;
        }
    }
    if (pkv_config_resolve(cfg)) {
        fputs("pkvsim: out of memory\n", stderr);
        return 1;
    }
    return 0;
}

void pkv_cli_join_args(char *buf, size_t n, int argc, char **argv) {
    buf[0] = 0;
    for (int i = 0; i < argc; i++) {
        strncat(buf, argv[i], n - strlen(buf) - 1);
        if (i + 1 < argc) strncat(buf, " ", n - strlen(buf) - 1);
    }
}

FILE *pkv_cli_out_open(const char *cmd, pkv_out *o, const char *path) {
    FILE *f = pkv_out_open(o, path);
    if (!f) fprintf(stderr, "pkvsim %s: cannot write %s: %s\n", cmd, path, strerror(errno));
    return f;
}

int pkv_cli_out_close(const char *cmd, pkv_out *o, int rc) {
    if (!o->f) return rc;
    if (pkv_out_close(o, rc == 0) && rc == 0) {
        fprintf(stderr, "pkvsim %s: cannot write %s: %s\n", cmd, o->path, strerror(errno));
        return 1;
    }
    return rc;
}

void pkv_cli_printf2(FILE *const outs[2], const char *fmt, ...) {
    for (int f = 0; f < 2; f++) {
        if (!outs[f]) continue;
        va_list ap;
        va_start(ap, fmt);
        vfprintf(outs[f], fmt, ap);
        va_end(ap);
    }
}

const char *pkv_cli_utc(char *buf, const char *fmt) {
    const time_t now = time(NULL);
    strftime(buf, 32, fmt, gmtime(&now));
    return buf;
}
