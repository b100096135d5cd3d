#!/usr/bin/env python3
"""Sweeps: product and zip expansion, one file with a group per point and an index,
a failed point recorded with its error while the others run, resume after a kill
mid-sweep (the same data as an uninterrupted run), another sweep's file refused and
left as it was. Usage: sweep.py PKVSIM"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

pkvsim = sys.argv[1]
tmp = tempfile.mkdtemp()
fails = []


def write(name, sweep, requests=40):
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump({"name": name,
                   "workload": {"arrival": {"process": "poisson", "rate": 50},
                                "num_requests": requests,
                                "prompt": {"dist": "uniform", "min": 64, "max": 2048},
                                "decode": {"dist": "uniform", "min": 8, "max": 64}},
                   "serving": {"max_active": 8, "kv_pages": 8192},
                   "run": {"backend": "model"}, "sweep": sweep}, f)
    return path


def run(*args, **kw):
    return subprocess.run([pkvsim, "run", *args], capture_output=True, text=True, **kw)


def index(path):
    with h5py.File(path) as f:
        ix = f["sweep/index"]
        return {k: [x.decode() if isinstance(x, bytes) else x for x in ix[k][:]] for k in ix}


def same_points(a, b):
    """Every point's /steps, /requests and /summary equal in two sweep files."""
    with h5py.File(a) as fa, h5py.File(b) as fb:
        if sorted(fa["points"]) != sorted(fb["points"]):
            return "different points"
        for p in fa["points"]:
            for g in ("steps", "requests", "prefills"):
                for c in fa["points"][p][g]:
                    x, y = fa["points"][p][g][c][:], fb["points"][p][g][c][:]
                    if x.shape != y.shape or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
                        return f"point {p}: {g}/{c} differs"
    return None


# Expansion: a product of 2 x 3 and a zip of two lists of 3.
prod = {"axes": [{"path": "workload.arrival.rate", "values": [20, 80]},
                 {"path": "route.policy", "values": ["adaptive", "ref_paged", "pkv_workqueue"]}]}
r = run("-n", write("prod", prod))
lines = r.stdout.strip().splitlines()
if r.returncode or len(lines) != 7 or lines[1].split("\t") != ["0", "20", "adaptive"] or \
        lines[6].split("\t") != ["5", "80", "pkv_workqueue"]:
    fails.append(f"product expansion: {r.returncode} {lines}")
zipped = {"mode": "zip", "axes": [{"path": "run.seed", "range": {"from": 1, "to": 3}},
                                  {"path": "serving.max_active", "values": [2, 4, 8]}]}
r = run("-n", write("zip", zipped))
lines = r.stdout.strip().splitlines()
if r.returncode or [l.split("\t") for l in lines[1:]] != [["0", "1", "2"], ["1", "2", "4"], ["2", "3", "8"]]:
    fails.append(f"zip expansion: {r.returncode} {lines}")
for bad, why in (({"axes": [{"path": "workload.arrival.rat", "values": [1]}]}, "not a key"),
                 ({"mode": "zip", "axes": [{"path": "run.seed", "values": [1, 2]},
                                           {"path": "serving.max_active", "values": [1]}]}, "zip"),
                 ({"axes": [{"path": "run.seed", "values": []}]}, "non-empty")):
    r = run("-n", write("bad", bad))
    if r.returncode == 0 or why not in r.stderr:
        fails.append(f"bad sweep {bad}: rc {r.returncode}, {r.stderr.strip()!r}")

# A whole sweep, one point failing; the file holds the others and the error.
sw = write("full", {"axes": [{"path": "workload.arrival.rate", "values": [20, -5, 80]},
                             {"path": "route.policy", "values": ["adaptive", "ref_paged"]}]})
out = os.path.join(tmp, "full.h5")
r = run("-o", out, sw)
ix = index(out)
if r.returncode != 3 or ix["status"] != ["done", "done", "failed", "failed", "done", "done"] or \
        "must be >= 1e-06" not in ix["error"][2] or ix["workload.arrival.rate"][4] != 80:
    fails.append(f"failed point: rc {r.returncode}, {ix['status']}, {ix['error']}")
with h5py.File(out) as f:
    n = len(f["points"])
    tok = [f["points"][p]["summary"].attrs["decode_tok_s"] for p in sorted(f["points"])]
if n != 4 or not np.allclose(tok, [ix["decode_tok_s"][i] for i in (0, 1, 4, 5)]):
    fails.append(f"points kept: {n}; index figures {ix['decode_tok_s']} against {tok}")
if os.path.exists(out + ".points"):
    fails.append("the point files were not removed after the sweep")

# Resume: kill a sweep after its first point, run it again, compare.
big = {"axes": [{"path": "run.seed", "values": [1, 2, 3, 4]}]}
ref_path, res_path = write("ref", big, 3000), write("res", big, 3000)
with open(res_path) as f:
    same_text = f.read().replace('"res"', '"ref"')
with open(res_path, "w") as f:  # the same experiment under another file name
    f.write(same_text)
ref = os.path.join(tmp, "ref.h5")
run("-q", "-o", ref, ref_path)
res = os.path.join(tmp, "res.h5")
p = subprocess.Popen([pkvsim, "run", "-q", "-o", res, res_path], stderr=subprocess.DEVNULL)
first = os.path.join(res + ".points", "00000.h5")
for _ in range(600):
    if os.path.exists(first) or p.poll() is not None:
        break
    time.sleep(0.05)
p.send_signal(signal.SIGKILL)
p.wait()
left = sorted(os.listdir(res + ".points")) if os.path.exists(res + ".points") else []
if os.path.exists(res) or not left or any(".tmp." not in x and not x.endswith(".h5") for x in left):
    fails.append(f"after the kill: output {'there' if os.path.exists(res) else 'absent'}, {left}")
r = run("-o", res, res_path)
if r.returncode or "already finished" not in r.stderr:
    fails.append(f"resume: rc {r.returncode}, {r.stderr.strip()[-300:]!r}")
diff = same_points(ref, res)
if diff:
    fails.append(f"resumed sweep against an uninterrupted one: {diff}")
# Finished: a rerun runs nothing and keeps the file's data.
r = run("-o", res, res_path)
if r.returncode or "4 of 4 points already finished" not in r.stderr or same_points(ref, res):
    fails.append(f"rerun of a finished sweep: rc {r.returncode}, {r.stderr.strip()[-200:]!r}")
# Another sweep's file as the output: refused, untouched.
before = os.path.getmtime(out), os.path.getsize(out)
r = run("-o", out, res_path)
if r.returncode == 0 or "another sweep" not in r.stderr or (os.path.getmtime(out), os.path.getsize(out)) != before:
    fails.append(f"another sweep's file: rc {r.returncode}, {r.stderr.strip()!r}")

for f in fails:
    print("FAIL", f)
print(f"{'FAILED' if fails else 'ok'}: sweep checks")
sys.exit(1 if fails else 0)
