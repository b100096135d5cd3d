/* Trace readers: the two real traces shipped in experiments/traces/ load with the right row counts
 * and first and last values; every malformed-input class gives its documented error with the line
 * number; the skip policy counts; options (window, first N, scales, tick spreading) and the other
 * formats (vidur, study, JSON array) work. */
#include "check.h"
#include "trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static const char *write_tmp(const char *name, const char *text) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

/* Load `text` as a CSV with the azure mapping; return 0 and the trace, or -1 and e. */
static int load_text(const char *name, const char *text, const char *cols, int skip, pkv_trace *tr,
                     pkv_err *e) {
    pkv_trace_spec s;
    pkv_trace_spec_default(&s);
    snprintf(s.path, sizeof s.path, "%s", write_tmp(name, text));
    pkv_trace_columns_builtin(cols, &s.cols);
    s.time_optional = strcmp(cols, "study") == 0;
    s.step_s = 0.5;
    s.skip_bad = skip;
    return pkv_trace_load(tr, &s, e);
}

static void expect_error(const char *name, const char *text, const char *want) {
    pkv_trace tr;
    pkv_err e = {""};
    int rc = load_text(name, text, "azure", 0, &tr, &e);
    CHECK(rc == -1 && strstr(e.msg, want),
          "%s: wanted an error containing \"%s\", got rc %d \"%s\"", name, want, rc, e.msg);
    if (rc == 0) pkv_trace_free(&tr);
}

/* Each case's files in a folder of its own process's. */
static void dir_begin(void) {
    snprintf(dir, sizeof dir, "/tmp/pkv-trace-%d", (int)getpid());
    char cmd[128];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    CHECK(system(cmd) == 0, "mkdir");
}

