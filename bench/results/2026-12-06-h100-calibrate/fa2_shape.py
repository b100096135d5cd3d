#!/usr/bin/env python3
"""The decode attention pkvsim predicts at the shape of vLLM issue 9471's FA2 profile (H100,
Llama-3.1-8B, batch 64, 1,024 prompt + 1,024 output tokens): per layer, at 64 rows of
1,536 tokens on average, under each route policy, on the derived H100 preset.
Usage: fa2_shape.py PKVSIM  (runs fa2_shape.json beside this file once per policy)."""
import h5py, json, os, subprocess, sys, tempfile
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
base = json.load(open(os.path.join(here, "fa2_shape.json")))
print("| policy | attention per layer (us) | KV read per layer (GB) | GB/s |\n|---|---|---|---|")
for pol in ("adaptive", "pkv_workqueue", "flashinfer_tc", "ref_paged", "flashinfer"):
    with tempfile.TemporaryDirectory() as t:
        e = dict(base, route=dict(base["route"], policy=pol))
        json.dump(e, open(os.path.join(t, "e.json"), "w"))
        subprocess.run([sys.argv[1], "run", "-q", os.path.join(t, "e.json"), "-o",
                        os.path.join(t, "e.h5")], check=True, stdout=subprocess.DEVNULL)
        with h5py.File(os.path.join(t, "e.h5")) as f:
            g = f["steps"]
            rows, ctx = g["rows"][:], g["context_tokens"][:]
            att = (g["t_predicted"][:] - g["t_dense_predicted"][:]) / 32  # 32 layers
            sel = (rows == 64) & (np.abs(ctx / 64 - 1536) < 32)
            kv = float(np.median(g["kv_bytes"][:][sel]))
            a = float(np.median(att[sel]))
            print(f"| {pol} | {a * 1e6:.1f} | {kv / 1e9:.3f} | {kv / a / 1e9:.0f} |")
