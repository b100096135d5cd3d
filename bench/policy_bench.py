#!/usr/bin/env python3
"""The route policy's table (issue 11) from runs named EXPERIMENT__POLICY.h5.

Per experiment and policy: steps, mean rows, the decode tokens per second of wall
time (decode tokens over the summed step wall time: for a closed loop the
throughput, for an open loop the work the steps took), the summed step wall and
device times (attention, and a full model's dense part or the MLP tail), the host's time per step (wall less device; of it /steps t_plan and
t_choose: planning the candidates, staging and choosing), and the routes taken. Then, per experiment, adaptive (each
calibration it ran with) against the best fixed route, the faster FlashInfer path
and the oracle, on that figure: above 1 means adaptive is faster.

Repeats of one policy on one experiment are named EXPERIMENT__POLICY~N.h5 (N = 2, 3,
...): they are pooled (their decode tokens over their summed wall time), and the
spread of their figures, (max - min) / mean, is printed beside them; the device-time
figure is given alongside, since host time moves between runs more than the GPU's.

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
        for part in ("t_dense", "t_mlp"):  # a full model's dense part, the MLP tail
            if part in s:
                dev = dev + np.nan_to_num(s[part][:][keep])
        route = s["route"][:][keep]
        names = dict((v, k) for k, v in h5py.check_enum_dtype(s["route"].dtype).items())
        noise = s["t_noise"][:][keep] if "t_noise" in s else np.array([np.nan])
        # The host's parts of a step (us): all of it (wall less device), and of it the
        # planning of the candidates and the staging with the choice.
        host = [1e6 * (wall - dev)] + [1e6 * s[c][:][keep] if c in s else np.array([np.nan])
                                        for c in ("t_plan", "t_choose")]
    counts = collections.Counter(names[int(r)] for r in route)
    return {
        "steps": len(rows),
        "rows": rows.mean() if len(rows) else 0,
        "tok_s": rows.sum() / wall.sum() if wall.sum() > 0 else float("nan"),
        "wall": wall.sum(),
        "dev": dev.sum(),
        "routes": ", ".join(f"{k} {v}" for k, v in counts.most_common()),
        "noise": np.nanmedian(noise) if np.isfinite(noise).any() else float("nan"),
        "host": [np.nanmean(h) if np.isfinite(h).any() else float("nan") for h in host],
    }


def pool(reps):
    """Repeats of one policy: pooled figures and the spread of their throughputs."""
    if len(reps) == 1:
        return dict(reps[0], reps=1, spread=float("nan"))
    x = dict(reps[0])
    for k in ("steps", "wall", "dev"):
        x[k] = sum(r[k] for r in reps)
    tok = sum(r["tok_s"] * r["wall"] for r in reps)  # decode tokens
    x["tok_s"] = tok / x["wall"]
    x["rows"] = np.mean([r["rows"] for r in reps])
    x["host"] = [sum(r["host"][i] * r["steps"] for r in reps) / x["steps"] for i in range(3)]
    t = [r["tok_s"] for r in reps]
    x["reps"] = len(reps)
    x["spread"] = (max(t) - min(t)) / np.mean(t)
    return x


def main(paths):
    reps = collections.defaultdict(lambda: collections.defaultdict(list))
    for p in paths:
        name = os.path.basename(p)[:-3]
        if "__" not in name:
            continue
        exp, label = name.split("__", 1)
        label = label.split("~", 1)[0]
        try:
            reps[exp][label].append(load(p))
        except (OSError, KeyError) as e:
            print(f"<!-- {p}: {e} -->")
    runs = {exp: {k: pool(v) for k, v in r.items()} for exp, r in reps.items()}
    summary = []
    for exp in sorted(runs):
        r = runs[exp]
        print(f"\n### {exp}\n")
        print("| policy | runs | spread | steps | mean rows | decode tok/s (wall) | step wall s "
              "| device s | host us/step | of it planning / choice us | oracle noise | routes |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|")
        for label in sorted(r, key=lambda k: (k not in FIXED, k)):
            x = r[label]
            print(f"| {label} | {x['reps']} | {x['spread']:.3f} | {x['steps']} | {x['rows']:.2f} "
                  f"| {x['tok_s']:.1f} | {x['wall']:.4f} | {x['dev']:.4f} | {x['host'][0]:.1f} "
                  f"| {x['host'][1]:.2f} / {x['host'][2]:.2f} | {x['noise']:.3f} "
                  f"| {x['routes']} |")
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
            # Device time: the best fixed route's summed device time over adaptive's.
            row.append(min(v["dev"] for v in fixed.values()) / r[label]["dev"])
            row.append(np.nanmax([r[label]["spread"], fixed[best]["spread"]]))
            summary.append(row)
    print("\n### adaptive against the best fixed route, the faster FlashInfer path and the "
          "oracle (decode tokens per second of step wall time)\n")
    print("| experiment | policy | best fixed | vs best fixed | vs faster FlashInfer | vs oracle "
          "| best fixed vs oracle | vs best fixed, device time | spread of repeats |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for row in summary:
        print(f"| {row[0]} | {row[1]} | {row[2]} | {row[3]:.3f}x | {row[4]:.3f}x | {row[5]:.3f}x "
              f"| {row[6]:.3f}x | {row[7]:.3f}x | {row[8]:.3f} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
