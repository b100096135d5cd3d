#!/usr/bin/env python3
"""Engine profiles and validation files (serving.engine, pkvsim validate, pkvsim fit
--engine), each check against something computed here:
- a profile's host work is /steps' and /prefills' t_host_engine exactly as documented
  (fixed + per request + per prompt token; a decode step's share of its window) and
  moves the clock by it (added, or overlapped: the longer of the two); its client_us
  is in every TTFT and finish (a server's client), in none offline, with multi_gpu_us over
  several GPUs; its frontend_us takes a server's requests one at a time (frontend_holds: a
  burst entering the engine whole); its per_proposal_us
  is k passes of host work a speculative step, in series; a forward above its largest graph
  takes at least layers x eager_layer_us; over several GPUs a prefill waits eager_allreduce_us
  an all-reduce, a decode step none; its max_running sizes serving.max_active from the
  KV pool as SGLang sizes max_running_requests;
- serving.engine "pkvsim" writes the very datasets of a run without the key;
- serving.scheduler_steps admits nothing inside a window of decode steps, shares the
  scheduling's host work over it and not exposed_us;
- every shipped validation file parses, names its source and band, and stays in it;
  validate's prediction is the figure of a direct run of the same file;
- pkvsim fit --engine recovers known constants (within 1%) from rows made with them.
Usage: engines.py PKVSIM SOURCE_DIR"""
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
from contextlib import nullcontext

import h5py
import numpy as np

pkvsim, src = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
fails = passes = 0


def check(what, ok):
    global fails, passes
    if ok:
        passes += 1
    else:
        fails += 1
        print("FAIL", what)


def run(args, ok=0):
    p = subprocess.run([pkvsim] + args, capture_output=True, text=True)
    if p.returncode != ok:
        print("FAIL", " ".join(args), "exit", p.returncode, p.stderr[-2000:])
        sys.exit(1)
    return p


def write(name, obj):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


CAL = f"{src}/experiments/calibration/h200.json"
US = {"iteration_us": 700, "per_request_us": 13, "per_prompt_token_us": 0.7}
CLIENT_US = 4000


def profile(name, overlap=False, **us):
    host = dict(US, **us)
    host["overlap"] = overlap
    return write(name, {"name": "test", "host": host, "request": {"client_us": CLIENT_US},
                        "serving": {"max_active": 16}})


def experiment(name, serving, workload=None, seed=1):
    wl = workload or {"arrival": {"process": "closed", "concurrency": 4},
                      "prompt": {"dist": "uniform", "min": 200, "max": 900},
                      "decode": {"dist": "uniform", "min": 10, "max": 40},
                      "num_requests": 12}
    return write(name, {"name": name[:-5], "model": "llama-3.1-8b", "workload": wl,
                        "serving": serving,
                        "route": {"policy": "pkv_workqueue", "calibration": CAL},
                        "run": {"backend": "model", "seed": seed, "record": "full"}})


def h5run(exp):
    out = exp[:-5] + ".h5"
    run(["run", "-q", exp, "-o", out])
    return h5py.File(out, "r")


def cols(f, group):
    return {k: f[group][k][()] for k in f[group].keys()}


# ---- host work in /steps, /prefills and the clock ----------------------------------
for overlap in (False, True):
    fixed = 5500 if overlap else US["iteration_us"]  # overlapped: as long as some steps
    prof = profile(f"prof_{int(overlap)}.json", overlap, iteration_us=fixed)
    f = h5run(experiment(f"chunked{int(overlap)}.json",
                         {"engine": prof, "scheduler": "chunked", "token_budget": 512}))
    s = cols(f, "steps")
    want = 1e-6 * (fixed + US["per_request_us"] * (s["rows"] + s["prefill_chunks"])
                   + US["per_prompt_token_us"] * s["prefill_tokens"])
    check(f"chunked overlap {overlap}: t_host_engine is fixed + per request + per token",
          np.allclose(s["t_host_engine"], want, rtol=1e-12, atol=0))
    adv = np.maximum(s["t_predicted"], want) if overlap else s["t_predicted"] + want
    gaps = np.diff(s["t_sim"])  # a closed loop: each step starts when the last ends
    check(f"chunked overlap {overlap}: each step moves the clock by "
          f"{'the longer of GPU and host' if overlap else 'GPU + host'}",
          np.allclose(gaps, adv[:-1], rtol=1e-9, atol=1e-12))
    if overlap:
        check("overlap: steps where the host is longer and where the GPU is",
              (want > s["t_predicted"]).any() and (want < s["t_predicted"]).any())

prof = profile("prof_pf.json")
f = h5run(experiment("pf.json", {"engine": prof, "scheduler": "prefill_first"}))
p = cols(f, "prefills")
want = 1e-6 * (US["iteration_us"] + US["per_request_us"] * p["requests"]
               + US["per_prompt_token_us"] * p["tokens"])
check("prefill batches: t_host_engine", np.allclose(p["t_host_engine"], want, rtol=1e-12))
check("prefill batches: t_advance = prediction + host",
      np.allclose(p["t_advance"], p["t_predicted"] + want, rtol=1e-12))

# the client's lag: every TTFT and finish, a server's client only
base = experiment("client_srv.json", {"engine": prof, "client": "server"})
off = experiment("client_off.json", {"engine": prof, "client": "offline"})
a, b = cols(h5run(base), "requests"), cols(h5run(off), "requests")
check("client_us: in every first token and finish (server), none offline",
      np.allclose(a["t_first_token"] - b["t_first_token"], CLIENT_US * 1e-6, atol=1e-12)
      and np.allclose(a["t_finish"] - b["t_finish"], CLIENT_US * 1e-6, atol=1e-12)
      and np.array_equal(a["t_arrival"], b["t_arrival"]))
# over several GPUs multi_gpu_us beside it, a server's client only
MULTI_US = 1500
pm = write("prof_multi.json", {"name": "test", "host": dict(US, overlap=False),
                               "request": {"client_us": CLIENT_US, "multi_gpu_us": MULTI_US},
                               "serving": {"max_active": 16}})
lag = {}
for tp in (1, 2):
    for client in ("server", "offline"):
        e = json.load(open(experiment(f"multi{tp}{client}.json", {"engine": pm, "client": client})))
        e["model"] = {"preset": "llama-3.1-8b", "tensor_parallel": tp}
        lag[tp, client] = cols(h5run(write(f"multi{tp}{client}.json", e)), "requests")
check("multi_gpu_us: at tensor parallel 2 in every first token and finish beside client_us "
      "(server), at 1 and offline none",
      all(np.allclose(lag[tp, "server"][k] - lag[tp, "offline"][k],
                      (CLIENT_US + (MULTI_US if tp > 1 else 0)) * 1e-6, atol=1e-12)
          for tp in (1, 2) for k in ("t_first_token", "t_finish")))

