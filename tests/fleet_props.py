#!/usr/bin/env python3
"""Random valid fleets (issue 48: property-based fleet testing). Each of N fleets draws its
replicas, router, decision latency, view refresh, pools (mixed, or prefill and decode with
their links), autoscaling, workload and bound (none, run.max_time_s, run.max_steps) from a
seed printed first, runs on the model backend under a time limit, and must hold:
- it ends (within the limit) with exit 0;
- every offered request is counted once: --json completed + failed + not_arrived is the
  workload's, and /requests holds a row for each that arrived (completed + failed), each
  (replica, id) once; /summary's arrived and finished say the same;
- /replicas: routed = the rows plus the prefilled ones handed on; finished = completed; no
  replica busy or up longer than the run's span (/summary t_end).
Usage: fleet_props.py PKVSIM [N] [SEED]"""
import json
import os
import random
import subprocess
import sys
import tempfile

import h5py
import numpy as np

pkvsim = sys.argv[1]
n_fleets = int(sys.argv[2]) if len(sys.argv) > 2 else 20
seed = int(sys.argv[3]) if len(sys.argv) > 3 else random.SystemRandom().randrange(1 << 32)
print(f"seed {seed} (fleet_props.py PKVSIM {n_fleets} {seed} draws these fleets again)")
rng = random.Random(seed)
tmp = tempfile.mkdtemp()
fails = []
ROUTERS = ["round_robin", "random", "least_requests", "least_tokens", "least_kv", "power_of_two",
           "central_queue"]
MODEL = {"layers": 2, "hidden": 512, "hq": 8, "hkv": 2, "head_dim": 128, "intermediate": 1024,
         "vocab": 1000}


def draw(k):
    n = rng.randint(20, 250)
    fleet = {"router": rng.choice(ROUTERS)}
    if rng.random() < 0.4:
        fleet["router_latency_ms"] = rng.choice([0.5, 5, 50, 300])
    if rng.random() < 0.4:
        fleet["view_refresh_ms"] = rng.choice([1, 20, 100])
    if rng.random() < 0.3:  # disaggregated: prefill and decode pools
        if fleet["router"] == "central_queue":
            fleet["router"] = "least_requests"
        fleet["pools"] = [{"name": "p", "replicas": rng.randint(1, 3), "role": "prefill"},
                          {"name": "d", "replicas": rng.randint(1, 3), "role": "decode"}]
        fleet["decode_router"] = rng.choice(ROUTERS[:-1])
    else:
        r = rng.randint(1, 6)
        fleet["replicas"] = r
        if rng.random() < 0.3:
            fleet["autoscale"] = {"min": 1, "max": r + rng.randint(0, 3),
                                  "metric": rng.choice(["queue_depth", "requests", "kv_use"]),
                                  "target": rng.choice([0.5, 2, 8]),
                                  "interval_s": rng.choice([0.05, 0.2, 1]),
                                  "cold_start_s": rng.choice([0, 0.1, 2]),
                                  "down_delay_s": rng.choice([0, 0.5])}
    run = {"backend": "model", "seed": rng.randint(1, 1000)}
    bound = rng.random()
    if bound < 0.25:
        run["max_time_s"] = round(rng.uniform(0.05, 2), 3)
    elif bound < 0.4:
        run["max_steps"] = rng.randint(1, 400)
    return {"name": f"props{k}", "model": MODEL,
            "workload": {"arrival": {"process": "poisson", "rate": rng.choice([20, 100, 400])},
                         "prompt": {"dist": "uniform", "min": 16, "max": rng.choice([200, 2000])},
                         "decode": {"dist": "uniform", "min": 1, "max": rng.choice([20, 200])},
                         "num_requests": n},
            "serving": {"max_active": rng.choice([2, 8, 32]), "kv_pages": rng.choice([300, 2000]),
                        "scheduler": rng.choice(["chunked", "prefill_first"]),
                        "token_budget": 512},
            "fleet": fleet, "run": run}


for k in range(n_fleets):
    exp = draw(k)
    path, out, js = (os.path.join(tmp, f"f{k}.{x}") for x in ("json", "h5", "out.json"))
    with open(path, "w") as f:
        json.dump(exp, f)
    what = f"fleet {k} ({json.dumps(exp['fleet'])}, run {json.dumps(exp['run'])})"
    try:
        r = subprocess.run([pkvsim, "run", "-q", "-o", out, "--json", js, path],
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        fails.append(f"{what}: still running after 60 s")
        continue
    if r.returncode != 0:
        fails.append(f"{what}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        continue
    d = json.load(open(js))
    offered = exp["workload"]["num_requests"]
    with h5py.File(out) as f:
        rq = f["requests"]
        rows = len(rq["id"])
        keys = set(zip(rq["replica"][:].tolist(), rq["id"][:].tolist())) if "replica" in rq else \
            set(rq["id"][:].tolist())
        span = float(f["summary"].attrs["t_end"])  # the run's end: the last event, or the cut
        s_counts = (int(f["summary"].attrs["arrived"]), int(f["summary"].attrs["finished"]))
        rep = {c: f["replicas"][c][:] for c in f["replicas"]} if "replicas" in f else None
    bad = []
    if d["completed"] + d["failed"] + d["not_arrived"] != offered:
        bad.append(f"completed {d['completed']} + failed {d['failed']} + not arrived "
                   f"{d['not_arrived']} != {offered} offered")
    if rows != d["completed"] + d["failed"] or len(keys) != rows:
        bad.append(f"/requests {rows} rows ({len(keys)} distinct) for {d['completed']} completed "
                   f"+ {d['failed']} failed")
    if s_counts != (rows, d["completed"]):
        bad.append(f"/summary arrived {s_counts[0]}, finished {s_counts[1]} against {rows} rows, "
                   f"{d['completed']} completed")
    if rep is not None:
        if int(rep["routed"].sum()) != rows + int(rep["handed_off"].sum()):
            bad.append(f"routed {int(rep['routed'].sum())} != {rows} rows + "
                       f"{int(rep['handed_off'].sum())} handed on")
        if int(rep["finished"].sum()) != d["completed"]:
            bad.append(f"finished {int(rep['finished'].sum())} != completed {d['completed']}")
        slack = 1e-9 * (1 + span)  # rounding
        if rep["busy_s"].max() > span + slack or rep["up_s"].max() > span + slack:
            bad.append(f"a replica busy {rep['busy_s'].max():.3f} s or up {rep['up_s'].max():.3f}"
                       f" s in a run of {span:.3f} s")
    if bad:
        fails.append(f"{what}: " + "; ".join(bad))

for m in fails:
    print("FAIL", m)
print(f"{n_fleets} random fleets, {len(fails)} failed")
sys.exit(1 if fails else 0)