static void dir_end(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

/* The two real traces load with their row counts and first and last values. */
static void real_traces_load_their_rows(void) {
    dir_begin();
    const char *moon = PKV_TRACE_DIR "/mooncake2025_synthetic.jsonl";
    const char *azure = PKV_TRACE_DIR "/azure2023_code.csv";
    pkv_trace_spec s;
    pkv_trace tr;
    pkv_err e;
    pkv_trace_spec_default(&s);
    snprintf(s.path, sizeof s.path, "%s", azure);
    CHECK(pkv_trace_load(&tr, &s, &e) == 0, "azure: %s", e.msg);
    CHECK(tr.n == 8819 && tr.skipped == 0, "azure rows %zu", tr.n);
    CHECK(tr.t[0] == 0 && tr.prompt[0] == 4808 && tr.decode[0] == 10, "azure first row");
    CHECK(fabs(tr.t[1] - 0.052) < 1e-6 && tr.prompt[1] == 3180, "azure second row: %.9f", tr.t[1]);
    /* last: 2023-11-16 19:14:19.9280160 - 18:17:03.9799600 = 3435.948056 s */
    CHECK(fabs(tr.t[tr.n - 1] - 3435.948056) < 1e-5 && tr.prompt[tr.n - 1] == 549 &&
              tr.decode[tr.n - 1] == 173,
          "azure last row: %.6f %d %d", tr.t[tr.n - 1], tr.prompt[tr.n - 1], tr.decode[tr.n - 1]);
    pkv_trace_free(&tr);

    pkv_trace_spec_default(&s);
    pkv_trace_columns_builtin("mooncake", &s.cols);
    snprintf(s.path, sizeof s.path, "%s", moon);
    CHECK(pkv_trace_load(&tr, &s, &e) == 0, "mooncake: %s", e.msg);
    CHECK(tr.n == 3993, "mooncake rows %zu", tr.n);
    CHECK(tr.t[0] == 0 && tr.prompt[0] == 40160 && tr.decode[0] == 6, "mooncake first row");
    CHECK(fabs(tr.t[tr.n - 1] - 1022.025) < 1e-9 && tr.prompt[tr.n - 1] == 18440 &&
              tr.decode[tr.n - 1] == 83,
          "mooncake last row");
    pkv_trace_free(&tr);
    dir_end();
}

/* Options on the mooncake trace: window, first N, scales, tick spreading (a tick wider
 * than the gap to the next timestamp spreads the rows at 0 over the second before the row
 * at 1, not over 100 s, which reordered them). */
static void options_window_first_n_and_ticks(void) {
    dir_begin();
    const char *moon = PKV_TRACE_DIR "/mooncake2025_synthetic.jsonl";
    pkv_trace_spec s;
    pkv_trace tr;
    pkv_err e;
    pkv_trace_spec_default(&s);
    pkv_trace_columns_builtin("mooncake", &s.cols);
    snprintf(s.path, sizeof s.path, "%s", moon);
    s.window_begin = 100, s.window_end = 200, s.first_n = 50, s.rate_scale = 2, s.time_scale = 1;
    CHECK(pkv_trace_load(&tr, &s, &e) == 0, "window: %s", e.msg);
    CHECK(tr.n == 50 && tr.t[0] == 0, "window/first_n: %zu rows", tr.n);
    pkv_trace_free(&tr);
    pkv_trace_spec_default(&s);
    pkv_trace_columns_builtin("mooncake", &s.cols);
    snprintf(s.path, sizeof s.path, "%s", moon);
    s.spread_tick_s = 1e-3; /* the first rows share timestamp 0: spread over 1 ms */
    CHECK(pkv_trace_load(&tr, &s, &e) == 0, "spread: %s", e.msg);
    CHECK(tr.t[0] == 0 && tr.t[1] > 0 && tr.t[1] < 1e-3, "tick spread: t[1] = %g", tr.t[1]);
    for (size_t i = 1; i < tr.n; i++)
        if (tr.t[i] < tr.t[i - 1]) {
            CHECK(0, "spread times go backwards at %zu", i);
            break;
        }
    pkv_trace_free(&tr);

    /* A tick wider than the gap to the next timestamp: the rows at 0 spread over the
     * second before the row at 1 (not over 100 s, which reordered them). */
    pkv_trace_spec_default(&s);
    snprintf(s.path, sizeof s.path, "%s",
             write_tmp("ticks.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,5\n0,"
                                    "10,5\n0,10,5\n0,10,5\n1,10,5\n2,10,5\n"));
    pkv_trace_columns_builtin("vidur", &s.cols);
    s.spread_tick_s = 100;
    CHECK(pkv_trace_load(&tr, &s, &e) == 0, "ticks: %s", e.msg);
    CHECK(tr.n == 6 && tr.t[3] == 0.75 && tr.t[4] == 1 && tr.t[5] == 2,
          "a tick wider than the gap: %g %g %g %g %g %g", tr.t[0], tr.t[1], tr.t[2], tr.t[3],
          tr.t[4], tr.t[5]);
    for (size_t i = 1; i < tr.n; i++)
        if (tr.t[i] < tr.t[i - 1]) {
            CHECK(0, "wide-tick spread reorders at %zu", i);
            break;
        }
    pkv_trace_free(&tr);
    dir_end();
}

/* Every malformed-input class gives its documented error with its line number: CSV and
 * JSON Lines, numbers out of range refused before any cast, lenient parsing refused and
 * named; 2024's Feb 29 is a day. */
static void malformed_inputs_named_by_line(void) {
    dir_begin();
    pkv_trace_spec s;
    pkv_trace tr;
    pkv_err e;
    const char *H = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    char buf[512];
    expect_error("empty.csv", "", "empty file");
    expect_error("nocol.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.0,5\n",
                 ":1: missing column \"GeneratedTokens\"");
    snprintf(buf, sizeof buf, "%s2023-11-16 18:17:03.0,12,4\n2023-11-16 18:17:04.0,1x2,4\n", H);
    expect_error("nonnum.csv", buf, ":3: field \"ContextTokens\": not a number");
    snprintf(buf, sizeof buf, "%s2023-11-16 18:17:03.0,12,-4\n", H);
    expect_error("neg.csv", buf, ":2: field \"GeneratedTokens\": negative length");
    snprintf(buf, sizeof buf, "%s2023-11-16 18:17:03.0,12,4\n2023-11-16 18:17:02.0,12,4\n", H);
    expect_error("back.csv", buf, ":3: field \"TIMESTAMP\": timestamp goes backwards");
    snprintf(buf, sizeof buf, "%s2023-11-16 18:17:03.0,12,4\n2023-11-16 18:17:04.0,12", H);
    expect_error("trunc.csv", buf, ":3: truncated line");
    snprintf(buf, sizeof buf, "%s2023-11-16 25:17:03.0,12,4\n", H);
    expect_error("date.csv", buf, ":2: field \"TIMESTAMP\": not a datetime");
    expect_error("header-only.csv", H, "no rows left");
    /* JSON Lines: a truncated last line, a missing field. */
    pkv_trace_spec_default(&s);
    pkv_trace_columns_builtin("mooncake", &s.cols);
    snprintf(s.path, sizeof s.path, "%s",
             write_tmp("bad.jsonl",
                       "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2}\n"
                       "{\"timestamp\": 3, \"input_length\": 5}\n"));
    CHECK(pkv_trace_load(&tr, &s, &e) == -1 &&
              strstr(e.msg, ":2: field \"output_length\": missing"),
          "jsonl missing field: %s", e.msg);
    snprintf(s.path, sizeof s.path, "%s",
             write_tmp("trunc.jsonl",
                       "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2}\n"
                       "{\"timestamp\": 3, \"input_len"));
    CHECK(pkv_trace_load(&tr, &s, &e) == -1 && strstr(e.msg, ":2: invalid JSON object (truncated"),
          "jsonl truncated: %s", e.msg);
    /* Numbers out of range are refused before any cast or reaching the clock: a 2^40
     * prompt (it ran as 1 token), a timestamp of 1e999 (infinite), one of 1e300 ms. */
    static const struct {
        const char *name, *row, *want;
    } range[] = {
        {"big.jsonl", "{\"timestamp\": 3, \"input_length\": 1099511627776, \"output_length\": 2}",
         ":2: field \"input_length\": length too large"},
        {"inf.jsonl", "{\"timestamp\": 1e999, \"input_length\": 5, \"output_length\": 2}",
         ":2: field \"timestamp\": not a finite number"},
        {"far.jsonl", "{\"timestamp\": 1e300, \"input_length\": 5, \"output_length\": 2}",
         ":2: field \"timestamp\": timestamp too large"},
        {"frac.jsonl", "{\"timestamp\": 3, \"input_length\": 5, \"output_length\": 2.5}",
         ":2: field \"output_length\": not an integer"},
    };
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2}\n%s\n",
                 range[i].row);
        snprintf(s.path, sizeof s.path, "%s", write_tmp(range[i].name, text));
        CHECK(pkv_trace_load(&tr, &s, &e) == -1 && strstr(e.msg, range[i].want), "%s: %s",
              range[i].name, e.msg);
    }
    snprintf(buf, sizeof buf, "%s2023-11-16 18:17:03.0,5,2\n2023-11-16 18:17:04.0,5000000000,2\n",
             H);
    expect_error("big.csv", buf, ":3: field \"ContextTokens\": length too large");
    /* Parsing leniency: hexadecimal, a NUL byte, a thousands separator (a row of another
     * width), an impossible date, each refused and named. */
    static const struct {
        const char *name, *row, *want;
        size_t len;
    } lenient[] = {
        {"hex.csv", "2023-11-16 18:17:04.0,0x10,2\n", ":3: field \"ContextTokens\": not a number",
         0},
        {"nul.csv",
         "2023-11-16 18:17:04.0,12\0"
         "34,2\n",
         ":3: field \"ContextTokens\": not a number", 31},
        {"thousands.csv", "2023-11-16 18:17:04.0,\"1,000\",2\n",
         ":3: a row of another width: 4 fields, the header has 3", 0},
        {"feb31.csv", "2023-02-31 18:17:04.0,5,2\n", ":3: field \"TIMESTAMP\": impossible date", 0},
        {"feb29.csv", "2023-02-29 18:17:04.0,5,2\n", ":3: field \"TIMESTAMP\": impossible date", 0},
    };
    for (size_t i = 0; i < sizeof lenient / sizeof lenient[0]; i++) {
        char text[256];
        size_t hn = (size_t)snprintf(text, sizeof text, "%s2023-01-16 18:17:03.0,5,2\n", H);
        size_t rn = lenient[i].len ? lenient[i].len : strlen(lenient[i].row);
        memcpy(text + hn, lenient[i].row, rn);
        char path[600];
        snprintf(path, sizeof path, "%s", write_tmp(lenient[i].name, ""));
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(text, 1, hn + rn, f) == hn + rn && fclose(f) == 0, "write %s", path);
        pkv_trace_spec_default(&s);
        pkv_trace_columns_builtin("azure", &s.cols);
        snprintf(s.path, sizeof s.path, "%s", path);
        CHECK(pkv_trace_load(&tr, &s, &e) == -1 && strstr(e.msg, lenient[i].want), "%s: %s",
              lenient[i].name, e.msg);
    }
    /* 2024 is a leap year: its Feb 29 is a day. */
    snprintf(buf, sizeof buf, "%s2024-02-29 18:17:03.0,5,2\n", H);
    CHECK(load_text("leap.csv", buf, "azure", 0, &tr, &e) == 0 && tr.n == 1, "leap day: %s", e.msg);
    pkv_trace_free(&tr);
    dir_end();
}

