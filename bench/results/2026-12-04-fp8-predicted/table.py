"""The table of experiments/thresholds/fp8_kv.json's sweep: per KV type, batch and prompt,
each fixed route's TPOT p50 and the oracle's routes (model backend, predicted).
Usage: table.py FP8_KV.h5"""
import json
import sys

import h5py

h = h5py.File(sys.argv[1])
rows = {}
for p in h["points"]:
    g = h["points"][p]
    cfg = json.loads(g["config/resolved"][()])
    a = g["summary"].attrs
    key = (cfg["model"]["kv_dtype"], cfg["workload"]["arrival"]["concurrency"],
           cfg["workload"]["prompt"]["value"])
    steps = {k[6:]: int(a[k]) for k in a if k.startswith("steps_") and k != "steps_measured" and a[k] > 0}
    rows.setdefault(key, {})[cfg["route"]["policy"]] = (float(a["p50_tpot"]), steps)
print("| KV | B | prompt | TPOT p50, flashinfer_tc (us) | pkv_workqueue | pkv_bucket | FlashInfer over best PKV | oracle's route |")
print("|---|---|---|---|---|---|---|---|")
for key in sorted(rows):
    r = rows[key]
    fi, wq, bk = (r[x][0] for x in ("flashinfer_tc", "pkv_workqueue", "pkv_bucket"))
    print(f"| {key[0]} | {key[1]} | {key[2] // 1024}K | {fi * 1e6:.1f} | {wq * 1e6:.1f} | {bk * 1e6:.1f} | "
          f"{fi / min(wq, bk):.3f} | {', '.join(r['oracle'][1])} |")