# the server's front-end: frontend_us a request, one at a time; with frontend_holds the
# engine takes none of a burst until the front-end has handled all of it; none offline
FE_US = 3000
fe = {}
for holds in (False, True):
    pf = write(f"prof_fe{int(holds)}.json", {
        "name": "test", "host": dict(US), "serving": {"max_active": 16},
        "request": {"client_us": CLIENT_US, "frontend_us": FE_US, "frontend_holds": holds}})
    for client in ("server", "offline"):
        f = h5run(experiment(f"fe{int(holds)}{client}.json",
                             {"engine": pf, "client": client, "scheduler": "prefill_first"}))
        fe[holds, client] = (cols(f, "prefills"), cols(f, "requests"))
p, r = fe[False, "server"]
check("frontend_us: the four sent at once enter one at a time, the first prefill "
      "(request 0 alone) at frontend_us",
      np.isclose(p["t_sim"][0], FE_US * 1e-6, rtol=1e-12) and p["requests"][0] == 1)
p, r = fe[True, "server"]
check("frontend_holds: the engine's first prefill takes all four, once the last is through",
      np.isclose(p["t_sim"][0], 4 * FE_US * 1e-6, rtol=1e-12) and p["requests"][0] == 4)
check("frontend_us: every request admitted at least frontend_us after it arrived (server)",
      all((fe[h, "server"][1]["t_admitted"] - fe[h, "server"][1]["t_arrival"]
           >= FE_US * 1e-6 * (1 - 1e-9)).all() for h in (False, True)))
check("frontend_us: none offline (the first prefill at 0, all four in it)",
      all(fe[h, "offline"][0]["t_sim"][0] == 0 and fe[h, "offline"][0]["requests"][0] == 4
          for h in (False, True)))

# async_output: what an iteration makes reaches the client as the next iteration ends (at
# once where none follows); four sent at once and no successors: the engine's iterations
# are the same with it, only the client's stamps move (a window's tokens and its finishes,
# which go out at the window's end without it, as the iteration after it ends)
for sched, steps in (("prefill_first", 1), ("chunked", 1), ("prefill_first", 4)):
    runs = {}
    for late in (False, True):
        pa = write(f"prof_async{int(late)}.json", {
            "name": "test", "host": dict(US), "serving": {"max_active": 16},
            "request": {"client_us": CLIENT_US, "async_output": late}})
        f = h5run(experiment(f"async{int(late)}{sched}{steps}.json",
                             {"engine": pa, "scheduler": sched, "token_budget": 512,
                              "scheduler_steps": steps},
                             {"arrival": {"process": "closed", "concurrency": 4},
                              "prompt": {"dist": "uniform", "min": 200, "max": 900},
                              "decode": {"dist": "uniform", "min": 10, "max": 40},
                              "num_requests": 4}))
        runs[late] = (cols(f, "steps"), cols(f, "prefills") if "prefills" in f else None,
                      cols(f, "requests"))
    (s0, p0, r0), (s1, p1, r1) = runs[False], runs[True]
    sched = f"{sched}, scheduler_steps {steps}"
    check(f"async_output ({sched}): the engine's iterations are the same",
          np.array_equal(s0["t_sim"], s1["t_sim"]) and
          (p0 is None or np.array_equal(p0["t_sim"], p1["t_sim"])))
    it_end = np.sort(np.concatenate([s0["t_sim"] + s0["t_predicted"] + s0["t_host_engine"] +
                                     s0["t_swap"]] +
                                    ([p0["t_sim"] + p0["t_advance"]] if p0 is not None else [])))
    lag = CLIENT_US * 1e-6

    def next_end(t):
        later = it_end[it_end > t * (1 + 1e-12)]
        return later[0] if len(later) else t
    check(f"async_output ({sched}): each first token and finish as the next iteration ends "
          "(the last finish at once)",
          np.allclose(r1["t_first_token"] - lag, [next_end(t - lag) for t in r0["t_first_token"]],
                      rtol=1e-12, atol=1e-12)
          and np.allclose(r1["t_finish"] - lag, [next_end(t - lag) for t in r0["t_finish"]],
                          rtol=1e-12, atol=1e-12)
          and (r1["t_first_token"] > r0["t_first_token"]).all())

# max_running: serving.max_active from the pool (SGLang's max_running_requests), the
# experiment's own max_active over it, a min above the max refused
def resolved_max_active(name, prof_running, serving):
    pr = write(f"prof_{name}.json", {"name": "test", "host": dict(US), "max_running": prof_running,
                                     "serving": {"max_active": 16}})
    p = run(["run", "-n", experiment(f"{name}.json", dict(serving, engine=pr))])
    return json.loads(p.stdout)["serving"]["max_active"]


SG = {"per_context": 512, "min": 2048, "max": 4096, "pool_share": 0.5}
# llama-3.1-8b's context 131,072 tokens, pages of 16: 50,000 pages hold 800,000 tokens
for pages, want in ((50000, 3125),
                    (20000, 2048), (200, 1600)):
    got = resolved_max_active(f"mr{pages}", SG, {"kv_pages": pages})
    check(f"max_running: {pages} pages give max_active {want} (got {got})", got == want)
got = resolved_max_active("mrmax", dict(SG, max=3000), {"kv_pages": 50000})
check(f"max_running: clamped to its max (got {got})", got == 3000)
got = resolved_max_active("mrown", SG, {"kv_pages": 50000, "max_active": 24})
check(f"max_running: the experiment's max_active stays (got {got})", got == 24)
bad = write("prof_mrbad.json", {"name": "test", "host": dict(US),
                                "max_running": dict(SG, min=4096, max=2048)})
p = run(["run", "-n", experiment("mrbad.json", {"engine": bad})], ok=1)
check("max_running: a min above the max is refused by name",
      "max_running: min 4096 is above max 2048" in p.stderr)

# ---- pkvsim is today's behaviour ------------------------------------------------------
plain = h5run(experiment("plain.json", {"scheduler": "chunked"}))
named = h5run(experiment("named.json", {"scheduler": "chunked", "engine": "pkvsim"}))
same = True
for g in ("steps", "requests", "prefills", "routes"):
    if g not in plain:
        continue
    same &= sorted(plain[g].keys()) == sorted(named[g].keys())
    for k in plain[g].keys():
        same &= np.array_equal(plain[g][k][()], named[g][k][()], equal_nan=True)
for k, v in plain["summary"].attrs.items():
    same &= np.array_equal(v, named["summary"].attrs[k], equal_nan=True)
check("serving.engine pkvsim: the datasets of a run without it", same)
check("no profile: no t_host_engine column", "t_host_engine" not in plain["steps"])

# ---- prefill batches of at most prefill_batch_tokens: a TTFT per forward ---------------
# A forward's 8192 tokens is also the default for a served model under prefill_first;
# 0 puts every admitted prompt in one batch (its TTFTs all at its end).
PBT = ({"arrival": {"process": "closed", "concurrency": 64},
        "prompt": {"dist": "fixed", "value": 1024},
        "decode": {"dist": "fixed", "value": 4}, "num_requests": 64})