/* Skip policy: bad rows are skipped and counted. */
static void skip_policy_counts_bad_rows(void) {
    dir_begin();
    pkv_trace tr;
    pkv_err e;
    const char *H = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    char buf[512];
    snprintf(buf, sizeof buf,
             "%s2023-11-16 18:17:03.0,12,4\nx,1,1\n2023-11-16 18:17:05.0,-1,4\n"
             "2023-11-16 18:17:06.5,7,3\n",
             H);
    CHECK(load_text("skip.csv", buf, "azure", 1, &tr, &e) == 0 && tr.n == 2 && tr.skipped == 2 &&
              tr.t[1] == 3.5 && tr.prompt[1] == 7,
          "skip policy: rc n=%zu skipped=%zu", tr.n, tr.skipped);
    pkv_trace_free(&tr);
    dir_end();
}

/* The other built-in mappings (vidur, study with and without arrival steps) and the JSON
 * array format. */
static void other_mappings_and_json_array(void) {
    dir_begin();
    pkv_trace_spec s;
    pkv_trace tr;
    pkv_err e;
    CHECK(load_text("vidur.csv",
                    "arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,100,7\n2.25,"
                    "300,9\n",
                    "vidur", 0, &tr, &e) == 0 &&
              tr.n == 2 && tr.t[1] == 1.75 && tr.prompt[1] == 300 && tr.decode[1] == 9,
          "vidur: %s", e.msg);
    pkv_trace_free(&tr);
    CHECK(load_text("study.csv", "prompt_len,decode_len\n8192,256\n65536,128\n", "study", 0, &tr,
                    &e) == 0 &&
              tr.n == 2 && tr.t[1] == 0 && tr.prompt[1] == 65536,
          "study without arrival_step: %s", e.msg);
    pkv_trace_free(&tr);
    CHECK(load_text("study2.csv", "prompt_len,decode_len,arrival_step\n8192,256,0\n100,1,4\n",
                    "study", 0, &tr, &e) == 0 &&
              tr.n == 2 && tr.t[1] == 2.0,
          "study with arrival_step (0.5 s per step): %s", e.msg);
    pkv_trace_free(&tr);
    pkv_trace_spec_default(&s);
    pkv_trace_columns_builtin("mooncake", &s.cols);
    snprintf(s.path, sizeof s.path, "%s",
             write_tmp("arr.json",
                       "[{\"timestamp\": 10, \"input_length\": 5, \"output_length\": 2},"
                       " {\"timestamp\": 1010, \"input_length\": 6, \"output_length\": "
                       "3}]"));
    CHECK(pkv_trace_load(&tr, &s, &e) == 0 && tr.n == 2 && tr.t[1] == 1.0 && tr.decode[1] == 3,
          "json array: %s", e.msg);
    pkv_trace_free(&tr);
    dir_end();
}

static const pkv_test_case cases[] = {
    PKV_CASE(real_traces_load_their_rows),    PKV_CASE(options_window_first_n_and_ticks),
    PKV_CASE(malformed_inputs_named_by_line), PKV_CASE(skip_policy_counts_bad_rows),
    PKV_CASE(other_mappings_and_json_array),
};
PKV_TEST_MAIN(cases)
