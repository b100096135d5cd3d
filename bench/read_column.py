#!/usr/bin/env python3
"""Benchmark: how long h5py takes to read one /steps column of a long run.

usage: read_column.py PKVSIM [--steps N] [--out FILE]

Runs a closed-loop experiment of 8 rows for N decode steps (default 36,000,000) on
the model backend with `run.record: steps`, then reads /steps/t_sim, /steps/route and
the whole /steps table with h5py (each from a cold open; the file is in the page
cache, as it is right after a run) and prints a table that also goes to FILE
(default read_column.txt). Needs h5py and numpy.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("pkvsim")
ap.add_argument("--steps", type=int, default=36_000_000)
ap.add_argument("--out", default="read_column.txt")
a = ap.parse_args()

with tempfile.TemporaryDirectory() as tmp:
    h5 = os.path.join(tmp, "long.h5")
    exp = {"name": "read-column", "workload": {
        "arrival": {"process": "closed", "concurrency": 8},
        "prompt": {"dist": "fixed", "value": 512},
        "decode": {"dist": "uniform", "min": 32, "max": 96}, "max_context": 640},
        "serving": {"max_active": 8, "kv_pages": 400}, "route": {"policy": "adaptive"},
        "run": {"max_steps": a.steps, "record": "steps", "output": h5}}
    path = os.path.join(tmp, "exp.json")
    with open(path, "w") as f:
        json.dump(exp, f)
    t0 = time.monotonic()
    subprocess.run([a.pkvsim, "run", "-q", path], check=True, stdout=subprocess.DEVNULL)
    t_run = time.monotonic() - t0
    size = os.path.getsize(h5)
    rows = []
    for what in ("t_sim", "route", "all"):
        t0 = time.monotonic()
        with h5py.File(h5, "r") as f:
            g = f["steps"]
            if what == "all":
                cols = {c: g[c][:] for c in g}
                n = len(cols["index"])
                mem = sum(v.nbytes for v in cols.values())
            else:
                x = g[what][:]
                n, mem = len(x), x.nbytes
        rows.append((what, n, time.monotonic() - t0, mem))
    assert rows[0][1] == a.steps, rows

lines = [f"{a.steps} steps: run {t_run:.1f} s, file {size / 1e6:.1f} MB "
         f"({size / a.steps:.2f} bytes/step)", "",
         "| read | rows | seconds | MB in memory |", "|---|---|---|---|"]
lines += [f"| /steps/{w} | {n} | {t:.2f} | {m / 1e6:.0f} |" if w != "all" else
          f"| every /steps column | {n} | {t:.2f} | {m / 1e6:.0f} |" for w, n, t, m in rows]
text = "\n".join(lines) + "\n"
sys.stdout.write(text)
with open(a.out, "w") as f:
    f.write(text)