for name, given in (("given", {"prefill_batch_tokens": 8192}), ("default", {})):
    exp = experiment(f"pbt_{name}.json", dict({"scheduler": "prefill_first", "max_active": 64}, **given),
                     PBT)
    f = h5run(exp)
    p, r = cols(f, "prefills"), cols(f, "requests")
    ttft = np.sort(r["t_first_token"] - r["t_arrival"])
    check(f"prefill_batch_tokens 8192 ({name}): 64 prompts of 1K in 8 forwards of 8 prompts",
          len(p["tokens"]) == 8 and set(p["tokens"].tolist()) == {8192} and
          json.loads(f["config/resolved"][()])["serving"]["prefill_batch_tokens"] == 8192)
    check(f"each prompt's TTFT is its own forward's end ({name}): 8 values, 8 prompts each, increasing",
          len(np.unique(np.round(ttft, 12))) == 8 and np.all(np.diff(np.unique(np.round(ttft, 12))) > 0))
f = h5run(experiment("pbt_all.json", {"scheduler": "prefill_first", "max_active": 64,
                                      "prefill_batch_tokens": 0}, PBT))
p, r = cols(f, "prefills"), cols(f, "requests")
check("prefill_batch_tokens 0: one batch of every prompt, one TTFT",
      len(p["tokens"]) == 1 and len(np.unique(r["t_first_token"] - r["t_arrival"])) == 1)

# ---- route.gpu: a run without a calibration takes its GPU's, and records its name -------
def resolved_cal(exp):
    out = run(["run", "-n", exp]).stdout
    return json.loads(out)["route"]["calibration"]


served = write("nocal_served.json", {"model": "llama-3.1-8b", "workload": {
    "arrival": {"process": "poisson", "rate": 5}, "num_requests": 4}})
study = write("nocal_study.json", {"workload": {"arrival": {"process": "poisson", "rate": 5},
                                                "num_requests": 4}})
a100 = write("nocal_a100.json", {"model": "llama-3.1-8b", "route": {"gpu": "a100-80gb"},
                                 "workload": {"arrival": {"process": "poisson", "rate": 5},
                                              "num_requests": 4}})
check("no calibration, a served model: the H200's file",
      resolved_cal(served).endswith("/h200.json"))
check("no calibration, the study layer: the H200's file too",
      resolved_cal(study).endswith("/h200.json"))
check("route.gpu a100-80gb: its derived preset", resolved_cal(a100).endswith("/a100-80gb-derived.json"))
h = h5run(served)
cfg = json.loads(h["config/resolved"][()])
check("the run records the calibration it took (/config/resolved)",
      cfg["route"]["calibration"].endswith("/h200.json") and cfg["route"]["gpu"] == "h200")
# The run records the calibration it applied: the file's top level with its kind's section.
with open(CAL) as fh:
    whole = json.load(fh)
applied = json.loads(h["calibration/file"][()])
check("the recorded calibration is the served model's section over the top level",
      applied.get("section") == "served_model" and "study_layer" not in applied and
      "served_model" not in applied and applied["gpu_name"] == whole["gpu_name"] and
      applied["route_model"] == whole["served_model"]["route_model"] and
      applied["beta_gbps"] == whole["served_model"]["beta_gbps"])
hs = h5run(study)
applied = json.loads(hs["calibration/file"][()])
check("a study-layer run applies the study layer's section",
      applied.get("section") == "study_layer" and
      applied["route_model"] == whole["study_layer"]["route_model"] and
      applied["sm_count"] == whole["sm_count"])
bad = write("nocal_bad.json", {"route": {"gpu": "a100-80gb"}, "workload": {
    "arrival": {"process": "poisson", "rate": 5}, "num_requests": 4}})
r = subprocess.run([pkvsim, "run", "-n", bad], capture_output=True, text=True)
check("route.gpu without a study-layer calibration: an error naming the GPUs that have one",
      r.returncode != 0 and "study layer's" in r.stderr and "h200" in r.stderr)

# a GPUs' index naming a file that cannot be read: the error names that file (issue 48, 13)
data = os.path.join(tmp, "data")
os.makedirs(os.path.join(data, "experiments", "calibration"))
idx = json.load(open(f"{src}/experiments/calibration/gpus.json"))
idx["gpus"]["h100-sxm"] = "gone-h100.json"
json.dump(idx, open(os.path.join(data, "experiments", "calibration", "gpus.json"), "w"))
g = write("gone.json", {"model": "llama-3.1-8b", "route": {"gpu": "h100-sxm"}, "workload": {
    "arrival": {"process": "poisson", "rate": 5}, "num_requests": 4}})
r = subprocess.run([pkvsim, "run", "-n", g], capture_output=True, text=True,
                   env=dict(os.environ, PKVSIM_DATA=data))
check("route.gpu whose file in the index cannot be read: the error names the file",
      r.returncode != 0 and "gone-h100.json" in r.stderr and "cannot be read" in r.stderr)

def run_json(name, e, *opts):
    """Experiment e run to NAME.h5 with --json NAME.json: the result, the JSON ({} on
    failure) and the file's path."""
    out, h5 = os.path.join(tmp, f"{name}.json"), os.path.join(tmp, f"{name}.h5")
    r = subprocess.run([pkvsim, "run", *opts, "-o", h5, "--json", out, "--detailed",
                        write(f"{name}_exp.json", e)], capture_output=True, text=True)
    return r, json.load(open(out)) if r.returncode == 0 else {}, h5


# a bound says it ended the run, and every offered request is counted once (issue 48, 12)
for name, fleet in (("alone", None), ("fleet", {"replicas": 2, "router": "least_requests"})):
    e = {"model": "llama-3.1-8b", "workload": {"arrival": {"process": "poisson", "rate": 20},
         "prompt": {"dist": "fixed", "value": 200}, "decode": {"dist": "fixed", "value": 100},
         "num_requests": 100}, "route": {"calibration": CAL},
         "run": {"backend": "model", "max_time_s": 2}}
    if fleet:
        e["fleet"] = fleet
    r, d, _ = run_json(f"bound_{name}", e)
    check(f"max_time_s ({name}): the run says a bound ended it, and offered = completed + "
          f"failed + not arrived ({d.get('completed')}, {d.get('failed')}, {d.get('not_arrived')})",
          r.returncode == 0 and d["ended_by"].startswith("bound") and "ended the run" in r.stdout
          and d["completed"] + d["failed"] + d["not_arrived"] == 100 and d["not_arrived"] > 0)

# a cut fleet records the requests waiting at its router (central_queue) and those on their
# way to a replica (router latency) as arrived and unfinished (issue 48, 4): at 200 req/s
# for 0.5 s about 100 arrive, 8 (two replicas of 4 rows) or a few more get a row
for name, fl in (("central_queue", {"router": "central_queue"}),
                 ("latency", {"router": "least_requests", "router_latency_ms": 300})):
    e = {"model": "llama-3.1-8b", "workload": {"arrival": {"process": "poisson", "rate": 200},
         "prompt": {"dist": "fixed", "value": 2000}, "decode": {"dist": "fixed", "value": 200},
         "num_requests": 400}, "serving": {"max_active": 4}, "route": {"calibration": CAL},
         "fleet": dict(fl, replicas=2), "run": {"backend": "model", "max_time_s": 0.5}}
    r, d, h5 = run_json(f"cut_{name}", e)
    n = d.get("completed", 0) + d.get("failed", 0)
    with h5py.File(h5) if r.returncode == 0 else nullcontext() as f:
        rows = len(f["requests"]["id"]) if f else -1
        routed = int(f["replicas"]["routed"][:].sum()) if f else -1
    check(f"a fleet cut at 0.5 s ({name}): {n} requests arrived ({d.get('not_arrived')} not), "
          f"{rows} in /requests, {routed} routed",
          r.returncode == 0 and 70 <= n <= 130 and rows == n == routed
          and d["completed"] + d["failed"] + d["not_arrived"] == 400)

