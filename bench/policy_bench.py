#!/usr/bin/env python3
"""The route policy's table (issue 11) from runs named EXPERIMENT__POLICY.h5.

Per experiment and policy: steps, mean rows, the decode tokens per second of wall
time (decode tokens over the summed step wall time: for a closed loop the
throughput, for an open loop the work the steps took), the summed step wall and
device times, and the routes taken. Then, per experiment, adaptive (each
calibration it ran with) against the best fixed route, the faster FlashInfer path
and the oracle, on that figure: above 1 means adaptive is faster.

usage: policy_bench.py RUN.h5...
"""
import collections
import os
import sys

import h5py
import numpy as np

FIXED = ["ref_paged", "pkv_bucket", "pkv_workqueue", "pkv_fused", "flashinfer", "flashinfer_tc"]


def load(path):
    with h5py.File(path, "r") as f:
        s = f["steps"]
        keep = s["warmup"][:] == 0
        rows = s["rows"][:][keep].astype(np.float64)
        # A run that measures nothing (the model backend): its predicted times.
        wall = s["t_wall" if "t_wall" in s else "t_predicted"][:][keep]
        dev = s["t_device"][:][keep] if "t_device" in s else np.full(len(rows), np.nan)
        route = s["route"][:][keep]
        names = dict((v, k) for k, v in h5py.check_enum_dtype(s["route"].dtype).items())
        noise = s["t_noise"][:][keep] if "t_noise" in s else np.array([np.nan])
    counts = collections.Counter(names[int(r)] for r in route)
    return {
        "steps": len(rows),
        "rows": rows.mean() if len(rows) else 0,
        "tok_s": rows.sum() / wall.sum() if wall.sum() > 0 else float("nan"),
        "wall": wall.sum(),
        "dev": dev.sum(),
        "routes": ", ".join(f"{k} {v}" for k, v in counts.most_common()),
        "noise": np.nanmedian(noise) if np.isfinite(noise).any() else float("nan"),
    }


def main(paths):
    runs = collections.defaultdict(dict)
    for p in paths:
        name = os.path.basename(p)[:-3]
        if "__" not in name:
            continue
        exp, label = name.split("__", 1)
        try:
            runs[exp][label] = load(p)
        except (OSError, KeyError) as e:
            print(f"<!-- {p}: {e} -->")
    summary = []
    for exp in sorted(runs):
        r = runs[exp]
        print(f"\n### {exp}\n")
        print("| policy | steps | mean rows | decode tok/s (wall) | step wall s | device s | oracle "
              "noise | routes |\n|---|---|---|---|---|---|---|---|")
        for label in sorted(r, key=lambda k: (k not in FIXED, k)):
            x = r[label]
            print(f"| {label} | {x['steps']} | {x['rows']:.2f} | {x['tok_s']:.1f} | {x['wall']:.4f} "
                  f"| {x['dev']:.4f} | {x['noise']:.3f} | {x['routes']} |")
        fixed = {k: v for k, v in r.items() if k in FIXED and k != "pkv_fused"}
        if not fixed:
            continue
        best = max(fixed, key=lambda k: fixed[k]["tok_s"])
        fi = [k for k in ("flashinfer", "flashinfer_tc") if k in fixed]
        fi_best = max(fi, key=lambda k: fixed[k]["tok_s"]) if fi else None
        for label in sorted(k for k in r if k.startswith("adaptive")):
            a = r[label]["tok_s"]
            row = [exp, label, best, a / fixed[best]["tok_s"]]
            row.append(a / fixed[fi_best]["tok_s"] if fi_best else float("nan"))
            row.append(a / r["oracle"]["tok_s"] if "oracle" in r else float("nan"))
            row.append(max(v["tok_s"] for v in fixed.values()) / r["oracle"]["tok_s"]
                       if "oracle" in r else float("nan"))
            summary.append(row)
    print("\n### adaptive against the best fixed route, the faster FlashInfer path and the "
          "oracle (decode tokens per second of step wall time)\n")
    print("| experiment | policy | best fixed | vs best fixed | vs faster FlashInfer | vs oracle "
          "| best fixed vs oracle |\n|---|---|---|---|---|---|---|")
    for row in summary:
        print(f"| {row[0]} | {row[1]} | {row[2]} | {row[3]:.3f}x | {row[4]:.3f}x | {row[5]:.3f}x "
              f"| {row[6]:.3f}x |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
