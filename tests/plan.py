#!/usr/bin/env python3
"""pkvsim plan (issue 46):
- a known answer: deterministic arrivals at rate lam to c replicas (round_robin or
  least_requests) of one request at a time, each S seconds of service (a fixed decode of
  steps of a constant cost, no prefill time), wait for ever longer unless c >= lam * S;
  the plan's replicas for a TTFT p99 limit far below the queue's growth are
  ceil(lam * S) at each load;
- doubling and bisection find what the full grid finds: every shipped plan, swept over
  its loads x candidates x replicas 1..answer+1 with `pkvsim run` (an independent path),
  gives the plan's answer as the smallest count meeting every SLO, and its figures at
  that count are the plan's;
- the cheapest candidate is chosen; a load no candidate meets exits 3 and says so;
- bad plans end in a clear error naming the JSON path, and --json onto the plan file is
  refused with the file left as it was.
Usage: plan.py PKVSIM SOURCE_DIR [--grid [PLAN.json...]] (the comparison with the grid
only with --grid, of the plans named, default every shipped plan, experiments/plan/*.json:
CI's, a minute on two cores)"""
import glob
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import h5py

pkvsim, src = sys.argv[1], os.path.abspath(sys.argv[2])
tmp = tempfile.mkdtemp()
fails = []


def check(ok, what):
    if not ok:
        fails.append(what)
        print("FAIL", what)
    return ok


def plan(exp, *opts, name="p"):
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(exp, f)
    out = os.path.join(tmp, name + ".out.json")
    r = subprocess.run([pkvsim, "plan", path, "--json", out, *opts], capture_output=True,
                       text=True, timeout=300)
    return r, (json.load(open(out)) if r.returncode in (0, 3) and os.path.exists(out) else None)


STEP_S, DECODE = 0.001, 50  # service: 50 steps of 1 ms
queue = {
    "model": {"hq": 32, "hkv": 8, "head_dim": 128, "page_size": 16},
    "workload": {"arrival": {"process": "deterministic", "rate": 10},
                 "prompt": {"dist": "fixed", "value": 16},
                 "decode": {"dist": "fixed", "value": DECODE},
                 "num_requests": 600, "max_context": 2048},
    "serving": {"max_active": 1, "kv_pages": 4096, "prefill": {"base_us": 0, "per_token_us": 0}},
    "route": {"policy": "ref_paged",
              "calibration": os.path.join(src, "experiments/calibration/default.json"),
              "overrides": {"beta_gbps": 1000000, "launch_us": 1000}},
    "fleet": {"replicas": 1, "router": "round_robin"},
    "run": {"backend": "model", "record": "summary"},
    "plan": {"slo": [{"figure": "ttft_p99", "max_ms": 20}],
             "loads": {"path": "workload.arrival.rate", "values": [70, 130, 250]},
             "candidates": [{"path": "fleet.router", "values": ["round_robin", "least_requests"]}],
             "replicas": {"min": 1, "max": 32},
             "prices": os.path.join(src, "experiments/planning/prices.json")}}
r, d = plan(queue, name="queue")
d_queue = d
check(r.returncode == 0 and d, f"the queue plan: exit {r.returncode}: {r.stderr[-400:]}")
if d:
    for p in d["plans"]:
        want = math.ceil(p["load"] * DECODE * STEP_S - 1e-9)
        for c in p["candidates"]:
            check(c["replicas"] == want,
                  f"rate {p['load']}/s, {c['candidate']}: {c['replicas']} replicas, the queue "
                  f"needs {want} (lam x S = {p['load'] * DECODE * STEP_S:.2f})")
        check(sum(c["chosen"] for c in p["candidates"]) == 1, f"rate {p['load']}: one chosen")

# The margin's held-out error: by kind, the error 4 in 5 held-out figures are within
# (GSL's quantile: sorted errors, 0.8 of the way from the first to the last), one figure far
# past the others moving it little; rows not held out, and other kinds, left out.
ttft_err = [0.05 * i for i in range(1, 11)] + [60.0]  # 11 held out, the last +6000%
rows = ([{"figure": "median_ttft", "error": -e if i % 2 else e, "held_out": True}
         for i, e in enumerate(ttft_err)] +
        [{"figure": "mean_ttft", "error": 9.0, "held_out": False},
         {"figure": "median_tpot", "error": 0.2, "held_out": True}])