# a fleet that cannot fit is refused before any replica is set up, naming the fleet's setting
# and the bytes, also under an address-space limit (issue 48, 3) where pkvsim runs under one
# (a sanitized build reserves its shadow memory first: not there)
def limit_as(lim):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (lim, lim))


limits = [None]
if subprocess.run([pkvsim, "--version"], capture_output=True,
                  preexec_fn=limit_as(3 << 30)).returncode == 0:
    limits.append(3 << 30)
else:
    print("pkvsim does not start under a 3 GiB address-space limit: that case is not run")
for name, fl, key in (("replicas", {"replicas": 100000}, "fleet.replicas"),
                      ("autoscale", {"replicas": 2, "autoscale": {"min": 1, "max": 100000,
                                                                   "target": 2}},
                       "fleet.autoscale.max")):
    for lim in limits:
        e = {"model": "llama-3.1-8b", "workload": {"arrival": {"process": "poisson", "rate": 20},
             "prompt": {"dist": "fixed", "value": 100}, "decode": {"dist": "fixed", "value": 10},
             "num_requests": 10}, "serving": {"max_active": 32, "kv_pages": 1000},
             "route": {"calibration": CAL}, "fleet": dict(fl, router="least_requests"),
             "run": {"backend": "model"}}
        out = os.path.join(tmp, f"huge_{name}.h5")
        r = subprocess.run([pkvsim, "run", "-q", "-o", out, write(f"huge_{name}.json", e)],
                           capture_output=True, text=True, timeout=60,
                           preexec_fn=limit_as(lim) if lim else None)
        check(f"a fleet of 100,000 replicas ({name}, limit {lim}): refused up front, {key} and "
              f"the bytes named: {r.stderr.strip()[:160]!r}",
              r.returncode == 1 and f"{key}: 100000 replicas need" in r.stderr
              and "GiB" in r.stderr and not os.path.exists(out))

# a request past max_context is refused as vLLM's server refuses it (prompt + max_tokens past
# max_model_len): failed, its error in --json, out of the latencies, "refused" in /requests;
# workload.over_context "cut" runs it cut and counts it (issue 46, 4; issue 48, 11)
for name, fleet in (("alone", None), ("fleet", {"replicas": 2, "router": "least_requests"})):
    for mode in ("refuse", "cut"):
        e = {"model": "llama-3.1-8b", "workload": {"arrival": {"process": "poisson", "rate": 20},
             "prompt": {"dist": "uniform", "min": 100, "max": 300},
             "decode": {"dist": "fixed", "value": 100}, "num_requests": 40, "max_context": 300},
             "route": {"calibration": CAL}, "run": {"backend": "model"}}
        if mode == "cut":
            e["workload"]["over_context"] = "cut"
        if fleet:
            e["fleet"] = fleet
        r, d, h5 = run_json(f"over_{name}_{mode}", e)
        lens = d.get("input_lens", [])
        over = [i for i, p in enumerate(lens) if p + 100 > 300]
        n = len(over)
        if mode == "cut":
            check(f"max_context ({name}, cut): --json counts the {n} cut requests "
                  f"({d.get('clamped')}), the summary warns",
                  r.returncode == 0 and 0 < n == d["clamped"] and d["failed"] == 0
                  and "WARNING" in r.stdout and str(n) in r.stdout)
            continue
        errs, ttfts = d.get("errors", []), d.get("ttfts", [])
        with h5py.File(h5) as f:
            states = f["requests/state"][:]
            names = dict((v, k) for k, v in h5py.check_enum_dtype(
                f["requests/state"].dtype).items())
            refused = sum(1 for x in states if names[x] == "refused")
        check(f"max_context ({name}): the {n} requests past it are refused: failed "
              f"({d.get('failed')}), refused ({d.get('refused')}, /requests {refused}), their "
              f"errors said, TTFT 0, none cut",
              r.returncode == 0 and 0 < n == d["failed"] == d["refused"] == refused
              and d["completed"] == 40 - n and d["clamped"] == 0
              and all(errs[i].startswith("refused") and ttfts[i] == 0 for i in over)
              and all(errs[i] == "" for i in range(len(lens)) if i not in over)
              and f"refused      {n} requests" in r.stdout)

# ---- windows of decode steps -----------------------------------------------------------
W = 4
f = h5run(experiment("window.json", {"engine": prof, "scheduler": "prefill_first",
                                     "scheduler_steps": W},
                     {"arrival": {"process": "poisson", "rate": 40},
                      "prompt": {"dist": "uniform", "min": 100, "max": 400},
                      "decode": {"dist": "fixed", "value": 400}, "num_requests": 12}))
s, p = cols(f, "steps"), cols(f, "prefills")
host = s["t_host_engine"]
check("windows: a decode step's host work is its share of the window's",
      np.allclose(host, 1e-6 * (US["iteration_us"] + US["per_request_us"] * s["rows"]) / W))
# exposed_us is every step's own, not shared by the window
EXP_W = 900
f = h5run(experiment("window_exp.json", {"engine": profile("prof_wexp.json", exposed_us=EXP_W),
                                         "scheduler": "prefill_first", "scheduler_steps": W},
                     {"arrival": {"process": "poisson", "rate": 40},
                      "prompt": {"dist": "uniform", "min": 100, "max": 400},
                      "decode": {"dist": "fixed", "value": 400}, "num_requests": 12}))
s_e = cols(f, "steps")
check("windows: exposed_us in every step whole, the rest shared by the window",
      np.allclose(s_e["t_host_engine"], 1e-6 * ((US["iteration_us"] + US["per_request_us"]
                                                 * s_e["rows"]) / W + EXP_W)))
ok, seen = True, 0
for t in p["t_sim"][1:]:
    before = s["t_sim"] < t
    last_prefill = p["t_sim"][p["t_sim"] < t].max()
    k = int((before & (s["t_sim"] > last_prefill)).sum())
    if k:
        seen += 1
        ok &= k % W == 0
check(f"windows: prompts admitted only between windows of {W} steps ({seen} seen)",
      ok and seen > 2)
# a request finishing inside a window reaches the client at its end (vLLM streams a
# window's tokens together): 4 prompts at once, one of 3 tokens, the others of 60; the
# closed loop's fifth prompt arrives as the short one finishes
W = 10
f = h5run(experiment("window_short.json", {"engine": prof, "scheduler": "prefill_first",
                                           "scheduler_steps": W, "client": "offline"},
                     {"arrival": {"process": "closed", "concurrency": 4},
                      "prompt": {"dist": "fixed", "value": 100},
                      "decode": {"dist": "cycle", "values": [3, 60, 60, 60]},
                      "num_requests": 5}))
