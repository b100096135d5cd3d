#!/usr/bin/env python3
"""A fleet from an experiment file (fleet.replicas, fleet.router) on the model backend:
one replica is the run without a fleet section (every /steps and /requests column);
four replicas behind each router (a 0.5 ms decision, a view refreshed every 20 ms)
route and finish every request once, with a replica column, every replica given some
(but central_queue's; ties rotate, so even least_kv's stale view spreads a refresh's
requests); prefill/decode disaggregation (two prefill and two decode replicas, slow
contended links) prefills every request on a prefill replica and decodes it on a decode
replica, TTFT stamped at the prefill, no link over its streams, `report`'s per-pool
figures those of the tables; a cpu fleet of two runs; a closed loop, prefix_affinity without prefix
caching and bad pools are refused with the key named; an autoscaled fleet keeps its
bounds and cold starts and runs nothing on a replica that is off or starting.
Usage: fleet_run.py PKVSIM"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

pkvsim = sys.argv[1]
tmp = tempfile.mkdtemp()
fails = []
BASE = {"name": "fleet", "model": {"layers": 2, "hidden": 512, "hq": 8, "hkv": 2, "head_dim": 128,
                                   "intermediate": 1024, "vocab": 1000},
        "workload": {"arrival": {"process": "poisson", "rate": 200},
                     "prompt": {"dist": "uniform", "min": 16, "max": 2000},
                     "decode": {"dist": "uniform", "min": 1, "max": 200}, "num_requests": 300},
        "serving": {"max_active": 8, "kv_pages": 2000, "scheduler": "chunked", "token_budget": 512},
        "run": {"backend": "model"}}


def run(exp, name):
    path, out = os.path.join(tmp, name + ".json"), os.path.join(tmp, name + ".h5")
    with open(path, "w") as f:
        json.dump(exp, f)
    r = subprocess.run([pkvsim, "run", "-q", "-o", out, path], capture_output=True, text=True)
    return r, out


def table(path, group):
    with h5py.File(path) as f:
        return {k: f[group][k][:] for k in f[group]}


# A view refreshed every 20 ms with arrivals exactly at instants where the next multiple
# of the period rounds back to the instant itself (0.58 s, 1.16 s, 1.18 s, 2.32 s): the
# refresh once repeated there for ever (the run hung and did not hear a signal).
trace = os.path.join(tmp, "on_refresh.csv")
with open(trace, "w") as f:
    f.write("t,prompt,decode\n")
    for t in (0.0, 0.58, 1.16, 1.18, 2.32, 2.4):
        f.write(f"{t},200,20\n")
exp = dict(BASE, workload={"trace": {"path": trace, "columns": {"time": "t", "prompt": "prompt",
                                                                "decode": "decode", "unit": "s"}},
                                  "max_context": 2048},
           fleet={"replicas": 2, "router": "least_requests", "view_refresh_ms": 20})
path = os.path.join(tmp, "on_refresh.json")
with open(path, "w") as f:
    json.dump(exp, f)
try:
    r = subprocess.run([pkvsim, "run", "-q", "-o", os.path.join(tmp, "on_refresh.h5"), path],
                       capture_output=True, text=True, timeout=60)
    if r.returncode or len(table(os.path.join(tmp, "on_refresh.h5"), "requests")["id"]) != 6:
        fails.append(f"arrivals on refresh instants: exit {r.returncode} {r.stderr[-500:]}")
except subprocess.TimeoutExpired:
    fails.append("arrivals on refresh instants: the fleet hung (60 s)")

# run.max_steps on a fleet: the replica that reaches it ends the fleet as it stands (it
# failed, "the run cannot finish", when the bounded replica had no event left)
r, bounded = run(dict(BASE, fleet={"replicas": 2, "router": "round_robin"},
                      run={"backend": "model", "max_steps": 50}), "max_steps")
if r.returncode or not len(table(bounded, "steps")["index"]):
    fails.append(f"a fleet under run.max_steps: exit {r.returncode} {r.stderr[-300:]}")

# --json of a fleet: each request's inter-token gaps are its own (the replicas number
# their requests each from 0: their gaps were merged by number), in arrival order
fj = os.path.join(tmp, "fleet_json.json")
exp = dict(BASE, fleet={"replicas": 3, "router": "round_robin"})
path = os.path.join(tmp, "fleet_json_exp.json")
with open(path, "w") as f:
    json.dump(exp, f)
r = subprocess.run([pkvsim, "run", "-q", "-o", os.path.join(tmp, "fleet_json.h5"), "--json", fj, "--detailed",
                    path], capture_output=True, text=True)
if r.returncode:
    fails.append(f"fleet --json: {r.stderr[-300:]}")
else:
    d = json.load(open(fj))
    lens = [len(x) for x in d["itls"]]
    want = [max(o - 1, 0) for o in d["output_lens"]]
    if lens != want:
        fails.append(f"fleet --json: itls lengths {lens[:8]} against output_lens - 1 {want[:8]}")
    if d["start_times"] != sorted(d["start_times"]):
        fails.append("fleet --json: requests out of arrival order")

r0, alone = run(BASE, "alone")
r1, one = run(dict(BASE, fleet={"replicas": 1, "router": "least_requests"}), "one")
if r0.returncode or r1.returncode:
    fails.append(f"runs: {r0.stderr} {r1.stderr}")
else:
    for g in ("steps", "requests", "prefills"):
        a, b = table(alone, g), table(one, g)
        if sorted(a) != sorted(b) or any(not np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind == "f")
                                         for k in a):
            fails.append(f"one replica: /{g} differs from the run without a fleet")

CACHED = dict(BASE["serving"], prefix_caching=True, prefix_block_tokens=256)
for router in ("round_robin", "random", "least_requests", "least_tokens", "least_kv",
               "power_of_two", "central_queue", "prefix_affinity", "session_affinity"):
    exp = dict(BASE, fleet={"replicas": 4, "router": router, "router_latency_ms": 0.5,
                            "view_refresh_ms": 20})
    if router == "prefix_affinity":
        exp["serving"] = CACHED
    r, out = run(exp, "four_" + router)
    if r.returncode:
        fails.append(f"{router}: {r.stderr.strip()}")
        continue
    q = table(out, "requests")
    with h5py.File(out) as f:
        fin = int(f["summary"].attrs["finished"])
    per = np.bincount(q["replica"], minlength=4)
    if len(q["replica"]) != 300 or fin != 300 or np.isnan(q["t_finish"]).any() or \
            (router != "central_queue" and (per == 0).any()):
        fails.append(f"{router}: {len(q['replica'])} requests, {fin} finished, per replica {per}")
    for i in range(4):  # each replica numbers its own requests
        ids = np.sort(q["id"][q["replica"] == i])
        if not np.array_equal(ids, np.arange(len(ids))):
            fails.append(f"{router}: replica {i}'s request ids are not 0..n-1")

# Prefill/decode disaggregation: two prefill replicas sending KV over slow links of two
# streams (a transfer of 1000 tokens takes ~40 ms) to two decode replicas.
PD = dict(BASE, fleet={"pools": [{"name": "p", "replicas": 2, "role": "prefill"},
                                 {"name": "d", "replicas": 2, "role": "decode",
                                  "serving": {"max_active": 16}}]},
          route={"overrides": {"kv_link_gbps": 0.05, "kv_link_us": 100, "kv_link_concurrency": 2}})
PD["workload"] = dict(BASE["workload"], decode={"dist": "uniform", "min": 1, "max": 20})
r, out = run(PD, "pd")
if r.returncode:
    fails.append(f"disaggregated: {r.stderr.strip()}")
else:
    q = table(out, "requests")
    st, pf = table(out, "steps"), table(out, "prefills")
    moved = q["decode_len"] > 1
    ts, te, ft = q["t_transfer_start"], q["t_transfer_end"], q["t_first_token"]
    checks = {
        "every request finished once": len(q["id"]) == 300 and not np.isnan(q["t_finish"]).any()
        and np.array_equal(q["generated"], q["decode_len"]),
        "prefilled on a prefill replica": np.isin(q["prefill_replica"], [0, 1]).all(),
        "a moved request decodes on a decode replica": np.isin(q["replica"][moved], [2, 3]).all(),
        "a one-token request ends where it was prefilled, with no transfer":
            not moved.all() and np.array_equal(q["replica"][~moved], q["prefill_replica"][~moved])
            and np.isnan(ts[~moved]).all(),
        "TTFT at the prefill, before the transfer": (ft[moved] <= ts[moved]).all()
            and (te[moved] - ts[moved] >= 100e-6).all(),
        "decode steps only on decode replicas": np.isin(st["replica"], [2, 3]).all(),
        "prefills only on prefill replicas": np.isin(pf["replica"], [0, 1]).all(),
    }
    for link in (0, 1):  # never more than the link's two streams at once
        m = moved & (q["prefill_replica"] == link)
        ev = sorted([(t, 1) for t in ts[m]] + [(t, -1) for t in te[m]], key=lambda x: (x[0], x[1]))
        most = max(np.cumsum([d for _, d in ev])) if ev else 0
        checks[f"link {link} carries at most 2 transfers at once (most {most})"] = most <= 2
        checks[f"link {link} was contended"] = most == 2
    rep = table(out, "replicas")
    checks["/replicas: each replica's counts"] = (
        list(rep["role"]) == [1, 1, 2, 2] and rep["routed"][:2].sum() == 300
        and rep["finished"].sum() == 300 and rep["handed_off"].sum() == moved.sum()
        and rep["routed"][2:].sum() == moved.sum() and list(rep["link_most"][:2]) == [2, 2]
        and (rep["steps"][:2] == 0).all() and np.array_equal(rep["link_transfers"], rep["handed_off"]))
    # report's pools: TTFT where prefilled, TPOT where decoded, busy share of replica-seconds
    rj = os.path.join(tmp, "pd.report.json")
    rr = subprocess.run([pkvsim, "report", out, "--json", rj], capture_output=True, text=True)
    pools = json.load(open(rj))["groups"][0].get("pools", []) if not rr.returncode else []
    tpot = (q["t_finish"] - ft)[moved] / (q["decode_len"][moved] - 1)
    want = [("p", "prefill", 2, 300, (~moved).sum(), np.median(ft - q["t_arrival"]), None),
            ("d", "decode", 2, moved.sum(), moved.sum(), None, np.median(tpot))]
    checks["report: per pool"] = rr.returncode == 0 and "Per pool" in rr.stdout and len(pools) == 2
    for p, (name, role, n, routed, finished, ttft, tp) in zip(pools, want):
        busy = rep["busy_s"][:2].sum() / rep["up_s"][:2].sum() if name == "p" else None
        checks[f"report: pool {name}"] = (
            (p["pool"], p["role"], p["replicas"], p["routed"], p["finished"])
            == (name, role, n, routed, finished)
            and (ttft is None) == (p["ttft_p50"] is None) and (tp is None) == (p["tpot_p50"] is None)
            and (ttft is None or abs(p["ttft_p50"] - ttft) <= 1e-6 * ttft)
            and (tp is None or abs(p["tpot_p50"] - tp) <= 1e-6 * tp)
            and (busy is None or abs(p["busy_share"] - busy) <= 1e-9))
    for what, ok in checks.items():
        if not ok:
            fails.append(f"disaggregated: {what}")

# Sessions kept on their replicas on both sides of a disaggregated fleet.
PS = dict(PD, fleet=dict(PD["fleet"], router="session_affinity", decode_router="session_affinity"))
PS["workload"] = dict(PD["workload"], turns={"dist": "fixed", "value": 3}, session_think_s=0.05)
r, out = run(PS, "pd_sessions")
if r.returncode:
    fails.append(f"disaggregated sessions: {r.stderr.strip()}")
else:
    q = table(out, "requests")
    moved = q["decode_len"] > 1
    per = {}
    for sess, pre, dec, mv in zip(q["session"], q["prefill_replica"], q["replica"], moved):
        per.setdefault(sess, set()).add((pre, dec if mv else -1))
    split = [k for k, v in per.items() if len({p for p, _ in v}) > 1 or len({d for _, d in v if d >= 0}) > 1]
    if not np.isin(q["replica"][moved], [2, 3]).all() or split or len(per) < 50:
        fails.append(f"disaggregated sessions: {len(split)} of {len(per)} sessions split, "
                     f"decode replicas {sorted(set(q['replica'][moved]))}")

for bad, why in (({"fleet": {"replicas": 2, "pools": [{"name": "a", "replicas": 2}]}},
                  "fleet.replicas: give fleet.replicas or fleet.pools"),
                 ({"fleet": {"pools": [{"name": "a", "role": "prefill"}]}},
                  "fleet.pools: a prefill pool needs a decode pool"),
                 ({"fleet": {"pools": [{"name": "a"}, {"name": "a"}]}},
                  "fleet.pools[1].name: \"a\" names fleet.pools[0] too"),
                 ({"fleet": {"pools": [{"name": "a", "serving": {"kv_pages": 3}}]}},
                  "fleet.pools[0] (pool \"a\", the experiment with its settings): serving.kv_pages"),
                 ({"model": {"hq": 8, "hkv": 2, "head_dim": 128},
                   "serving": {"max_active": 8, "kv_pages": 2000},
                   "fleet": {"pools": [{"name": "p", "role": "prefill"}, {"name": "d", "role": "decode"}]}},
                  "fleet.pools[0].role: a prefill pool needs a prefill that samples the first token"),
                 ({"fleet": {"pools": [{"name": "a", "colour": "red"}]}}, "fleet.pools[0]"),
                 ({"fleet": {"replicas": 2, "autoscale": {"target": 4}}},
                  "fleet.autoscale.max: required"),
                 ({"fleet": {"replicas": 5, "autoscale": {"max": 4, "target": 4}}},
                  "fleet.autoscale: the fleet starts with fleet.replicas (5), outside min 1 and max 4"),
                 ({"fleet": {"pools": [{"name": "a"}], "autoscale": {"pool": "b", "max": 3, "target": 1}}},
                  "fleet.autoscale.pool: \"b\" names no pool"),
                 ({"fleet": {"pools": [{"name": "p", "role": "prefill"},
                                       {"name": "d", "role": "decode", "model": {"hkv": 4}}]}},
                  "fleet.pools[0]: its model (custom) is not decode pool fleet.pools[1]'s"),
                 ({"model": "llama-3.1-8b", "fleet": {
                     "pools": [{"name": "p", "role": "prefill"}, {"name": "d", "role": "decode"}],
                     "autoscale": {"pool": "d", "max": 2, "metric": "ttft", "target": 100}}},
                  "fleet.autoscale.metric: ttft is stamped where a request is prefilled"),
                 ({"fleet": {"replicas": 2, "decode_router": "central_queue"}},
                  "fleet.decode_router: \"central_queue\" cannot choose a decode replica"),):
    exp = dict(BASE)
    exp.update(bad)
    r, out = run(exp, "bad")
    if r.returncode != 1 or why not in r.stderr or os.path.exists(out):
        fails.append(f"refusal {why!r}: rc {r.returncode}, {r.stderr.strip()!r}")

# Autoscaling (experiments/fleet/autoscale_diurnal.json: 1 to 6 replicas over a
# rising and falling rate, 20 s cold starts): the count stays within its bounds, every
# start is ready exactly a cold start later, no replica runs an iteration while it is
# off or starting, every request finishes, up_s is each replica's time from start to
# off (or the end).
AS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments", "fleet",
                  "autoscale_diurnal.json")
out = os.path.join(tmp, "as.h5")
r = subprocess.run([pkvsim, "run", "-q", "-o", out, AS], capture_output=True, text=True)
if r.returncode:
    fails.append(f"autoscale: {r.stderr.strip()}")
else:
    sc, st, pf, q, rep = (table(out, g) for g in ("scale", "steps", "prefills", "requests", "replicas"))
    ev, t, who = sc["event"], sc["t"], sc["replica"]
    t_end = max(st["t_sim"].max(), q["t_finish"].max())
    checks = {"every request finished": len(q["id"]) == 15500 and not np.isnan(q["t_finish"]).any(),
              "1 to 6 active": sc["active"].min() >= 1 and sc["active"].max() <= 6,
              "it scaled up and down": (ev == 1).sum() >= 3 and (ev == 4).sum() >= 1}
    for i in range(6):
        # serving intervals: from the start (replica 0) or each ready to the next off
        spans, on, since, up = [], i == 0, 0.0, 0.0
        start = 0.0
        for e_, t_ in zip(ev[who == i], t[who == i]):
            if e_ == 1:
                start = t_
            elif e_ == 2:
                checks[f"replica {i} ready a cold start after its start"] = \
                    checks.get(f"replica {i} ready a cold start after its start", True) and abs(t_ - start - 20) < 1e-9
                on, since = True, t_
            elif e_ == 4:
                spans.append((since, t_)); on = False
                up += t_ - start
        if on:
            spans.append((since, np.inf))
            up += t_end - start
        ts = np.concatenate([st["t_sim"][st["replica"] == i], pf["t_sim"][pf["replica"] == i]])
        inside = np.zeros(len(ts), bool)
        for a, b in spans:
            inside |= (ts >= a) & (ts <= b)
        checks[f"replica {i} runs only while serving"] = inside.all()
        checks[f"replica {i} up_s"] = abs(rep["up_s"][i] - up) < 1e-6 * max(up, 1)
    for what, ok in checks.items():
        if not ok:
            fails.append(f"autoscale: {what}")

# A target near zero wants the most replicas (its wish overflowed an int and scaled a
# loaded pool down to its minimum); a huge one the fewest.
for target, want in ((1e-12, "max"), (1e9, "min")):
    e = json.load(open(AS))
    e["route"]["calibration"] = os.path.join(os.path.dirname(AS), e["route"]["calibration"])
    e["workload"]["num_requests"] = 3000
    e["fleet"]["autoscale"]["target"] = target
    r, out = run(e, f"as_target_{want}")
    if r.returncode:
        fails.append(f"autoscale target {target}: {r.stderr.strip()}")
        continue
    sc = table(out, "scale")
    a = e["fleet"]["autoscale"]
    d, m = sc["desired"][sc["event"] == 0], sc["metric"][sc["event"] == 0]
    if want == "max" and not ((m > 0).any() and (d[m > 0] == a["max"]).all()):
        fails.append(f"autoscale target {target}: decisions under load "
                     f"{sorted(set(d[m > 0].tolist()))}, not {a['max']}")
    if want == "min" and not (d == a.get("min", 1)).all():
        fails.append(f"autoscale target {target}: decisions {sorted(set(d.tolist()))}, not the minimum")

# A cold start that outlasts the work: no decision after the work is over, and no
# replica-second past the run's end (decisions went on every interval until the cold
# start ended, and counted its 1,000 s in a run of a few seconds).
e = dict(BASE, workload=dict(BASE["workload"], num_requests=60),
         fleet={"replicas": 1, "router": "least_requests",
                "autoscale": {"min": 1, "max": 3, "target": 1, "interval_s": 0.05,
                              "cold_start_s": 1000}})
r, out = run(e, "as_cold")
if r.returncode:
    fails.append(f"autoscale cold start: {r.stderr.strip()}")
else:
    sc, q, rep = table(out, "scale"), table(out, "requests"), table(out, "replicas")
    t_end = q["t_finish"].max()
    if not (sc["event"] == 1).any():
        fails.append("autoscale cold start: no replica was started (the case is not exercised)")
    if sc["t"][sc["event"] == 0].max() > t_end + 0.05 + 1e-9:
        fails.append(f"autoscale cold start: decisions until {sc['t'].max()} s, the work ended at {t_end} s")
    if rep["up_s"].sum() > 3 * t_end * (1 + 1e-9):
        fails.append(f"autoscale cold start: {rep['up_s'].sum()} replica-seconds in a {t_end} s run")

# Autoscaling on TTFT: each decision's metric is the 90th percentile (ms) of the first
# tokens of its last 30 s (NaN where none came), its wish active x metric / target.
ttft_exp = json.load(open(AS))
ttft_exp["route"]["calibration"] = os.path.join(os.path.dirname(AS), ttft_exp["route"]["calibration"])
ttft_exp["workload"]["num_requests"] = 6000
ttft_exp["fleet"]["autoscale"].update(metric="ttft", target=150, percentile=90, window_s=30)
r, out = run(ttft_exp, "as_ttft")
if r.returncode:
    fails.append(f"autoscale ttft: {r.stderr.strip()}")
else:
    sc, q = table(out, "scale"), table(out, "requests")
    ft, ttft = q["t_first_token"], q["t_first_token"] - q["t_arrival"]
    dec = sc["event"] == 0
    bad = 0
    for t_, m_ in zip(sc["t"][dec], sc["metric"][dec]):
        w = ttft[(ft >= t_ - 30) & (ft <= t_)]
        want = np.percentile(w, 90) * 1e3 if len(w) else np.nan
        bad += not (np.isnan(want) and np.isnan(m_) or abs(want - m_) <= 1e-6 * want)
    if bad or (sc["event"] == 1).sum() < 1 or dec.sum() < 10:
        fails.append(f"autoscale ttft: {bad} of {dec.sum()} decisions' metric is not the window's "
                     f"p90, or it never scaled up ({(sc['event'] == 1).sum()} starts)")

# An output path that is a pool's own calibration is refused, the file left as it was.
import shutil
own_cal = os.path.join(tmp, "pool_cal.json")
shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments",
                         "calibration", "h200.json"), own_cal)
before = open(own_cal, "rb").read()
exp = dict(BASE, fleet={"pools": [{"name": "a", "replicas": 2, "route": {"calibration": own_cal}}]})
path = os.path.join(tmp, "own_cal.json")
with open(path, "w") as f:
    json.dump(exp, f)
r = subprocess.run([pkvsim, "run", "-q", "-o", own_cal, path], capture_output=True, text=True)
if r.returncode == 0 or "a fleet pool's calibration file" not in r.stderr or open(own_cal, "rb").read() != before:
    fails.append(f"output over a pool's calibration: rc {r.returncode}, {r.stderr.strip()!r}")

# --calibration and --route reach the pools that name none of their own; a pool that
# names its calibration keeps it.
cal_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments", "calibration")
POOLS = dict(BASE, fleet={"pools": [{"name": "a", "replicas": 1},
                                    {"name": "b", "replicas": 1, "route": {"calibration": own_cal}}]})
path = os.path.join(tmp, "pools_cli.json")
with open(path, "w") as f:
    json.dump(POOLS, f)


def pool_tpot(*opts):
    out = os.path.join(tmp, "pools_cli.h5")
    if os.path.exists(out):
        os.remove(out)
    r = subprocess.run([pkvsim, "run", "-q", "-o", out, *opts, path], capture_output=True, text=True)
    if r.returncode:
        fails.append(f"pools with {opts}: {r.stderr.strip()}")
        return [np.nan, np.nan]
    q = table(out, "requests")
    tpot = (q["t_finish"] - q["t_first_token"]) / np.maximum(q["generated"] - 1, 1)
    return [float(np.nanmedian(tpot[(q["replica"] == i) & (q["generated"] > 1)])) for i in (0, 1)]


plain = pool_tpot()
placeholder = pool_tpot("-c", os.path.join(cal_dir, "default.json"))
routed = pool_tpot("--route", "ref_paged")
if not (placeholder[0] != plain[0] and placeholder[1] == plain[1]):
    fails.append(f"--calibration and pools: TPOT p50 {plain} without, {placeholder} with")
if not routed[0] != plain[0]:
    fails.append(f"--route and pools: TPOT p50 {plain} without, {routed} with")

# The cpu backend runs a small fleet (its attention on the CPU, timed by the wall clock;
# prompts in prefill batches: it runs no chunks inside a decode step).
CPU = dict(BASE, run={"backend": "cpu"}, fleet={"replicas": 2, "router": "round_robin"},
           serving=dict(BASE["serving"], scheduler="prefill_first"))
CPU["workload"] = dict(BASE["workload"], num_requests=12, decode={"dist": "uniform", "min": 2, "max": 8},
                       prompt={"dist": "uniform", "min": 16, "max": 200})
r, out = run(CPU, "cpu")
if r.returncode:
    fails.append(f"cpu fleet: {r.stderr.strip()}")
else:
    q, st = table(out, "requests"), table(out, "steps")
    if len(q["id"]) != 12 or np.isnan(q["t_finish"]).any() or set(q["replica"]) != {0, 1} or \
            set(st["replica"]) != {0, 1} or np.isnan(st["t_wall"]).any():
        fails.append(f"cpu fleet: {len(q['id'])} requests, replicas {set(q['replica'])}, "
                     f"steps on {set(st['replica'])}")

for bad, why in (({"workload": dict(BASE["workload"], arrival={"process": "closed", "concurrency": 4})},
                  "a closed loop has no arrivals to route"),
                 ({"fleet": {"replicas": 4, "router": "prefix_affinity"}},
                  "fleet.router: \"prefix_affinity\" routes by the replicas' cached prefixes; set "
                  "serving.prefix_caching to true")):
    exp = dict(BASE, fleet={"replicas": 4})
    exp.update(bad)
    r, out = run(exp, "bad")
    if r.returncode != 1 or why not in r.stderr or os.path.exists(out):
        fails.append(f"refusal {why!r}: rc {r.returncode}, {r.stderr.strip()!r}")

for f in fails:
    print("FAIL", f)
print(f"{'FAILED' if fails else 'ok'}: fleet runs")
sys.exit(1 if fails else 0)