held = os.path.join(tmp, "held_out_rows.json")
json.dump({"rows": rows}, open(held, "w"))
hq = json.loads(json.dumps(queue))
hq["plan"]["held_out"] = held
hq["plan"]["loads"]["values"] = [70]
r, d = plan(hq, name="held")
srt = sorted(ttft_err)
want = srt[8]  # 0.8 x (11 - 1) = 8: the ninth error exactly
if check(r.returncode == 0 and d, f"held-out file: exit {r.returncode}: {r.stderr[-300:]}"):
    he = d["held_out_error"]
    check(math.isclose(he.get("TTFT", -1), want, rel_tol=1e-12) and
          math.isclose(he.get("TPOT", -1), 0.2, rel_tol=1e-12) and set(he) == {"TTFT", "TPOT"},
          f"held-out errors by kind {he}, want TTFT {want} (4 in 5 within) and TPOT 0.2")
    check(f"error {100 * want:.0f}%" in r.stdout, f"the margin names the error: {r.stdout[-400:]}")

# The cheapest candidate wins: the same queue on two GPUs of different prices (the plan
# prices route.gpu; the calibration stays the file above for both).
prices = os.path.join(tmp, "prices.json")
json.dump({"date": "test", "gpus": {"h200": {"usd_per_hour": 5}, "h100-sxm": {"usd_per_hour": 2}}},
          open(prices, "w"))
two = json.loads(json.dumps(queue))
two["plan"].update(prices=prices, candidates=[{"path": "route.gpu", "values": ["h200", "h100-sxm"]}])
two["plan"]["loads"]["values"] = [70]
r, d = plan(two, name="two")
if check(r.returncode == 0 and d, f"two GPUs: exit {r.returncode}: {r.stderr[-300:]}"):
    chosen = [c for c in d["plans"][0]["candidates"] if c["chosen"]]
    check(chosen and chosen[0]["candidate"]["route.gpu"] == "h100-sxm" and
          chosen[0]["usd_per_hour"] == 8, f"the cheaper GPU chosen: {chosen}")

# Layouts: a candidate giving fleet.pools is searched in units of its layout (each pool
# n times its replicas): the same queue on one pool and on two pools of 1 + 2 replicas
# (round_robin over all of them) needs ceil(lam S) replicas and ceil(lam S / 3) units.
lay = json.loads(json.dumps(queue))
del lay["fleet"]["replicas"]
lay["fleet"]["pools"] = [{"name": "all", "replicas": 1}]
lay["plan"].update(candidates=[{"path": "fleet.pools", "values": [
    [{"name": "all", "replicas": 1}], [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 2}]]}])
r, d = plan(lay, name="layouts")
if check(r.returncode == 0 and d, f"layouts: exit {r.returncode}: {r.stderr[-300:]}"):
    for pl in d["plans"]:
        need = math.ceil(pl["load"] * DECODE * STEP_S - 1e-9)
        got = [(c["replicas"], c["gpus"]) for c in pl["candidates"]]
        want = [(need, need), (math.ceil(need / 3), 3 * math.ceil(need / 3))]
        check(sorted(got) == sorted(want), f"layouts at rate {pl['load']}: {got}, want {want}")
    check("a 1 mixed + b 2 mixed" in r.stdout, f"a layout described by its pools: {r.stdout[-600:]}")

# Each candidate starts from its own answer at the load below (the loads' answers are
# sorted by cost): two step times, answers ceil(lam S) each, the cheaper first.
fast = json.loads(json.dumps(queue))
fast["plan"]["loads"]["values"] = [100, 110]
fast["plan"]["candidates"] = [{"path": "route.overrides.launch_us", "values": [1000, 500]}]
r, d = plan(fast, name="fast")
if check(r.returncode == 0 and d, f"two step times: exit {r.returncode}: {r.stderr[-300:]}"):
    for p in d["plans"]:
        for c in p["candidates"]:
            s_ = DECODE * c["candidate"]["route.overrides.launch_us"] * 1e-6
            want = math.ceil(p["load"] * s_ - 1e-9)
            check(c["replicas"] == want, f"rate {p['load']}, step {s_ / DECODE * 1e3:g} ms: "
                  f"{c['replicas']} replicas, the queue needs {want}")