s, p, r = cols(f, "steps"), cols(f, "prefills"), cols(f, "requests")
short = int(np.flatnonzero(r["decode_len"] == 3)[0])
in_window = int(((s["t_sim"] > p["t_sim"][0]) & (s["t_sim"] < p["t_sim"][-1])).sum())
check(f"windows: a request done in 2 of {W} steps finishes at the window's end "
      f"({r['t_finish'][short]:.6f} s; the window's {in_window} steps end at "
      f"{p['t_sim'][-1]:.6f} s, its 2nd at {s['t_sim'][2]:.6f} s)",
      len(p["t_sim"]) == 2 and in_window == W
      and np.isclose(r["t_finish"][short], p["t_sim"][1], rtol=0, atol=1e-9)
      and r["t_finish"][short] > s["t_sim"][2] + 1e-6)

# ---- prompts an earlier run left in the prefix cache ----------------------------------
warm = {"arrival": {"process": "closed", "concurrency": 4},
        "prompt": {"dist": "fixed", "value": 1000}, "decode": {"dist": "fixed", "value": 8},
        "num_requests": 4, "warm_requests": 2}
f = h5run(experiment("warm.json", {"prefix_caching": True, "prefix_block_tokens": 16}, warm))
p, r = cols(f, "prefills"), cols(f, "requests")
check(f"warm_requests: the first two prompts' whole blocks are cached, 8 tokens of each "
      f"computed ({int(p['tokens'].sum())} prefilled)",
      int(p["tokens"].sum()) == 2 * 1000 + 2 * 8
      and int(f["summary"].attrs["prefix_hit_tokens"]) == 2 * 992)
bad = experiment("warm_off.json", {"prefix_caching": False}, warm)
q = subprocess.run([pkvsim, "run", "-q", bad, "-o", bad[:-5] + ".h5"], capture_output=True,
                   text=True)
check("warm_requests without the prefix cache: refused, naming both keys",
      q.returncode != 0 and "workload.warm_requests" in q.stderr
      and "serving.prefix_caching" in q.stderr and not os.path.exists(bad[:-5] + ".h5"))

# ---- the shipped validation files --------------------------------------------------
val = f"{src}/experiments/validation"
out = os.path.join(tmp, "v.json")
p = subprocess.run([pkvsim, "validate", val, "--json", out], capture_output=True, text=True,
                   cwd=src)
check("pkvsim validate experiments/validation: every figure within its band "
      f"(exit {p.returncode})", p.returncode == 0)
if p.returncode:
    print(p.stdout[-3000:], p.stderr[-2000:])
rows = json.load(open(out))["rows"]
files = sorted(x for x in os.listdir(val) if x.endswith(".json"))
check("every file has rows", sorted({os.path.basename(r["file"]) for r in rows}) == files)
engines = {r["engine"] for r in rows}
gpus = {r["gpu"] for r in rows}
check(f"at least 12 figures, two engines, two GPUs ({len(rows)}, {engines}, {gpus})",
      len(rows) >= 12 and len(engines) >= 2 and len(gpus) >= 2)
sources = {r["source"] for r in rows}
check(f"the corpus: 80 or more figures from 10 or more sources ({len(rows)}, {len(sources)})",
      len(rows) >= 80 and len(sources) >= 10)
check("every row names its client and the predicted TTFT's parts",
      all(r["client"] and set(r["ttft_parts_ms"]) == {"queue", "wait_for_budget", "prefill", "client"}
          for r in rows))
ttft_rows = [r for r in rows if r["figure"] == "mean_ttft"]
check("a mean TTFT is its parts' sum where no request was preempted (within 1%)",
      ttft_rows and all(abs(sum(r["ttft_parts_ms"].values()) - r["predicted"]) <= 0.01 * r["predicted"]
                        for r in ttft_rows if r["profile"] != "pkvsim"))
floored = [r for r in rows if r["floor"] is not None]
check("every TTFT figure of one replica has its floor, no other figure one, and pkvsim's "
      "prediction is never below it (the GPU's physics)",
      floored and all(("ttft" in r["figure"]) == (r["floor"] is not None) for r in rows) and
      all(r["predicted"] >= r["floor"] * (1 - 1e-9) for r in floored))
for name in files:
    d = json.load(open(os.path.join(val, name)))["validation"]
    check(f"{name}: names its source's url, engine, GPU and command",
          all(d["source"].get(k) for k in ("url", "engine", "gpu", "command")))
    check(f"{name}: a band with its reason", "band_note" in d or
          all("band_pct" in r for r in d["expect"]))
# a direct run of one file gives validate's prediction
one = os.path.join(val, "vllm-h200-latency-b8.json")
direct = os.path.join(tmp, "direct.json")
run(["run", "-q", one, "-o", os.path.join(tmp, "direct.h5"), "--json", direct])
pred = [r for r in rows if r["file"].endswith("vllm-h200-latency-b8.json")][0]["predicted"]
check("validate's prediction is a direct run's figure",
      abs(json.load(open(direct))["mean_e2el_ms"] - pred) <= 1e-9 * pred)

# bad files: a clear error naming the file and the key
bad = json.load(open(one))
del bad["validation"]["source"]["url"]
r = subprocess.run([pkvsim, "validate", write("bad1.json", bad)], capture_output=True, text=True)
check("a file without validation.source.url: exit 1 naming it",
      r.returncode == 1 and "validation.source.url" in r.stderr and "bad1.json" in r.stderr)
bad = json.load(open(one))
bad["validation"]["expect"][0]["figure"] = "mean_e2e"
r = subprocess.run([pkvsim, "validate", write("bad2.json", bad)], capture_output=True, text=True)
check("an unknown figure: exit 1 naming it", r.returncode == 1 and "mean_e2e" in r.stderr)

# validation files and their commands refuse what they would not replay (issue 48, 14)
bad = json.load(open(one))
bad["validation"]["sourse"] = {}
r = subprocess.run([pkvsim, "validate", write("bad3.json", bad)], capture_output=True, text=True)
check("an unknown key in the validation section: exit 1 naming it",
      r.returncode == 1 and "validation.sourse" in r.stderr)
bad = json.load(open(one))
bad["sweep"] = {"axes": [{"path": "run.seed", "values": [1, 2]}]}
r = subprocess.run([pkvsim, "validate", write("bad4.json", bad)], capture_output=True, text=True)
check("a sweep in a validation file: refused (its points would not run)",
      r.returncode == 1 and "sweep" in r.stderr and "bad4.json" in r.stderr)
twice = os.path.join(tmp, "twice.json")
r = subprocess.run([pkvsim, "validate", "-q", one, os.path.join(os.path.dirname(one), "..",
                    "validation", os.path.basename(one)), "--json", twice],
                   capture_output=True, text=True)
check("a file named twice counts once",
      r.returncode == 0 and len(json.load(open(twice))["rows"]) == 1 and "counted once" in r.stderr)
