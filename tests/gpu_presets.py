#!/usr/bin/env python3
"""The derived GPU presets (experiments/calibration/*-derived.json): each is exactly what
scripts/derive_gpu_presets.py makes of the H200's measured calibration (so neither drifts
alone), names its sources, and runs; a decode-bound Llama-3.1-8B workload's TPOT on each
over the H200's lies between 1 (fixed costs alone) and the H200's memory bandwidth over
its own (the weight stream alone), on the right side of 1 for a faster GPU. A GPU of
gpus.json measured on itself (h100-sxm.json) keeps within its derived preset's bounds too.
Usage: gpu_presets.py PKVSIM SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

import h5py

pkvsim, src = sys.argv[1], sys.argv[2]
cal = os.path.abspath(os.path.join(src, "experiments", "calibration"))
tmp = tempfile.mkdtemp()
fails = []
r = subprocess.run([sys.executable, os.path.join(src, "scripts", "derive_gpu_presets.py"), tmp],
                   capture_output=True, text=True)
if r.returncode:
    sys.exit(f"FAIL derive_gpu_presets.py: {r.stderr}")
names = sorted(f for f in os.listdir(tmp) if f.endswith("-derived.json"))
shipped = sorted(f for f in os.listdir(cal) if f.endswith("-derived.json"))
if names != shipped or len(names) < 4:
    fails.append(f"derived presets {names} against shipped {shipped}")


def tpot(calibration):
    exp = {"name": "preset", "model": "llama-3.1-8b",
           "workload": {"arrival": {"process": "poisson", "rate": 2},
                        "prompt": {"dist": "uniform", "min": 200, "max": 400},
                        "decode": {"dist": "uniform", "min": 100, "max": 200}, "num_requests": 60},
           "serving": {"max_active": 8, "kv_pages": 4000},
           "route": {"policy": "adaptive", "calibration": calibration},
           "run": {"backend": "model", "record": "summary"}}
    path, out = os.path.join(tmp, "e.json"), os.path.join(tmp, "e.h5")
    with open(path, "w") as f:
        json.dump(exp, f)
    r = subprocess.run([pkvsim, "run", "-q", "-o", out, path], capture_output=True, text=True)
    if r.returncode:
        fails.append(f"{calibration}: {r.stderr.strip()}")
        return float("nan")
    with h5py.File(out) as f:
        return f["summary"].attrs["tpot_p50"]


h200 = tpot(os.path.join(cal, "h200.json"))
for name in shipped:
    with open(os.path.join(cal, name)) as f:
        ship = json.load(f)
    if os.path.exists(os.path.join(tmp, name)):
        with open(os.path.join(tmp, name)) as f:
            if json.load(f) != ship:
                fails.append(f"{name}: not what scripts/derive_gpu_presets.py makes of the H200's")
    d = ship.get("derived", {})
    if not d.get("sources") or "DERIVED" not in ship.get("note", ""):
        fails.append(f"{name}: no sources, or not marked derived")
    for k, v in d.get("published_constants", {}).items():  # taken as published, with a source
        if ship.get(k) != v["value"] or not v.get("source") or k not in ship["note"]:
            fails.append(f"{name}: {k} {ship.get(k)} is not its published {v['value']}, "
                         "or has no source, or the note does not say so")
    read = d.get("published_read_gbps")  # a published read stream in place of the ratio
    if read and (abs(ship["served_model"]["beta_gbps"] - read["value"]) > 1e-9
                 or not read.get("source") or "published_read_gbps" not in ship["note"]):
        fails.append(f"{name}: beta_gbps {ship['served_model']['beta_gbps']} is not its published "
                     f"read stream {read['value']}, or has no source, or the note does not say so")
    bw = d["h200_datasheet"]["memory_gbps"] / d["datasheet"]["memory_gbps"]
    files = [name]
    with open(os.path.join(cal, "gpus.json")) as f:  # the same GPU measured on itself
        files += [m for g, m in json.load(f)["gpus"].items() if name == f"{g}-derived.json" and m != name]
    for file in files:
        ratio = tpot(os.path.join(cal, file)) / h200
        lo, hi = sorted((1.0, bw))
        if not lo <= ratio <= hi:
            fails.append(f"{file}: TPOT {ratio:.3f}x the H200's, outside [{lo:.3f}, {hi:.3f}]")
        else:
            print(f"{file}: TPOT {ratio:.3f}x the H200's (bandwidth alone: {bw:.3f}x)")
for f in fails:
    print("FAIL", f)
sys.exit(1 if fails else 0)