# --jobs: two processes search a share of the candidates each; the answers are one's.
r, dj = plan(fast, "-o", os.path.join(tmp, "jobs.h5"), "-j", "2", name="jobs")
if check(r.returncode == 0 and dj and d, f"--jobs 2: exit {r.returncode}: {r.stderr[-300:]}"):
    check([(c["candidate"], c["replicas"]) for p in dj["plans"] for c in p["candidates"]]
          == [(c["candidate"], c["replicas"]) for p in d["plans"] for c in p["candidates"]],
          "--jobs 2: the answers of one process")
r = subprocess.run([pkvsim, "plan", os.path.join(tmp, "fast.json"), "-j", "2"],
                   capture_output=True, text=True)
check(r.returncode == 2 and "-o" in r.stderr, f"--jobs without -o: {r.stderr[-200:]}")

# --output: every run searched in one sweep-like file; run again, the plan reads its
# finished runs (a load added: only its runs are new) and gives the same answers.
out_h5 = os.path.join(tmp, "resume.h5")
part = json.loads(json.dumps(queue))
part["plan"]["loads"]["values"] = [70, 130]
r1, d1 = plan(part, "-o", out_h5, name="resume1")
r2, d2 = plan(queue, "-o", out_h5, name="resume2")
r3, d3 = plan(queue, "-o", out_h5, name="resume3")
if check(r1.returncode == 0 and r2.returncode == 0 and r3.returncode == 0 and d1 and d2 and d3,
         f"--output: exits {r1.returncode} {r2.returncode} {r3.returncode}: {r3.stderr[-300:]}"):
    n1, n2, n3 = len(d1["runs"]), len(d2["runs"]), len(d3["runs"])
    check(f"{n1} read from" not in r1.stdout and f"({n1} read from" in r2.stdout
          and f"({n3} read from" in r3.stdout and n3 == n2 > n1,
          f"--output resumes: {n1}, {n2}, {n3} runs: {r2.stdout[-200:]!r} {r3.stdout[-200:]!r}")
    check([c["replicas"] for p in d2["plans"] for c in p["candidates"]]
          == [c["replicas"] for p in d3["plans"] for c in p["candidates"]]
          == [c["replicas"] for p in (d_queue or {"plans": []})["plans"] for c in p["candidates"]],
          "--output: the resumed plan's answers are the plan's")
    with h5py.File(out_h5) as f:
        ix = f["sweep/index"]
        cols = list(ix.keys())
        check(len(ix["point"]) == n3 and "fleet.replicas" in cols and "workload.arrival.rate" in cols
              and "fleet.router" in cols and len(f["points"]) == n3
              and not os.path.exists(out_h5 + ".points"),
              f"--output: {len(ix['point'])} index rows for {n3} runs, columns {cols}")
    rep = subprocess.run([pkvsim, "report", out_h5], capture_output=True, text=True)
    check(rep.returncode == 0, f"report of the plan's file: {rep.stderr[-300:]}")

# No candidate within the bound: exit 3, the plan says none.
none = json.loads(json.dumps(queue))
none["plan"]["replicas"]["max"] = 3
r, d = plan(none, name="none")
check(r.returncode == 3 and "plan: none" in r.stdout,
      f"a load beyond the bound: exit {r.returncode} (want 3), {r.stdout[-300:]!r}")

# Doubling and bisection against the full grid, on every shipped plan.
grid_plans = []
if len(sys.argv) > 3 and sys.argv[3] == "--grid":
    grid_plans = sys.argv[4:] or sorted(glob.glob(os.path.join(src, "experiments/plan/*.json")))
