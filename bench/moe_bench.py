#!/usr/bin/env python3
"""Mixtures of experts (issue 47's benchmark): each MoE preset decoding at B = 1, 8 and 64
(closed loop, 1K prompts, 256 tokens out) and one 8K prefill, under a uniform and a
skewed (Zipf 1.2) routing law, against the roofline of what the step must read: the
weights outside the experts, the experts its tokens chose (the run's mean
experts_active a MoE layer) and the KV, over the calibration's measured read bandwidth
(beta). Usage: moe_bench.py PKVSIM [OUT.txt] [--backend model|cuda] [--calibration NAME]
[--models A,B] [--no-ep]; prints the table and writes it to OUT (default
bench/results/moe.txt). On the cuda backend a step's time is its measured wall time and
a prefill's its measured device time (the model backend's: its prediction)."""
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
ap.add_argument("out", nargs="?", default=os.path.join(here, "results", "moe.txt"))
ap.add_argument("--backend", default="model", choices=("model", "cuda"))
ap.add_argument("--calibration", default="h200")
ap.add_argument("--models", default="mixtral-8x7b,qwen3-30b-a3b")
ap.add_argument("--no-ep", action="store_true", help="leave out the four-GPU table")
args = ap.parse_args()
pkvsim, out, backend = args.pkvsim, args.out, args.backend
cal = os.path.join(here, "..", "experiments", "calibration", args.calibration + ".json")
beta = json.load(open(cal))["served_model"]["beta_gbps"] * 1e9
step_key, pre_key = ("t_wall", "t_device") if backend == "cuda" else ("t_predicted", "t_predicted")
laws = [("uniform", {"law": "uniform"}), ("zipf 1.2", {"law": "zipf", "exponent": 1.2})]
lines = [f"# pkvsim moe bench, {backend} backend, calibration {args.calibration}.json "
         f"(beta {beta / 1e9:.0f} GB/s)",
         "| model | routing | B | experts active / layer (of) | busiest expert (tokens) | "
         "TPOT p50 ms | output tok/s | roofline ms (read) | step / roofline | prefill 8K ms |",
         "|" + "---|" * 10]


def run(tmp, name, model, law, b, prompt, decode, n, **more):
    exp = {"name": name, "model": dict({"preset": model, "expert_routing": law}, **more),
           "workload": {"arrival": {"process": "closed", "concurrency": b},
                        "prompt": {"dist": "fixed", "value": prompt},
                        "decode": {"dist": "fixed", "value": decode}, "num_requests": n},
           "route": {"calibration": cal}, "run": {"backend": backend, "record": "full"}}
    path = os.path.join(tmp, name + ".json")
    json.dump(exp, open(path, "w"))
    h5 = os.path.join(tmp, name + ".h5")
    subprocess.run([pkvsim, "run", "-q", "-o", h5, path], check=True)
    return h5


with tempfile.TemporaryDirectory() as tmp:
    for model in args.models.split(","):
        preset = json.load(open(os.path.join(here, "..", "experiments", "models", model + ".json")))
        h, w, E = preset["hidden"], preset["expert_intermediate"], preset["experts"]
        expert_bytes = 2.0 * 3 * h * w
        for lname, law in laws:
            h5 = run(tmp, "pre", model, law, 1, 8192, 1, 1)
            with h5py.File(h5) as f:
                pre_ms = 1e3 * f["prefills"][pre_key][0]
            for b in (1, 8, 64):
                h5 = run(tmp, f"b{b}", model, law, b, 1024, 256, 2 * b)
                with h5py.File(h5) as f:
                    cfg = json.loads(f["config/resolved"][()])
                    fig = cfg["model"]["figures"]
                    s = f["steps"]
                    keep = s["rows"][:] == b
                    step = s[step_key][:][keep]
                    act = s["experts_active"][:][keep]
                    most = s["expert_tokens_max"][:][keep]
                    ctx = s["context_tokens"][:][keep]
                    moe_layers = preset["layers"] - preset.get("dense_layers", 0)
                    embed = 2.0 * preset["vocab"] * h
                    # what a step reads: every weight but the experts and the embedding
                    # table (a gather), the chosen experts, the KV
                    other = fig["weight_bytes"] - embed - moe_layers * E * expert_bytes
                    read = other + moe_layers * act * expert_bytes + ctx * fig["kv_bytes_per_token"]
                    roof = read / beta
                    lines.append(
                        f"| {model} | {lname} | {b} | {act.mean():.1f} ({E}) | {most.mean():.1f} | "
                        f"{1e3 * np.median(step):.2f} | {b / np.median(step):.0f} | "
                        f"{1e3 * roof.mean():.2f} | {np.mean(step / roof):.2f} | {pre_ms:.1f} |")
    # four GPUs: every expert sliced four ways, or whole experts spread (expert parallel)
    laws = [] if args.no_ep else laws
    lines += [] if args.no_ep else ["", "# qwen3-30b-a3b over 4 GPUs (modelled), B = 64: sliced experts against "
              "expert parallel", "| routing | sliced TPOT p50 ms | expert parallel TPOT p50 ms "
              "| ratio |", "|---|---|---|---|"]
    for lname, law in laws:
        t = []
        for ep in (False, True):
            h5 = run(tmp, "ep", "qwen3-30b-a3b", law, 64, 1024, 256, 128, tensor_parallel=4,
                     expert_parallel=ep)
            with h5py.File(h5) as f:
                s = f["steps"]
                t.append(np.median(s["t_predicted"][:][s["rows"][:] == 64]))
        lines.append(f"| {lname} | {1e3 * t[0]:.2f} | {1e3 * t[1]:.2f} | {t[1] / t[0]:.2f} |")
text = "\n".join(lines) + "\n"
print(text, end="")
os.makedirs(os.path.dirname(out), exist_ok=True)
open(out, "w").write(text)
