#!/usr/bin/env python3
"""A two-rank MPI sweep on the model backend writes the same data as the serial run:
every point's /steps, /requests and /prefills, and the index. Also a non-sweep run
under mpirun is refused. Usage: sweep_mpi.py MPIEXEC PKVSIM"""
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
if r.returncode == 0 or "only a sweep" not in r.stderr:
    fails.append(f"a non-sweep run under mpirun: rc {r.returncode}, {r.stderr[-300:]!r}")
for f in fails:
    print("FAIL", f)
print(f"{'FAILED' if fails else 'ok'}: the two-rank sweep equals the serial one")
sys.exit(1 if fails else 0)