bad = json.load(open(one))
bad["run"]["max_steps"] = 1
bad["route"]["calibration"] = CAL
r = subprocess.run([pkvsim, "validate", write("bad5.json", bad)], capture_output=True, text=True)
check("no request finished: exit 1, the row says there is no prediction and why",
      r.returncode == 1 and "NO PREDICTION" in r.stdout and "nan%" not in r.stdout)
bad = json.load(open(one))
bad["serving"]["engine"] = "no/such/profile.json"
r = subprocess.run([pkvsim, "validate", write("bad6.json", bad)], capture_output=True, text=True)
check("a missing profile's path is named, not its folder's files",
      r.returncode == 1 and "no/such/profile.json" in r.stderr and "vllm@" not in r.stderr)
r = subprocess.run([pkvsim, "fit", "--engine", os.path.join(tmp, "none.json"), one],
                   capture_output=True, text=True)
check("fit --engine with a missing profile says so",
      r.returncode == 1 and "none.json" in r.stderr and "cannot open" in r.stderr)
r = subprocess.run([pkvsim, "validate", "--by-source", "--iterations", "0", one],
                   capture_output=True, text=True)
check("--iterations 0: refused, the option named once",
      r.returncode == 2 and "--iterations" in r.stderr and "----" not in r.stderr)

# held out by source, a file replaying a trace (its rows in the file's config, which the
# sort by profile moves) predicts from its own rows: finite figures, not NaN
lam = [f"{val}/{x}" for x in ("vllm-h100-sharegpt-1280.json", "vllm-h100-sharegpt-10.json",
                               "vllm-h100-latency-b8.json", "vllm-h200-latency-b8.json")]
out = os.path.join(tmp, "bs_trace.json")
r = subprocess.run([pkvsim, "validate", "--by-source", "--iterations", "3", *lam, "--json", out],
                   capture_output=True, text=True, cwd=src)
held = [x["predicted_held_out"] for x in json.load(open(out))["rows"]
        if x["file"].endswith("1280.json")] if os.path.exists(out) else []
check(f"--by-source: a trace's file predicted from its rows ({held}; exit {r.returncode})",
      r.returncode == 0 and len(held) == 6
      and all(isinstance(x, float) and np.isfinite(x) and x > 0 for x in held))

# ---- the fit recovers known constants ----------------------------------------------
TRUE = {"iteration_us": 900, "per_request_us": 30, "prefill_token_us": 2.0,
        "client_us": 2500, "eager_allreduce_us": 60, "multi_gpu_us": 7000}
truth = write("truth.json", {"name": "synthetic", "host": {
    "iteration_us": TRUE["iteration_us"], "per_request_us": TRUE["per_request_us"],
    "eager_allreduce_us": TRUE["eager_allreduce_us"], "overlap": False},
    "gpu": {"prefill_token_us": TRUE["prefill_token_us"]},
    "request": {"client_us": TRUE["client_us"], "multi_gpu_us": TRUE["multi_gpu_us"]}})
start = write("start.json", {"name": "synthetic", "host": {
    "iteration_us": 400, "per_request_us": 10, "overlap": False},
    "gpu": {"prefill_token_us": 0.5}, "request": {"client_us": 800},
    "fit": {"rms_log_error": 9, "note": "what the fit's numbers mean, by hand"}})
shapes = [  # (name, concurrency, prompt, decode, client, figure, tensor parallel); two sources
    ("b1", 1, 64, 200, "offline", "mean_e2el", 1),
    ("b48", 48, 64, 200, "offline", "mean_e2el", 1),
    ("long", 1, 8000, 2, "offline", "mean_ttft", 1),
    ("srv", 1, 64, 8, "server", "mean_ttft", 1),
    ("t2off", 1, 2000, 2, "offline", "mean_ttft", 2),
    ("t2srv", 1, 64, 8, "server", "mean_ttft", 2),
    ("c1", 1, 128, 150, "offline", "mean_e2el", 1),
    ("c32", 32, 100, 150, "offline", "mean_e2el", 1),
    ("lonc", 1, 6000, 2, "offline", "mean_ttft", 1),
    ("srw", 1, 100, 8, "server", "mean_ttft", 1),
    ("t2of2", 1, 3000, 2, "offline", "mean_ttft", 2),
    ("t2sr2", 1, 128, 8, "server", "mean_ttft", 2),
]
syn = []
for name, conc, prompt, decode, client, fig, tp in shapes:
    e = {"name": name, "model": {"preset": "llama-3.1-8b", "tensor_parallel": tp},
         "workload": {"arrival": {"process": "closed", "concurrency": conc},
                      "prompt": {"dist": "fixed", "value": prompt},
                      "decode": {"dist": "fixed", "value": decode}, "num_requests": conc},
         "serving": {"engine": truth, "client": client, "scheduler": "prefill_first"},
         "route": {"policy": "pkv_workqueue", "calibration": CAL},
         "run": {"backend": "model", "record": "summary"},
         "validation": {"role": "fit", "band_pct": 50, "band_note": "synthetic",
                        "source": {"url": "synthetic", "engine": "synthetic", "gpu": "H200",
                                   "model": "llama-3.1-8b", "command": "none",
                                   "id": "src_a" if name in ("b1", "b48", "long", "srv", "t2off", "t2srv")
                                   else "src_b",
                                   "client": "benchmark_latency" if client == "offline"
                                   else "vllm bench serve"},
                        "expect": [{"figure": fig, "value": 1, "unit": "ms"}]}}
    syn.append((write(f"syn_{name}.json", e), e))
out = os.path.join(tmp, "syn.json")
run(["validate", "-q"] + [p for p, _ in syn] + ["--json", out], ok=1)  # values 1: out of band
made = {os.path.basename(r["file"]): r["predicted"] for r in json.load(open(out))["rows"]}
for path, e in syn:
    e["validation"]["expect"][0]["value"] = made[os.path.basename(path)]
    e["serving"]["engine"] = start
    write(os.path.basename(path), e)
fitted = os.path.join(tmp, "fitted.json")
run(["fit", "--engine", start, "-o", fitted, "--iterations", "150"] + [p for p, _ in syn])
got = json.load(open(fitted))
vals = dict(got["host"], **got["request"], **got["gpu"])  # client_us from one GPU's runs alone
for k, v in TRUE.items():
    check(f"fit recovers {k}: {vals[k]} against {v} (1%)", abs(vals[k] - v) <= 0.01 * v)
check("fit keeps overlap false", got["host"]["overlap"] is False)
offline_only = [p for p, e in syn if e["serving"]["client"] == "offline"]
kept = os.path.join(tmp, "kept.json")
run(["fit", "--engine", start, "-o", kept, "--iterations", "20"] + offline_only)
check("no file measured through a server: the profile's client_us kept (800), not 0, and no "
      "multi_gpu_us written", json.load(open(kept))["request"] == {"client_us": 800})
check("fit lists its files", len(got["fit"]["fitted"]) == 12 and got["fit"]["held_out"] == [])
check("fit records which of client_us and multi_gpu_us it fitted",
      got["fit"]["client_us_fitted"] is True and got["fit"]["multi_gpu_us_fitted"] is True and
      json.load(open(kept))["fit"]["multi_gpu_us_fitted"] is False)
