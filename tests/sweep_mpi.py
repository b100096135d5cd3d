#!/usr/bin/env python3
"""A two-rank MPI sweep on the model backend writes the same data as the serial run:
every point's /steps, /requests and /prefills, and the index. A fleet over two ranks
(each its block of replicas, the view exchanged at each refresh) gives the one-process
run's /summary and /replicas; a fleet the ranks cannot split and a run with neither
sweep nor fleet are refused. Usage: sweep_mpi.py MPIEXEC PKVSIM"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

mpiexec, pkvsim = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
exp = os.path.join(tmp, "sw.json")
json.dump({"workload": {"arrival": {"process": "poisson", "rate": 60}, "num_requests": 80,
                        "prompt": {"dist": "uniform", "min": 128, "max": 8192},
                        "decode": {"dist": "uniform", "min": 4, "max": 96}},
           "serving": {"max_active": 16, "kv_pages": 16384}, "run": {"backend": "model"},
           "sweep": {"axes": [{"path": "workload.arrival.rate", "values": [10, 60, 240]},
                              {"path": "route.policy", "values": ["adaptive", "ref_paged"]},
                              {"path": "run.seed", "values": [1, 2]}]}}, open(exp, "w"))
fails = []
ser, par = os.path.join(tmp, "serial.h5"), os.path.join(tmp, "mpi.h5")
r = subprocess.run([pkvsim, "run", "-q", "-o", ser, exp], capture_output=True, text=True)
if r.returncode:
    fails.append(f"serial: {r.stderr}")
r = subprocess.run([mpiexec, "-n", "2", pkvsim, "run", "-o", par, exp], capture_output=True,
                   text=True, env=env)
ranks = {l.split(":")[1].strip() for l in r.stderr.splitlines() if l.startswith("pkvsim: rank")}
if r.returncode or ranks != {"rank 0", "rank 1"}:
    fails.append(f"mpirun -n 2: rc {r.returncode}, ranks that ran points {ranks}, {r.stderr[-400:]!r}")
if not fails:
    with h5py.File(ser) as a, h5py.File(par) as b:
        if sorted(a["points"]) != sorted(b["points"]) or len(a["points"]) != 12:
            fails.append(f"points: {sorted(a['points'])} against {sorted(b['points'])}")
        for p in a["points"]:
            for g in ("steps", "requests", "prefills"):
                for c in a["points"][p][g]:
                    x, y = a["points"][p][g][c][:], b["points"][p][g][c][:]
                    if x.shape != y.shape or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
                        fails.append(f"point {p}: {g}/{c} differs")
        for c in a["sweep/index"]:
            x, y = a["sweep/index"][c][:], b["sweep/index"][c][:]
            if not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
                fails.append(f"index column {c} differs")
one = os.path.join(tmp, "one.json")
e = json.load(open(exp))
del e["sweep"]
json.dump(e, open(one, "w"))
r = subprocess.run([mpiexec, "-n", "2", pkvsim, "run", "-q", "-o", os.path.join(tmp, "x.h5"), one],
                   capture_output=True, text=True, env=env)
if r.returncode == 0 or "has neither" not in r.stderr:
    fails.append(f"a non-sweep run under mpirun: rc {r.returncode}, {r.stderr[-300:]!r}")

# A fleet of seven replicas over two ranks (4 and 3) against one process: the same
# summary (sums in another order: within 1e-9) and the same /replicas rows.
fleet = dict(e, workload=dict(e["workload"], num_requests=600),
             fleet={"replicas": 7, "router": "least_requests", "router_latency_ms": 0.5,
                    "view_refresh_ms": 5},
             run={"backend": "model", "record": "summary"})
fleet["workload"]["arrival"] = {"process": "poisson", "rate": 150}
for router in ("least_requests", "power_of_two", "least_tokens"):
    fleet["fleet"]["router"] = router
    path = os.path.join(tmp, "fleet.json")
    json.dump(fleet, open(path, "w"))
    one_h5, two_h5 = os.path.join(tmp, "fleet1.h5"), os.path.join(tmp, "fleet2.h5")
    r1 = subprocess.run([pkvsim, "run", "-q", "-o", one_h5, path], capture_output=True, text=True)
    r2 = subprocess.run([mpiexec, "-n", "2", pkvsim, "run", "-q", "-o", two_h5, path],
                        capture_output=True, text=True, env=env)
    if r1.returncode or r2.returncode:
        fails.append(f"fleet {router}: rc {r1.returncode} {r2.returncode}: {r1.stderr[-300:]} {r2.stderr[-300:]}")
        continue
    with h5py.File(one_h5) as a, h5py.File(two_h5) as b:
        sa, sb = dict(a["summary"].attrs), dict(b["summary"].attrs)
        if sorted(sa) != sorted(sb):
            fails.append(f"fleet {router}: /summary attributes differ")
        for k in sa:
            x, y = np.asarray(sa[k], float), np.asarray(sb.get(k, np.nan), float)
            if x.shape != y.shape or not np.allclose(x, y, rtol=1e-9, atol=0, equal_nan=True):
                fails.append(f"fleet {router}: /summary {k}: {x} against {y}")
        if sa.get("finished") != 600:
            fails.append(f"fleet {router}: {sa.get('finished')} of 600 finished")
        for c in a["replicas"]:
            x, y = a["replicas"][c][:], b["replicas"][c][:]
            if x.shape != y.shape or not np.allclose(x, y, rtol=1e-9, atol=0):
                fails.append(f"fleet {router}: /replicas/{c}: {x} against {y}")
        if "requests" in b or "steps" in b:
            fails.append(f"fleet {router}: rows beyond the summary written over ranks")
for bad, why in (({"view_refresh_ms": 0}, "fleet.view_refresh_ms above 0"),
                 ({"router": "central_queue"}, "other than central_queue"),
                 ({"record": "requests"}, "run.record \"summary\"")):
    b = json.loads(json.dumps(fleet))
    if "record" in bad:
        b["run"]["record"] = bad["record"]
    else:
        b["fleet"].update(bad)
    path, out = os.path.join(tmp, "bad.json"), os.path.join(tmp, "bad.h5")
    json.dump(b, open(path, "w"))
    r = subprocess.run([mpiexec, "-n", "2", pkvsim, "run", "-q", "-o", out, path],
                       capture_output=True, text=True, env=env)
    if r.returncode == 0 or why not in r.stderr or os.path.exists(out):
        fails.append(f"fleet refusal {why!r}: rc {r.returncode}, {r.stderr[-300:]!r}")
for f in fails:
    print("FAIL", f)
print(f"{'FAILED' if fails else 'ok'}: the two-rank sweep and fleet equal the serial ones")
sys.exit(1 if fails else 0)
