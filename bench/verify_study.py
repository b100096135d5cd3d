#!/usr/bin/env python3
"""The route threshold study at speculative decoding's verify steps (issue 47 item 3):
runs experiments/thresholds/verify.json (Llama-3.1-8B, EAGLE k = 1, 3, 5, 7, contexts 2K /
8K / 32K, 1 / 8 / 16 requests in flight, adaptive, every route's prediction kept a step) and
prints, per point, over its verify steps (no prompt chunks): adaptive's summed attention
time and the best fixed route's over the per-step optimum (the oracle on the cost model),
and the routes adaptive took.
Usage: verify_study.py PKVSIM [OUT.txt] [--calibration FILE] [--kv-dtype T]; prints the
table and writes it to OUT (default bench/results/verify_study.txt); --kv-dtype fp8_e4m3
runs the same points over FP8 KV (model.kv_dtype)."""
import argparse
import json
import os
import subprocess
import tempfile

import h5py
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("pkvsim")
ap.add_argument("out", nargs="?", default=os.path.join(here, "results", "verify_study.txt"))
ap.add_argument("--calibration", default=None, help="route.calibration (default: the file's)")
ap.add_argument("--kv-dtype", default=None, help="model.kv_dtype (default: the model's type)")
args = ap.parse_args()
src = os.path.join(here, "..", "experiments", "thresholds", "verify.json")
exp = json.load(open(src))
if args.calibration:
    exp["route"]["calibration"] = os.path.abspath(args.calibration)
else:
    exp["route"]["calibration"] = os.path.normpath(
        os.path.join(os.path.dirname(src), exp["route"]["calibration"]))
if args.kv_dtype:
    exp["model"] = {"preset": exp["model"], "kv_dtype": args.kv_dtype}
kv = f", KV {args.kv_dtype}" if args.kv_dtype else ""
lines = [f"# pkvsim verify threshold study ({exp['route']['calibration']}, model backend{kv})",
         "| k | context | in flight | verify steps | adaptive / optimum | best fixed route | "
         "its / optimum | adaptive's routes |", "|---|---|---|---|---|---|---|---|"]
with tempfile.TemporaryDirectory() as tmp:
    path, h5 = os.path.join(tmp, "verify.json"), os.path.join(tmp, "verify.h5")
    json.dump(exp, open(path, "w"))
    subprocess.run([args.pkvsim, "run", "-q", path, "-o", h5], check=True)
    with h5py.File(h5) as f:
        idx = f["sweep/index"]
        for i, name in enumerate(sorted(f["points"].keys())):
            p = f["points"][name]
            s, r = p["steps"], p["routes"]
            keep = (s["spec_proposed"][:] > 0) & (s["prefill_tokens"][:] == 0)
            names = [n for n in r.keys() if n != "index"]
            t = np.stack([r[n][:][keep] for n in names])  # [route][step]
            ok = np.all(np.isfinite(t), axis=1)  # routes planned at every such step
            t, names = t[ok], [n for n, o in zip(names, ok) if o]
            chosen = s["route"][:][keep]
            from_name = {n: k for k, n in enumerate(names)}
            opt = t.min(axis=0).sum()
            # the chosen route's prediction each step (its name from the route enum's order)
            enum = ["ref_paged", "pkv_bucket", "pkv_workqueue", "pkv_fused", "flashinfer",
                    "flashinfer_tc"]
            took = np.array([t[from_name[enum[c]], j] for j, c in enumerate(chosen)])
            best = int(np.argmin(t.sum(axis=1)))
            mix = {}
            for c in chosen:
                mix[enum[c]] = mix.get(enum[c], 0) + 1
            mix = ", ".join(f"{k} {100 * v / len(chosen):.0f}%" for k, v in
                            sorted(mix.items(), key=lambda kv: -kv[1]))
            k, ctx, conc = (int(idx[c][i]) for c in ("serving.speculative.tokens",
                                                      "workload.prompt.value",
                                                      "workload.arrival.concurrency"))
            lines.append(f"| {k} | {ctx // 1024}K | {conc} | {keep.sum()} | "
                         f"{took.sum() / opt:.3f} | {names[best]} | "
                         f"{t[best].sum() / opt:.3f} | {mix} |")
text = "\n".join(lines) + "\n"
print(text, end="")
os.makedirs(os.path.dirname(args.out), exist_ok=True)
open(args.out, "w").write(text)