for f in grid_plans:
    f = os.path.abspath(f)
    # copied to tmp: its relative paths made absolute
    exp = json.loads(open(f).read().replace('"../', '"' + os.path.dirname(os.path.dirname(f)) + "/"))
    r, d = plan(exp, name="shipped")
    check(r.returncode in (0, 3) and d, f"{f}: exit {r.returncode}: {r.stderr[-300:]}")
    if not d:
        continue
    p = exp.pop("plan")
    top = max((c["replicas"] or 0) for pl in d["plans"] for c in pl["candidates"])
    rep_path = p.get("replicas", {}).get("path", "fleet.replicas")
    cand_axes = p.get("candidates", [])
    # Every (load, candidate, count) as one point of a zipped sweep; a layout (a candidate's
    # or the experiment's fleet.pools, searched by fleet.replicas) set as its n units.
    points = [(lv, cv, n) for lv in p["loads"]["values"]
              for cv in itertools.product(*[a["values"] for a in cand_axes])
              for n in range(p.get("replicas", {}).get("min", 1), top + 2)]
    def units(cv, n):
        pools = dict(zip([a["path"] for a in cand_axes], cv)).get(
            "fleet.pools", exp.get("fleet", {}).get("pools"))
        if rep_path != "fleet.replicas" or pools is None:
            return None
        return [dict(q, replicas=q.get("replicas", 1) * n) for q in pools]
    zipped = [{"path": p["loads"]["path"], "values": [pt[0] for pt in points]}]
    zipped += [{"path": a["path"], "values": [pt[1][k] for pt in points]}
               for k, a in enumerate(cand_axes) if a["path"] != "fleet.pools"]
    if units(points[0][1], 1) is not None:
        zipped.append({"path": "fleet.pools", "values": [units(pt[1], pt[2]) for pt in points]})
    else:
        zipped.append({"path": rep_path, "values": [pt[2] for pt in points]})
    exp["sweep"] = {"mode": "zip", "axes": zipped}
    stem = os.path.splitext(os.path.basename(f))[0]
    exp["run"]["output"] = os.path.join(tmp, f"grid_{stem}.h5")
    sw = os.path.join(tmp, f"grid_{stem}.json")
    json.dump(exp, open(sw, "w"))
    g = subprocess.run([pkvsim, "run", "-q", sw], capture_output=True, text=True, timeout=600)
    check(g.returncode == 0, f"{f}: the grid sweep: exit {g.returncode}: {g.stderr[-300:]}")
    if g.returncode:
        continue
    slo = p["slo"]
    def norm(v):  # a candidate's value as a key
        return json.dumps(v, sort_keys=True)

    with h5py.File(exp["run"]["output"]) as h:
        idx = h["sweep/index"]
        grid = {}
        for i, pt in enumerate(idx["point"][:]):
            s = h["points"][f"{int(pt):05d}"]["summary"].attrs
            lv, cv, n = points[int(pt)]
            served = int(s["finished"]) + int(s.get("refused", 0))
            ok = served == int(s["offered"] or s["arrived"]) and all(
                (float(s[o["figure"]]) <= o["max_ms"] / 1e3) if "max_ms" in o
                else float(s[o["figure"]]) >= o["min"] for o in slo)
            key = (norm(lv),) + tuple(norm(v) for v in cv)
            grid.setdefault(key, {})[n] = (ok, {o["figure"]: float(s[o["figure"]]) for o in slo})
    for li, pl in enumerate(d["plans"]):
        for c in pl["candidates"]:
            key = (norm(pl["load"]),) + tuple(norm(c["candidate"][a["path"]]) for a in cand_axes)
            g_pts = grid.get(key)
            if g_pts is None:
                check(False, f"{f}: the grid has no point {key}")
                continue
            best = min([n for n, (ok, _) in g_pts.items() if ok], default=None)
            check(best == c["replicas"], f"{f}: {key}: the plan says {c['replicas']} replicas, "
                                         f"the grid {best}")
            if best is not None and c["replicas"] == best:
                for fig, v in g_pts[best][1].items():
                    check(math.isclose(v, c["figures"][fig], rel_tol=1e-9),
                          f"{f}: {key}: {fig} {c['figures'][fig]} in the plan, {v} in the grid")

