#!/usr/bin/env python3
"""The served-model benchmark's table from one GPU session's files: the full model's
decode steps and prefills (pkvsim run on the cuda backend, bench/model/*.json) beside
the same session's ceilings and GEMMs alone (pkvsim bench model). Usage:
model_bench.py GEMMS.txt RUN.h5... > table; every figure is from these files."""
import json
import re
import sys

import h5py
import numpy as np

gemm_file, runs = sys.argv[1], sys.argv[2:]
text = open(gemm_file).read()
read_gbps = float(re.search(r"read ceiling (\d+) GB/s", text).group(1))
peak = float(re.search(r"GEMM ([\d.]+) TFLOP/s", text).group(1)) * 1e12
sus = re.search(r"sustained: 8192\^3 FP16 GEMM ([\d.]+) TFLOP/s", text)
sustained = float(sus.group(1)) * 1e12 if sus else float("nan")
gemm_table = text.split("# fit")[0]  # the GEMM table: the rows before its fit line
gemms = {int(r[0]): float(r[1]) * 1e-3
         for r in re.findall(r"^\s*(\d+)\s+([\d.]+)\s", gemm_table, re.M)}
print(f"# ceilings of the session: read {read_gbps:.0f} GB/s, 8192^3 GEMM {peak * 1e-12:.0f} TFLOP/s")
print("| run | B | context | step ms (device) | dense ms | GEMMs alone ms | dense / GEMMs | "
      "roofline ms | step / roofline | attention ms (all layers) | step / (GEMMs + attention) | "
      "host overhead us (p50) | of it the prologue on the GPU us (p50) | predicted MAPE | TTFT p50 ms | TPOT p50 ms |")
print("|" + "---|" * 16)
pre_rows = []
for path in runs:
    with h5py.File(path) as f:
        cfg = json.loads(f["config/resolved"][()])
        m, fig = cfg["model"], cfg["model"]["figures"]
        s, q = f["steps"], f["requests"]
        n = len(s["rows"])
        name = cfg["name"]
        embed = 2.0 * m["vocab"] / m["tensor_parallel"] * m["hidden"]
        if n > 4:
            k = slice(2, n)  # the first steps warm the caches and the route
            rows = s["rows"][k]
            dense, att, wall = s["t_dense"][k], s["t_device"][k], s["t_wall"][k]
            step = dense + att
            B = int(np.median(rows))
            ctx = s["context_tokens"][k]
            roof = (fig["weight_bytes"] - embed + ctx * fig["kv_bytes_per_token"]) / (read_gbps * 1e9)
            g = gemms.get(B, float("nan"))
            mape = np.mean(np.abs(s["t_predicted"][k] / step - 1)) * 100
            fin = q["state"][:] == 3
            ttft = (q["t_first_token"][:] - q["t_arrival"][:])[fin]
            gen = q["generated"][:][fin]
            e2e = (q["t_finish"][:] - q["t_arrival"][:])[fin]
            tpot = ((e2e - ttft) / np.maximum(gen - 1, 1))[gen > 1]
            print(f"| {name} | {B} | {int(np.median(ctx / rows))} | {1e3 * step.mean():.3f} | "
                  f"{1e3 * dense.mean():.3f} | {1e3 * g:.3f} | {dense.mean() / g:.3f} | "
                  f"{1e3 * roof.mean():.3f} | {np.mean(step / roof):.3f} | {1e3 * att.mean():.3f} | "
                  f"{step.mean() / (g + att.mean()):.3f} | {1e6 * np.median(wall - step):.0f} | "
                  f"{1e6 * np.nanmedian(s['t_meta'][k]) if np.isfinite(s['t_meta'][k]).any() else float('nan'):.1f} | "
                  f"{mape:.1f}% | {1e3 * np.median(ttft):.1f} | "
                  f"{1e3 * np.median(tpot) if len(tpot) else float('nan'):.2f} |")
        p = f["prefills"]
        for i in range(len(p["tokens"])):
            pre_rows.append((name, int(p["requests"][i]), int(p["tokens"][i]),
                             float(p["t_device"][i]), float(p["t_predicted"][i]),
                             fig["dense_flops_per_token"], m))
print()
print("| run | prompts | tokens | device ms | predicted ms | TFLOP/s (causal attention included) | of 8192^3 GEMM | of it sustained |")
print("|---|---|---|---|---|---|---|---|")
last = {}
for r in pre_rows:  # one row per batch shape: the last (the first warms up)
    last[r[:3]] = r
for name, nreq, tok, t, tp, fpt, m in last.values():
    hq, d, L = m["hq"] / m["tensor_parallel"], m["head_dim"], m["layers"]
    per = tok / nreq  # the benchmark's batches hold prompts of one length
    flops = fpt * tok + L * nreq * 4 * hq * d * per * (per + 1) / 2
    print(f"| {name} | {nreq} | {tok} | {1e3 * t:.2f} | {1e3 * tp:.2f} | {flops / t * 1e-12:.0f} | "
          f"{100 * flops / t / peak:.0f}% | {100 * flops / t / sustained:.0f}% |")
