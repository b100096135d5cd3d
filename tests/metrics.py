#!/usr/bin/env python3
"""Serving metrics (`pkvsim run --json`, vLLM's definitions) against an independent
computation from the run's own /requests and /steps: counts, throughputs, TTFT, TPOT,
E2E latency (mean, median, population std, chosen percentiles), ITL (its mean exactly;
its median and percentiles within the histogram's 0.05% where a closed loop of one row
makes every gap a step's time), goodput under constructed SLOs. Usage: metrics.py PKVSIM SRC"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

pkvsim, src = sys.argv[1], os.path.abspath(sys.argv[2])
tmp = tempfile.mkdtemp()
fails = []
cal = os.path.join(src, "experiments/calibration/h200.json")


def run(name, workload, serving, slo_cli=None, pcts=None):
    exp = os.path.join(tmp, name + ".json")
    e = {"workload": workload, "serving": serving, "route": {"calibration": cal},
         "run": {"backend": "model"}}
    if pcts:
        e["run"]["percentiles"] = pcts
    json.dump(e, open(exp, "w"))
    out, js = os.path.join(tmp, name + ".h5"), os.path.join(tmp, name + "_metrics.json")
    args = [pkvsim, "run", "-q", "-o", out, "--json", js, "--detailed", exp]
    if slo_cli:
        args[2:2] = ["--slo", slo_cli]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        fails.append(f"{name}: {r.stderr.strip()}")
        return None, None
    return h5py.File(out), json.load(open(js))


def close(name, got, want, rel=1e-5):
    if got is None or not np.all(np.isclose(got, want, rtol=rel, atol=1e-12)):
        fails.append(f"{name}: {got} against {want}")


# An open loop with a queue: TTFT, TPOT, E2E and the throughputs.
f, m = run("open", {"arrival": {"process": "gamma", "rate": 40, "cv": 2}, "num_requests": 300,
                    "prompt": {"dist": "lognormal", "median": 2048, "sigma": 1},
                    "decode": {"dist": "uniform", "min": 1, "max": 200}},
           {"max_active": 16, "kv_pages": 65536}, pcts=[25, 50, 95, 99.9])
if f:
    q = f["requests"]
    fin = q["state"][:] == 3
    arr, first, done = q["t_arrival"][:], q["t_first_token"][:][fin], q["t_finish"][:][fin]
    gen, prompt = q["generated"][:][fin], q["prompt_len"][:][fin]
    ttft, e2el = first - arr[fin], done - arr[fin]
    tpot = ((e2el - ttft) / np.maximum(gen - 1, 1))[gen > 1]
    dur = done.max() - arr.min()
    close("completed", m["completed"], fin.sum())
    close("total_input_tokens", m["total_input_tokens"], prompt.sum())
    close("total_output_tokens", m["total_output_tokens"], gen.sum())
    close("duration", m["duration"], dur)
    close("request_throughput", m["request_throughput"], fin.sum() / dur)
    close("output_throughput", m["output_throughput"], gen.sum() / dur)
    close("total_token_throughput", m["total_token_throughput"], (gen.sum() + prompt.sum()) / dur)
    for name, x in (("ttft", ttft), ("tpot", tpot), ("e2el", e2el)):
        x = x.astype(np.float32).astype(np.float64)  # the run keeps them as floats
        close(f"mean_{name}_ms", m[f"mean_{name}_ms"], 1e3 * x.mean())
        close(f"median_{name}_ms", m[f"median_{name}_ms"], 1e3 * np.median(x))
        close(f"std_{name}_ms", m[f"std_{name}_ms"], 1e3 * x.std())
        for p in (25, 50, 95, 99.9):
            close(f"p{p:g}_{name}_ms", m[f"p{p:g}_{name}_ms"], 1e3 * np.percentile(x, p))
    # Every gap of a request sums to its time from first token to finish.
    close("mean_itl_ms", m["mean_itl_ms"], 1e3 * (e2el - ttft).sum() / (gen - 1).sum(), 1e-9)
    s = f["summary"].attrs
    close("/summary mean_ttft", s["mean_ttft"], m["mean_ttft_ms"] / 1e3)
    if m["request_goodput"] != m["request_throughput"] or m["slo_attainment"] != 1:
        fails.append("without SLOs every finished request counts")

    # Goodput under SLOs at the medians: recount from the requests.
    t1, t2, t3 = np.median(ttft), np.median(tpot), np.percentile(e2el, 80)
    f2, m2 = run("slo", {"arrival": {"process": "gamma", "rate": 40, "cv": 2}, "num_requests": 300,
                          "prompt": {"dist": "lognormal", "median": 2048, "sigma": 1},
                          "decode": {"dist": "uniform", "min": 1, "max": 200}},
                 {"max_active": 16, "kv_pages": 65536},
                 slo_cli=f"ttft={1e3 * t1:.9f},tpot={1e3 * t2:.9f},e2el={1e3 * t3:.9f}")
    if m2:
        tp_all = np.where(gen > 1, (e2el - ttft) / np.maximum(gen - 1, 1), 0)
        good = ((ttft <= t1 * (1 + 1e-9)) & (tp_all <= t2 * (1 + 1e-9)) & (e2el <= t3 * (1 + 1e-9))).sum()
        close("request_goodput", m2["request_goodput"], good / dur, 1e-3)
        close("slo_attainment", m2["slo_attainment"], good / fin.sum(), 1e-3)
        if not 0 < good < fin.sum():
            fails.append(f"the SLOs should split the requests: {good} of {fin.sum()}")

# One row at a time: every inter-token gap is a decode step's time.
f, m = run("b1", {"arrival": {"process": "closed", "concurrency": 1}, "num_requests": 6,
                  "prompt": {"dist": "uniform", "min": 1000, "max": 60000},
                  "decode": {"dist": "fixed", "value": 400}},
           {"max_active": 1, "kv_pages": 8192})
if f:
    t = f["steps"]["t_predicted"][:]
    gaps = np.delete(t, np.arange(0, len(t), 400))  # each request's first step is its TTFT
    close("ITL count", len(gaps), 6 * 399)
    close("mean_itl_ms", m["mean_itl_ms"], 1e3 * gaps.mean(), 1e-9)
    close("std_itl_ms", m["std_itl_ms"], 1e3 * gaps.std(), 1e-6)
    for p in (50, 90, 99):
        # the histogram's value is its bin's centre: within half a bin of the rank's value
        lo = np.sort(gaps)[int(np.floor(p / 100 * (len(gaps) - 1)))]
        close(f"p{p}_itl_ms", m[f"p{p}_itl_ms"], 1e3 * lo, 6e-4)
    close("median_itl_ms", m["median_itl_ms"], 1e3 * np.sort(gaps)[(len(gaps) - 1) // 2], 6e-4)

# vLLM's result file whole: its keys (`vllm bench serve --save-result`), the setup of
# the experiment, the per-request arrays against /requests, the peak output second
# recomputed from the arrays; a run cut short counts its unfinished requests as failed.
VLLM_KEYS = ["date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id",
             "num_prompts", "request_rate", "burstiness", "max_concurrency", "duration",
             "completed", "failed", "total_input_tokens", "total_output_tokens",
             "request_throughput", "request_goodput", "output_throughput",
             "total_token_throughput", "input_lens", "output_lens", "ttfts", "itls",
             "start_times", "generated_texts", "errors", "max_output_tokens_per_s",
             "max_concurrent_requests", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms",
             "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "mean_itl_ms", "mean_e2el_ms"]
for name, arrival, extra in (
        ("vllm_gamma", {"process": "gamma", "rate": 60, "cv": 2}, {}),
        ("vllm_closed", {"process": "closed", "concurrency": 5}, {}),
        ("vllm_cut", {"process": "poisson", "rate": 300}, {"max_time_s": 0.15})):
    wl = {"arrival": arrival, "num_requests": 80, "prompt": {"dist": "uniform", "min": 100,
          "max": 3000}, "decode": {"dist": "uniform", "min": 2, "max": 60}}
    exp = os.path.join(tmp, name + ".json")
    json.dump({"workload": wl, "serving": {"max_active": 8, "kv_pages": 8192},
               "route": {"calibration": cal}, "run": dict({"backend": "model"}, **extra)},
              open(exp, "w"))
    out, js = os.path.join(tmp, name + ".h5"), os.path.join(tmp, name + "_v.json")
    r = subprocess.run([pkvsim, "run", "-q", "-o", out, "--json", js, "--detailed", exp], capture_output=True,
                       text=True)
    if r.returncode:
        fails.append(f"{name}: {r.stderr.strip()}")
        continue
    v, q = json.load(open(js)), h5py.File(out)["requests"]
    missing = [k for k in VLLM_KEYS if k not in v]
    if missing:
        fails.append(f"{name}: vLLM's keys missing: {missing}")
        continue
    n = len(q["id"])
    done = q["state"][:] == 3
    want_rate = {"vllm_gamma": (60, 0.25, None), "vllm_closed": ("inf", None, 5),
                 "vllm_cut": (300, 1, None)}[name]
    if (v["request_rate"], v["burstiness"], v["max_concurrency"]) != want_rate:
        fails.append(f"{name}: rate, burstiness, max_concurrency {v['request_rate']}, "
                     f"{v['burstiness']}, {v['max_concurrency']} against {want_rate}")
    if v["num_prompts"] != n or v["failed"] != n - done.sum() or v["completed"] != done.sum():
        fails.append(f"{name}: num_prompts {v['num_prompts']} failed {v['failed']} of {n}")
    if name == "vllm_cut" and not (v["failed"] > 0 and sum(e != "" for e in v["errors"]) == v["failed"]):
        fails.append(f"{name}: a run cut short should fail its unfinished requests")
    for k in ("input_lens", "output_lens", "ttfts", "itls", "start_times", "errors"):
        if len(v[k]) != n:
            fails.append(f"{name}: {k} has {len(v[k])} entries for {n} requests")
    order = np.argsort(q["id"][:])
    close(f"{name} input_lens", np.array(v["input_lens"]), q["prompt_len"][:][order], 0)
    close(f"{name} start_times", np.array(v["start_times"]), q["t_arrival"][:][order], 1e-12)
    ttft = (q["t_first_token"][:] - q["t_arrival"][:])[order]
    d = done[order]
    close(f"{name} ttfts", np.array(v["ttfts"])[d], ttft[d], 1e-9)
    gen = q["generated"][:][order]
    lens_ok = all(len(v["itls"][i]) == (gen[i] - 1 if d[i] else len(v["itls"][i]))
                  for i in range(n))
    if not lens_ok or sum(v["output_lens"]) != v["total_output_tokens"]:
        fails.append(f"{name}: itls or output_lens disagree with the tokens")
    # each finished request's last token: start + ttft + its gaps = its finish
    fin_t = q["t_finish"][:][order]
    ends = [v["start_times"][i] + v["ttfts"][i] + sum(v["itls"][i]) for i in range(n) if d[i]]
    close(f"{name} token times end at the finish", np.array(ends), fin_t[d], 1e-9)
    t0 = min(v["start_times"])
    bins = {}
    for i in range(n):
        if not d[i]:
            continue
        t = v["start_times"][i] + v["ttfts"][i]
        for j in range(v["output_lens"][i]):
            bins[int(t - t0)] = bins.get(int(t - t0), 0) + 1
            if j < len(v["itls"][i]):
                t += v["itls"][i][j]
    close(f"{name} max_output_tokens_per_s", v["max_output_tokens_per_s"], max(bins.values()), 0)

# Without --detailed the file has no per-request arrays (vLLM's --save-result without
# --save-detailed); a trace at its own times, at 256x its rate on a server it overloads,
# gives the rate and the
# burstiness its arrivals offered (requests after the first over their span; 1 / cv^2 of
# the gaps), not the throughput the run achieved.
exp = os.path.join(tmp, "trace.json")
json.dump({"model": "llama-3.1-8b",
           "workload": {"trace": {"path": os.path.join(src, "experiments/traces/azure2023_code_first200.csv"),
                                  "rate_scale": 256}},
           "serving": {"max_active": 2}, "route": {"calibration": cal},
           "run": {"backend": "model"}}, open(exp, "w"))
out, js = os.path.join(tmp, "trace.h5"), os.path.join(tmp, "trace_v.json")
r = subprocess.run([pkvsim, "run", "-q", "-o", out, "--json", js, exp], capture_output=True, text=True)
if r.returncode:
    fails.append(f"trace: {r.stderr.strip()}")
else:
    v = json.load(open(js))
    arrays = [k for k in ("input_lens", "output_lens", "ttfts", "itls", "start_times",
                          "generated_texts", "errors") if k in v]
    if arrays or "max_output_tokens_per_s" not in v:
        fails.append(f"--json without --detailed: arrays {arrays}, peak second "
                     f"{'max_output_tokens_per_s' in v}")
    t = np.sort(h5py.File(out)["requests"]["t_arrival"][:])
    g = np.diff(t)
    close("a trace's offered request_rate", v["request_rate"], (len(t) - 1) / (t[-1] - t[0]), 1e-9)
    close("a trace's burstiness", v["burstiness"], g.mean() ** 2 / g.var(ddof=1), 1e-9)
    if not v["request_rate"] > 1.5 * v["request_throughput"]:
        fails.append(f"a trace at 256x: request_rate {v['request_rate']} against the throughput "
                     f"{v['request_throughput']} (the offered rate should exceed it here)")
r = subprocess.run([pkvsim, "run", "-q", "-o", out, "--detailed", exp], capture_output=True, text=True)
if r.returncode != 2 or "--detailed adds the per-request arrays to --json" not in r.stderr:
    fails.append(f"--detailed without --json: exit {r.returncode}, {r.stderr.strip()}")

for x in fails:
    print("FAIL", x)
print(f"{'FAILED' if fails else 'ok'}: serving metrics")
sys.exit(1 if fails else 0)