# Bad plans: a clear error naming the JSON path; nothing written.
bad = [("no plan section", lambda e: e.pop("plan"), "plan: needs a plan section"),
       ("unknown figure", lambda e: e["plan"]["slo"][0].update(figure="ttft_p98"),
        'plan.slo[0].figure: "ttft_p98" is not a figure'),
       ("max_ms of a count", lambda e: e["plan"]["slo"].append({"figure": "finished", "max_ms": 3}),
        "plan.slo[1].max_ms"),
       ("max and min", lambda e: e["plan"]["slo"][0].update(min=1), "plan.slo[0]: give either"),
       ("no loads", lambda e: e["plan"].pop("loads"), "plan.loads: required"),
       ("a load path unknown", lambda e: e["plan"]["loads"].update(path="workload.rate"),
        "plan.loads.path"),
       ("named twice", lambda e: e["plan"]["candidates"].append(
           {"path": "workload.arrival.rate", "values": [1]}), "is named twice"),
       ("bounds", lambda e: e["plan"]["replicas"].update(min=5, max=2), "plan.replicas.max"),
       ("unknown key", lambda e: e["plan"].update(budget=3), "plan"),
       ("no price", lambda e: e["route"].update(gpu="l40s"), 'no price for route.gpu "l40s"')]
for what, edit, want in bad:
    e = json.loads(json.dumps(queue))
    edit(e)
    r, d = plan(e, name="bad")
    if what == "no price":  # a run that cannot be priced is that candidate's error
        ok = r.returncode == 3 and want in r.stdout
    else:
        ok = r.returncode == 1 and want in r.stderr
    check(ok, f"{what}: exit {r.returncode}, {(r.stderr or r.stdout)[-300:]!r} (want {want!r})")
path = os.path.join(tmp, "queue.json")
before = open(path, "rb").read()
r = subprocess.run([pkvsim, "plan", path, "--json", path], capture_output=True, text=True)
check(r.returncode == 2 and open(path, "rb").read() == before,
      f"--json onto the plan file: exit {r.returncode}, file kept: {open(path, 'rb').read() == before}")

# report over the same queue swept as a grid: a group meets its SLOs (TTFT under 20 ms for
# 99% of the requests, every request served) from ceil(lam x S) replicas, and --best
# cheapest gives that count per load; the CSV parses and names both axes and the verdict.
import csv
RATES, REPLICAS = (70, 130), list(range(1, 9))
grid = json.loads(json.dumps(queue))
del grid["plan"]
grid.update(slo={"ttft_ms": 20}, sweep={"axes": [
    {"path": "workload.arrival.rate", "values": list(RATES)},
    {"path": "fleet.replicas", "values": REPLICAS}]})
grid["run"]["output"] = os.path.join(tmp, "queue_grid.h5")
with open(os.path.join(tmp, "queue_grid.json"), "w") as f:
    json.dump(grid, f)
r = subprocess.run([pkvsim, "run", "-q", os.path.join(tmp, "queue_grid.json")], capture_output=True,
                   text=True, timeout=300)
rep = subprocess.run([pkvsim, "report", grid["run"]["output"], "--best", "cheapest", "--csv",
                      os.path.join(tmp, "queue_grid.csv")], capture_output=True, text=True, timeout=60)
check(r.returncode == 0 and rep.returncode == 0,
      f"report of the queue's grid: exit {r.returncode}, {rep.returncode}: {rep.stderr[-300:]}")
if rep.returncode == 0:
    rows = list(csv.DictReader(open(os.path.join(tmp, "queue_grid.csv"))))
    check(len(rows) == len(RATES) * len(REPLICAS) and "fleet.replicas" in rows[0]
          and "workload.arrival.rate" in rows[0], f"report --csv: {len(rows)} rows, both axes")
    for row in rows:
        lam, c = float(row["workload.arrival.rate"]), int(row["fleet.replicas"])
        want = c >= math.ceil(lam * DECODE * STEP_S - 1e-9)
        check(row["meets_slo"] == ("1" if want else "0") and int(row["gpus"]) == c,
              f"report: rate {lam}, {c} replicas: meets_slo {row['meets_slo']!r} (want {want}), "
              f"gpus {row['gpus']}")
    table = rep.stdout[rep.stdout.index("Cheapest group"):]
    for lam in RATES:
        want = math.ceil(lam * DECODE * STEP_S - 1e-9)
        check(any(f"| {want} | {lam} |" in line and f"| {want} |" in line
                  for line in table.splitlines()),
              f"--best cheapest at rate {lam}: {want} replicas in\n{table}")

shutil.rmtree(tmp, ignore_errors=True)
print(f"{len(fails)} failed")
sys.exit(1 if fails else 0)
