#!/usr/bin/env python3
"""Sweeps: product and zip expansion, one file with a group per point and an index,
a failed point recorded with its error while the others run, resume after a kill
mid-sweep (the same data as an uninterrupted run), another sweep's file refused and
left as it was; point files that are not the sweep's points (a run of its own, an HDF5
file of something else, a non-HDF5 file) refused and left as they were; points made
with other axis values or another --seed or --calibration run again; a second process
on the same output refused naming the first. Usage: sweep.py PKVSIM"""
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
missing = [k for k in ("itl_p50", "itl_p99", "e2el_p50", "e2el_p99", "prefix_hit_rate")
           if k not in ix]
if missing or not ix["e2el_p99"][0] > ix["e2el_p50"][0] > 0:
    fails.append(f"the index lacks {missing}, or its E2E p50/p99 are not in order")
if os.path.exists(out + ".points"):
    fails.append("the point files were not removed after the sweep")

def kill_after_first(out, path, *opts):
    """Start a sweep, SIGKILL it once its first point file is there."""
    p = subprocess.Popen([pkvsim, "run", "-q", "-o", out, *opts, path], stderr=subprocess.DEVNULL)
    first = os.path.join(out + ".points", "00000.h5")
    for _ in range(600):
        if os.path.exists(first) or p.poll() is not None:
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    return first


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
kill_after_first(res, res_path)
left = sorted(os.listdir(res + ".points")) if os.path.exists(res + ".points") else []
if os.path.exists(res) or not left or any(".tmp." not in x and not x.endswith(".h5") and x != ".lock" for x in left):
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




def point_attrs(path, i):
    with h5py.File(path) as f:
        g = f["points"][f"{i:05d}"]
        cfg = g["config"]["experiment"][()] if "experiment" in g["config"] else b""
        return dict(g["provenance"].attrs), json.loads(cfg.decode() if isinstance(cfg, bytes) else cfg)


# Point files that are not this sweep's points: refused, named, left byte for byte.
tam = write("tam", {"axes": [{"path": "run.seed", "values": [1, 2]}]}, 3000)
tam_out = os.path.join(tmp, "tam.h5")
os.makedirs(tam_out + ".points")
other = os.path.join(tam_out + ".points", "00001.h5")
single = os.path.join(tmp, "single.json")
with open(single, "w") as f:
    json.dump({"name": "single", "workload": {"num_requests": 5, "arrival": {"process": "poisson", "rate": 5}},
               "run": {"backend": "model"}}, f)


def plain_h5(p):
    with h5py.File(p, "w") as f:
        f["x"] = np.arange(3)


def text_file(p):
    with open(p, "w") as f:
        f.write("not hdf5\n")


for what, make in (("a run of its own", lambda p: run("-q", "-o", p, single)),
                   ("an HDF5 file of something else", plain_h5),
                   ("a text file", text_file)):
    if os.path.exists(other):
        os.unlink(other)
    make(other)
    with open(other, "rb") as f:
        before = f.read()
    r = run("-q", "-o", tam_out, tam)
    with open(other, "rb") as f:
        after = f.read()
    if r.returncode != 1 or other not in r.stderr or "not a point of a sweep" not in r.stderr or \
            before != after or os.path.exists(tam_out):
        fails.append(f"foreign point file ({what}): rc {r.returncode}, {r.stderr.strip()!r}, "
                     f"{'changed' if before != after else 'kept'}")
os.unlink(other)

# A killed sweep whose axis values were then edited: the edited point runs again.
ed = write("ed", {"axes": [{"path": "run.seed", "values": [1, 2]}]}, 3000)
ed_out = os.path.join(tmp, "ed.h5")
kill_after_first(ed_out, ed)
with open(ed) as f:
    text = f.read()
with open(ed, "w") as f:
    f.write(text.replace('"values": [1, 2]', '"values": [5, 2]'))
r = run("-o", ed_out, ed)
if r.returncode or "running them again" not in r.stderr or not os.path.exists(ed_out):
    fails.append(f"edited axis values: rc {r.returncode}, {r.stderr.strip()[-300:]!r}")
else:
    attrs, cfg = point_attrs(ed_out, 0)
    ix = index(ed_out)
    if int(attrs["seed"]) != 5 or ix["run.seed"][0] != 5 or cfg["run"]["seed"] != 5:
        fails.append(f"edited axis values: point 0 holds seed {attrs['seed']}, index {ix['run.seed']}")

# Another --seed (point files) and another --calibration (the assembled file): run again.
sd = write("sd", {"axes": [{"path": "serving.max_active", "values": [4, 8]}]}, 3000)
sd_out = os.path.join(tmp, "sd.h5")
kill_after_first(sd_out, sd, "--seed", "7")
r = run("-o", sd_out, "--seed", "8", sd)
if r.returncode or "running them again" not in r.stderr or \
        [int(point_attrs(sd_out, i)[0]["seed"]) for i in (0, 1)] != [8, 8]:
    fails.append(f"another --seed: rc {r.returncode}, {r.stderr.strip()[-300:]!r}")
cal = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments",
                   "calibration", "default.json")
r = run("-o", sd_out, "--seed", "8", "--calibration", cal, sd)
if r.returncode or "2 finished points were run with other settings" not in r.stderr or \
        "already finished" in r.stderr:
    fails.append(f"another --calibration: rc {r.returncode}, {r.stderr.strip()[-300:]!r}")
r = run("-o", sd_out, "--seed", "8", "--calibration", cal, sd)
if r.returncode or "2 of 2 points already finished" not in r.stderr:
    fails.append(f"the same options again: rc {r.returncode}, {r.stderr.strip()[-300:]!r}")

# Two processes on one output: the second is refused, naming the first.
lk = write("lk", {"axes": [{"path": "run.seed", "values": list(range(1, 41))}]}, 3000)
lk_out = os.path.join(tmp, "lk.h5")
p = subprocess.Popen([pkvsim, "run", "-q", "-o", lk_out, lk], stderr=subprocess.DEVNULL)
for _ in range(600):
    if os.path.exists(os.path.join(lk_out + ".points", "00000.h5")) or p.poll() is not None:
        break
    time.sleep(0.02)
r = run("-q", "-o", lk_out, lk)
running = p.poll() is None
p.send_signal(signal.SIGKILL)
p.wait()
if running and (r.returncode != 1 or f"another pkvsim (pid {p.pid})" not in r.stderr):
    fails.append(f"a second process on one output: rc {r.returncode}, {r.stderr.strip()!r}")
if not running:
    fails.append("the locked sweep ended before the second process was started")

for f in fails:
    print("FAIL", f)
print(f"{'FAILED' if fails else 'ok'}: sweep checks")
sys.exit(1 if fails else 0)