nopre = write("start_nopre.json", {"name": "synthetic", "host": {
    "iteration_us": 400, "per_request_us": 10, "overlap": False}})
nopre_files = []
for path, e in syn[:3]:  # three offline files naming it
    nopre_files.append(write("nopre_" + os.path.basename(path),
                             dict(e, serving=dict(e["serving"], engine=nopre))))
held0 = os.path.join(tmp, "held0.json")
run(["fit", "--engine", nopre, "-o", held0, "--iterations", "5"] + nopre_files)
h0 = json.load(open(held0))
check("a profile whose prefill costs no more than the calibration's (no gpu.prefill_token_us): "
      "the fit neither fits nor writes one (a fold must not invent it); one above 0 is fitted",
      "gpu" not in h0 and h0["fit"]["prefill_token_us_fitted"] is False and
      got["fit"]["prefill_token_us_fitted"] is True)
check("no file schedules windows: exposed_us neither fitted nor written",
      got["fit"]["exposed_us_fitted"] is False and "exposed_us" not in got["host"])
check("fit writes its own record and keeps the profile's fit.note",
      got["fit"]["rms_log_error"] != 9 and
      got["fit"].get("note") == "what the fit's numbers mean, by hand")

# ---- held out by source: files made with known constants, three sources -------------------
# the third a file that fits no engine (validation.fits_engine false): src_b's c1 with its
# published figure made 3x off, under a source of its own, predicted held out, never fitted
_, odd = syn[6]
odd = json.loads(json.dumps(odd))
odd["validation"].update(role="held_out", fits_engine=False)
odd["validation"]["source"]["id"] = "src_c"
odd["validation"]["expect"][0]["value"] *= 3
odd_file = write("syn_odd.json", odd)
out = os.path.join(tmp, "bysrc.json")
r = run(["validate", "--by-source", "--iterations", "80"] + [p for p, _ in syn]
        + [odd_file, "--json", out])
bs = json.load(open(out))
errs = {os.path.basename(r["file"]): r["error"] for r in bs["rows"]}
fair = {k: e for k, e in errs.items() if k != "syn_odd.json"}
check(f"by source: every source predicted by constants fitted without it, within 2% ({errs})",
      all(r["held_out"] for r in bs["rows"]) and all(abs(e) <= 0.02 for e in fair.values()))
check(f"by source: the file with fits_engine false never fitted (the folds fit on the other "
      f"sources' 6 files, its own on all 12) and predicted 3x off ({errs.get('syn_odd.json')})",
      re.search(r"src_a held out: fitting \S+ on 6 files", r.stderr)
      and re.search(r"src_c held out: fitting \S+ on 12 files", r.stderr)
      and abs(errs.get("syn_odd.json", 0) + 2 / 3) < 0.02)
check("by source: the file says it fits no engine, in the table and in the JSON rows",
      all(("fits no engine" in ln) == ("syn_odd" in ln) for ln in r.stdout.splitlines()
          if "syn_" in ln)
      and all((x.get("fits_engine", True) is False) == x["file"].endswith("syn_odd.json")
              for x in bs["rows"]))
check("by source: a mean per source",
      {g["group"] for g in bs["mean_abs_error"] if g["group"].startswith("source ")} ==
      {"source src_a", "source src_b", "source src_c"})
allg = next(g for g in bs["mean_abs_error"] if g["group"] == "all, held out by source")
absd = sorted(abs(e) for e in errs.values())
mid = len(absd) // 2
median = absd[mid] if len(absd) % 2 else (absd[mid - 1] + absd[mid]) / 2
check(f"by source: the median beside the mean ({allg.get('median')} against {median})",
      allg["figures"] == len(absd) and abs(allg["median"] - median) < 1e-12 and
      abs(allg["error"] - sum(absd) / len(absd)) < 1e-12)
odd["validation"]["role"] = "fit"
r = subprocess.run([pkvsim, "validate", write("syn_odd_fit.json", odd)], capture_output=True,
                   text=True)
check("fits_engine false with role fit: refused, the key named",
      r.returncode != 0 and "validation.fits_engine" in r.stderr and "syn_odd_fit.json" in r.stderr)

# ---- engines by version ----------------------------------------------------------------------
def resolved(engine, **serving):
    e = write("ver.json", {"model": "llama-3.1-8b", "workload": {
        "arrival": {"process": "poisson", "rate": 5}, "num_requests": 4},
        "serving": dict({"engine": engine}, **serving)})
    p = subprocess.run([pkvsim, "run", "-n", e], capture_output=True, text=True)
    return (json.loads(p.stdout) if p.returncode == 0 else None), p.stderr


for asked, taken in (("vllm@0.7.3", "vllm@0.6.0"), ("vllm@0.9.0", "vllm@0.8.0"),
                     ("vllm", "vllm@0.8.0"), ("vllm-v0@0.9.0", "vllm-v0@0.8.0"),
                     ("sglang@0.4.9", "sglang@0.4.0"), ("sglang@0.3.5", "sglang@0.3.0")):
    r, _ = resolved(asked)
    check(f"serving.engine {asked} takes {taken} and records both",
          r and r["serving"]["engine"] == taken and
          r["serving"]["engine_profile"]["requested"] == asked)
for bad, says in (("vllm@0.4.2", "older than every profile of vllm (versions: 0.5.0, 0.6.0, 0.8.0)"),
                  ("tgi@1.0", "no profile of engine \"tgi\""), ("vllm@x", "numbers joined by dots")):
    r, err = resolved(bad)
    check(f"serving.engine {bad}: an error naming what exists ({err.strip()[-120:]})",
          r is None and says in err)
r, _ = resolved("vllm@0.9.0")
check("vLLM V1 brings its scheduler: one token budget of 8192, 1024 rows, prefix caching",
      r["serving"]["scheduler"] == "chunked" and r["serving"]["token_budget"] == 8192 and
      r["serving"]["max_active"] == 1024 and r["serving"]["prefix_caching"] is True)
r, _ = resolved("vllm@0.9.0", client="offline")
check("vLLM V1 in process (LLM class): a budget of 16384", r["serving"]["token_budget"] == 16384)
r, _ = resolved("sglang@0.4.9", token_budget=4096)
check("SGLang 0.4: prefill batches apart, its FlashInfer backend pricing the attention, "
      "the experiment's keys over the profile's",
      r["serving"]["scheduler"] == "prefill_first" and r["route"]["policy"] == "flashinfer" and
      r["serving"]["token_budget"] == 4096)
r, _ = resolved("sglang@0.4.9", attention_backend="fa3")
check("serving.attention_backend fa3: its route policy", r["route"]["policy"] == "adaptive")
r, err = resolved("sglang@0.4.9", attention_backend="cutlass")
check("an attention backend the engine does not offer: an error naming those it does",
      r is None and "flashinfer, fa3" in err)

