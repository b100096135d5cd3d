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
    args = [pkvsim, "run", "-q", "-o", out, "--json", js, exp]
    if slo_cli:
        args[2:2] = ["--slo", slo_cli]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        fails.append(f"{name}: {r.stderr.strip()}")
        return None, None
    return h5py.File(out), json.load(open(js))


def close(name, got, want, rel=1e-5):
    if got is None or not np.isclose(got, want, rtol=rel, atol=1e-12):
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

for x in fails:
    print("FAIL", x)
print(f"{'FAILED' if fails else 'ok'}: serving metrics")
sys.exit(1 if fails else 0)
