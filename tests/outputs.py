#!/usr/bin/env python3
"""Outputs never destroy inputs, paths are never cut, and stop signals leave a valid
file or none:
-o (or run.output, --csv) naming the experiment, its trace, its calibration, its
model preset, an input .h5 (by another name too: a hard link) or a device is
refused with the input left byte for byte; SIGTERM and SIGHUP finish the step like
SIGINT (exit 128 + signal, a valid file marked interrupted, no temporary file); a
second signal stops at once and removes the temporary file; a stale OUT.tmp.PID of a
dead process is removed by the next run. Usage: outputs.py PKVSIM SRC"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py

pkvsim, src = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
fails = []


def digest(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


def pkv(*args):
    return subprocess.run([pkvsim, *args], capture_output=True, text=True)


trace = os.path.join(tmp, "trace.csv")
shutil.copy(os.path.join(src, "experiments/traces/azure2023_code_first200.csv"), trace)
cal = os.path.join(tmp, "cal.json")
shutil.copy(os.path.join(src, "experiments/calibration/default.json"), cal)
preset = os.path.join(tmp, "tiny.json")
with open(preset, "w") as f:
    json.dump({"name": "tiny", "layers": 2, "hidden": 256, "hq": 4, "hkv": 2, "head_dim": 128,
               "intermediate": 512, "vocab": 1000}, f)
exp = os.path.join(tmp, "exp.json")
with open(exp, "w") as f:
    json.dump({"model": {"preset": preset},
               "workload": {"trace": {"path": trace, "columns": "azure", "first_n": 20}},
               "serving": {"max_active": 8, "kv_pages": 8192},
               "route": {"calibration": cal}, "run": {"backend": "model"}}, f)
good = os.path.join(tmp, "good.h5")
r = pkv("run", "-q", "-o", good, exp)
if r.returncode:
    fails.append(f"the base run: {r.stderr.strip()}")
link = os.path.join(tmp, "exp_link.json")
os.link(exp, link)
inputs = [exp, trace, cal, preset]
before = {p: digest(p) for p in inputs + [good]}
cases = [("run", "-q", "-o", p, exp) for p in inputs + [link]]
cases += [("run", "-q", "-o", "/dev/null", exp), ("run", "-q", "-o", tmp, exp)]
cases += [("workload", exp, "--csv", p) for p in (exp, trace)]
cases += [("report", good, "--csv", good)]
for c in cases:
    r = pkv(*c)
    if r.returncode == 0 or not ("of this run" in r.stderr or "not a regular file" in r.stderr):
        fails.append(f"{' '.join(c[:1] + c[2:])}: rc {r.returncode}, {r.stderr.strip()!r}")
for p, d in before.items():
    if digest(p) != d:
        fails.append(f"{p} was changed")
# run.output naming the experiment itself.
with open(exp) as f:
    e = json.load(f)
e["run"]["output"] = exp
with open(exp, "w") as f:
    json.dump(e, f)
d = digest(exp)
r = pkv("run", "-q", exp)
if r.returncode == 0 or digest(exp) != d:
    fails.append(f"run.output = the experiment: rc {r.returncode}, {r.stderr.strip()!r}")

# Paths refused before the run, never cut: an empty -o, a name that is empty or has a
# '/', an output or a trace path beyond the limit.
paths = []
for name, mutate, want in (
        ("empty -o", None, "names no file"),
        ("empty name", lambda e: e.update(name=""), "must be 1 to"),
        ("name with /", lambda e: e.update(name="a/b"), "without '/'"),
        ("long -o", None, "longer than"),
        ("long trace path", lambda e: e["workload"]["trace"].update(path="x" * 1500), "longer than")):
    with open(exp) as f:
        e = json.load(f)
    e["run"].pop("output", None)
    if mutate:
        mutate(e)
    p = os.path.join(tmp, "paths.json")
    with open(p, "w") as f:
        json.dump(e, f)
    args = ["run", "-q", p]
    if name == "empty -o":
        args[2:2] = ["-o", ""]
    if name == "long -o":
        args[2:2] = ["-o", os.path.join(tmp, "y" * 1100 + ".h5")]
    r = pkv(*args)
    paths.append(name)
    if r.returncode == 0 or want not in r.stderr:
        fails.append(f"{name}: rc {r.returncode}, {r.stderr.strip()!r}")

# Signals on a long run.
long_exp = os.path.join(tmp, "long.json")
with open(long_exp, "w") as f:
    json.dump({"workload": {"arrival": {"process": "closed", "concurrency": 8},
                            "prompt": {"dist": "fixed", "value": 2048},
                            "decode": {"dist": "fixed", "value": 4000000},
                            "max_context": 4002048},
               "serving": {"max_active": 8, "kv_pages": 2100000},
               "route": {"calibration": cal}, "run": {"max_steps": 2000000000}}, f)
for sig in (signal.SIGTERM, signal.SIGHUP):
    out = os.path.join(tmp, f"sig{int(sig)}.h5")
    p = subprocess.Popen([pkvsim, "run", "-q", "-o", out, long_exp], stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    p.send_signal(sig)
    rc = p.wait(timeout=60)
    left = [x for x in os.listdir(tmp) if x.startswith(os.path.basename(out) + ".tmp.")]
    ok = rc == 128 + int(sig) and os.path.exists(out) and not left
    if ok:
        with h5py.File(out) as f:
            ok = f["provenance"].attrs["interrupted"] == 1 and len(f["steps/index"]) > 100
    if not ok:
        fails.append(f"{sig.name}: rc {rc}, file {os.path.exists(out)}, left {left}")
out = os.path.join(tmp, "twice.h5")
p = subprocess.Popen([pkvsim, "run", "-q", "-o", out, long_exp], stderr=subprocess.DEVNULL)
time.sleep(1.0)
# The first signal finishes the step and writes; the second, right after, stops at once.
p.send_signal(signal.SIGTERM)
p.send_signal(signal.SIGTERM)
rc = p.wait(timeout=60)
left = [x for x in os.listdir(tmp) if x.startswith("twice.h5.tmp.")]
if left or rc not in (128 + signal.SIGTERM,):
    fails.append(f"two signals: rc {rc}, left {left}")
if os.path.exists(out):  # it may have finished writing before the second arrived
    with h5py.File(out) as f:
        f["provenance"].attrs["interrupted"]
# A stale temporary file of a dead process.
dead = subprocess.Popen(["true"])
dead.wait()
stale = os.path.join(tmp, f"good2.h5.tmp.{dead.pid}")
open(stale, "w").write("half a file")
r = pkv("run", "-q", "-o", os.path.join(tmp, "good2.h5"), exp.replace("exp.json", "exp_link.json"))
if os.path.exists(stale) or "no longer runs" not in r.stderr:
    fails.append(f"stale temporary file: {'still there' if os.path.exists(stale) else 'gone'}, "
                 f"{r.stderr.strip()!r}")

for f in fails:
    print("FAIL", f)
print(f"{'FAILED' if fails else 'ok'}: {len(cases) + len(paths) + 6} output, path and signal "
      "checks")
sys.exit(1 if fails else 0)