# ---- overlap with an exposed part, and CUDA-graph padding -------------------------------------
def prof2(name, **kw):
    d = {"name": "t", "host": dict({"iteration_us": 3000, "per_request_us": 0,
                                    "per_prompt_token_us": 0, "overlap": True}, **kw.pop("host", {}))}
    d.update(kw)
    return write(name, d)


EXPOSED = 150
f = h5run(experiment("exposed.json", {"engine": prof2("p_exp.json", host={"iteration_us": 6000,
                                                                        "exposed_us": EXPOSED}),
                                      "scheduler": "chunked", "token_budget": 512}))
s = cols(f, "steps")
gaps = np.diff(s["t_sim"])
want = np.maximum(s["t_predicted"], 6e-3) + EXPOSED * 1e-6
check("overlap hides host work shorter than the GPU step and shows the excess, plus exposed_us",
      np.allclose(gaps, want[:-1], rtol=1e-9) and (s["t_predicted"] > 6e-3).any() and
      (s["t_predicted"] < 6e-3).any() and np.allclose(s["t_host_engine"], 6e-3 + EXPOSED * 1e-6))
# ---- the drafting loop's host work: per_proposal_us a pass, in series ----------------------------
SPEC = {"method": "eagle", "tokens": 3, "acceptance": 0.6}
s_d = {}
for us in (0, 400):
    pr = prof2(f"p_draft{us}.json", host={"iteration_us": 2000, "overlap": True, "per_proposal_us": us})
    s_d[us] = cols(h5run(experiment(f"draft{us}.json", {"engine": pr, "scheduler": "prefill_first",
                                                         "speculative": SPEC})), "steps")
a, b = s_d[0], s_d[400]
check("per_proposal_us: k passes of host work a verify step, after the overlap, in the clock",
      len(a["rows"]) == len(b["rows"]) and (a["rows"] > 0).all() and
      np.allclose(b["t_host_engine"] - a["t_host_engine"], 3 * 400e-6, rtol=1e-9) and
      np.allclose(np.diff(b["t_sim"]) - np.diff(a["t_sim"]), 3 * 400e-6, rtol=1e-6))
PAD = {"arrival": {"process": "closed", "concurrency": 5}, "prompt": {"dist": "fixed", "value": 64},
       "decode": {"dist": "fixed", "value": 40}, "num_requests": 5}
FULL = dict(PAD, arrival={"process": "closed", "concurrency": 8}, num_requests=8)
t = {}
for tag, graphs, wl in (("none", None, PAD), ("pad", {"sizes": [1, 2, 4], "step": 8, "max": 16}, PAD),
                        ("full", None, FULL), ("fullpad", {"sizes": [1, 2, 4], "step": 8, "max": 16}, FULL),
                        ("eager", {"sizes": [1, 2, 4], "max": 4}, PAD)):
    extra = {"graphs": graphs} if graphs else {}
    pr = prof2(f"p_{tag}.json", host={"iteration_us": 0, "overlap": False}, **extra)
    s = cols(h5run(experiment(f"pad_{tag}.json", {"engine": pr, "scheduler": "prefill_first"}, wl)), "steps")
    t[tag] = s["t_dense_predicted"][s["rows"] == s["rows"].max()]
# (the LM head runs over the real rows only: 5 padded rows cost 8 rows' GEMMs, 5 rows' head)
check("a graph-padded batch costs its captured size: 5 rows priced as 8 (their head as 5)",
      (t["pad"] > t["none"]).all() and (t["pad"] < t["full"][0]).all() and
      (t["pad"] - t["none"]).min() > 0.5 * (t["full"][0] - t["none"]).max())
check("a batch of a captured size is not padded", np.allclose(t["fullpad"], t["full"]))
check("above the largest captured size a batch runs unpadded", np.allclose(t["eager"], t["none"]))
# ---- a forward not replayed from a graph: launched layer by layer, eager_layer_us a layer ------
EAGER_US = 400  # x 32 layers: 12.8 ms, above a decode step of 5 rows and a prefill of 5 x 64
pr = prof2("p_launch.json", host={"iteration_us": 0, "overlap": False, "eager_layer_us": EAGER_US},
           graphs={"sizes": [1, 2, 4], "max": 4})
f = h5run(experiment("launch.json", {"engine": pr, "scheduler": "prefill_first"},
                     dict(PAD, decode={"dist": "uniform", "min": 10, "max": 40})))
s, p = cols(f, "steps"), cols(f, "prefills")
floor = 32 * EAGER_US * 1e-6
eager = s["rows"] > 4
want = np.where(eager, np.maximum(s["t_predicted"], floor), s["t_predicted"])
check("eager_layer_us: a step above the largest graph takes at least layers x it, the rest "
      "replay as before; the GPU's wait is host work",
      eager.any() and (~eager).any() and (s["t_predicted"][eager] < floor).all() and
      np.allclose(np.diff(s["t_sim"]), want[:-1], rtol=1e-9) and
      np.allclose(s["t_host_engine"], want - s["t_predicted"], rtol=1e-9, atol=1e-12))
check("eager_layer_us: a prefill (never replayed here) is launched layer by layer too",
      np.allclose(p["t_advance"], np.maximum(p["t_predicted"], floor), rtol=1e-12) and
      (p["t_predicted"] < floor).any())
# ---- over several GPUs, each all-reduce of a prefill no graph replays waits eager_allreduce_us --
WAIT_US = 50  # x 2 all-reduces x 32 layers: 3.2 ms a prefill
pr = prof2("p_tpwait.json", host={"iteration_us": 0, "overlap": False, "eager_allreduce_us": WAIT_US},
           graphs={"sizes": [1, 2, 4], "max": 4})
tpw = {}
for tp in (1, 2):
    e = json.load(open(experiment(f"tpwait{tp}.json", {"engine": pr, "scheduler": "prefill_first"},
                                  dict(PAD, decode={"dist": "uniform", "min": 10, "max": 40}))))
    e["model"] = {"preset": "llama-3.1-8b", "tensor_parallel": tp}
    f = h5run(write(f"tpwait{tp}.json", e))
    tpw[tp] = (cols(f, "steps"), cols(f, "prefills"))
(s1, p1), (s2, p2) = tpw[1], tpw[2]
wait = 2 * 32 * WAIT_US * 1e-6
eager = s2["rows"] > 4
check("eager_allreduce_us: at tensor parallel 2 a prefill (no graph replays it) waits 2 x layers x "
      "it (host work); a decode step, above the largest graph or not, and every forward at tensor "
      "parallel 1 none",
      eager.any() and (~eager).any() and
      np.allclose(p2["t_advance"], p2["t_predicted"] + wait, rtol=1e-12) and
      np.allclose(p2["t_host_engine"], wait, rtol=1e-12) and
      np.allclose(s2["t_host_engine"], 0, atol=1e-12) and
      np.allclose(np.diff(s2["t_sim"]), s2["t_predicted"][:-1], rtol=1e-9) and
      np.allclose(s1["t_host_engine"], 0) and np.allclose(p1["t_host_engine"], 0))

print(f"{passes} checks passed, {fails} failed")
sys.exit(1 if fails else 0)
