#!/usr/bin/env python3
"""The model backend against the cuda backend on the same experiments: each cuda run's
experiment (with --json-dir DIR: DIR/RUN.json, or DIR/BASE.json for RUN = BASE_VARIANT;
without: RUN.json beside RUN.h5) is run again on the model backend with CALIBRATION,
and the two files are compared: per decode step, the whole step's predicted device
time (attention and dense part together) against the measured one, MAPE and summed
error, where both runs made the same steps (rows and contexts step by step; an
open-loop run on another clock makes others); the prefill batches' summed error; TTFT
and TPOT p50 (the cuda run's on its wall clock, the model's on its predicted clock);
and, over the matched steps, the summed error of the step's two parts apart (attention
of every layer, the dense part), to say which part an error comes from.
Usage: model_accuracy.py PKVSIM CALIBRATION OUT.md RUN.h5... [--json-dir DIR]
Prints the table and writes it to OUT.md; every figure is from these files."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

args = sys.argv[1:]
json_dir = None
if "--json-dir" in args:
    i = args.index("--json-dir")
    json_dir = args[i + 1]
    del args[i:i + 2]
pkvsim, cal, out_md, runs = args[0], args[1], args[2], args[3:]


def latencies(f):
    q = f["requests"]
    fin = q["state"][:] == 3
    ttft = (q["t_first_token"][:] - q["t_arrival"][:])[fin]
    gen = q["generated"][:][fin]
    e2e = (q["t_finish"][:] - q["t_arrival"][:])[fin]
    tpot = ((e2e - ttft) / np.maximum(gen - 1, 1))[gen > 1]
    return (np.median(ttft) if len(ttft) else np.nan, np.median(tpot) if len(tpot) else np.nan)


rows = []
all_err = []
tmp = tempfile.mkdtemp()
for run in runs:
    name = os.path.splitext(os.path.basename(run))[0]
    exp = os.path.join(json_dir, name + ".json") if json_dir else os.path.splitext(run)[0] + ".json"
    with h5py.File(run) as f:
        if not os.path.exists(exp) and json_dir:  # RUN_VARIANT.h5 of DIR/RUN.json
            exp = os.path.join(json_dir, name.rsplit("_", 1)[0] + ".json")
        if not os.path.exists(exp):
            sys.exit(f"model_accuracy.py: {run}: no experiment file (looked for {exp})")
        s = f["steps"]
        att, dense = s["t_device"][:], s["t_dense"][:]
        meas = att + dense
        key = np.stack([s["rows"][:], s["context_tokens"][:]], 1)
        p = f["prefills"]
        pre = p["t_device"][:]
        lat = latencies(f)
    mod = os.path.join(tmp, name + "_model.h5")
    subprocess.run([pkvsim, "run", exp, "--backend", "model", "-q", "-c", cal, "-o", mod],
                   check=True)
    with h5py.File(mod) as g:
        t = g["steps"]
        pred, pdense = t["t_predicted"][:], t["t_dense_predicted"][:]
        same = len(pred) == len(meas) and np.array_equal(
            key, np.stack([t["rows"][:], t["context_tokens"][:]], 1))
        ppred = g["prefills"]["t_predicted"][:]
        mlat = latencies(g)
    k = slice(2, None)  # the first steps warm the caches and the route
    if same and len(meas) > 2:
        e = pred[k] / meas[k] - 1
        all_err.append(e)
        step_mape, step_sum = 100 * np.mean(np.abs(e)), 100 * (pred[k].sum() / meas[k].sum() - 1)
        att_sum = 100 * ((pred[k] - pdense[k]).sum() / att[k].sum() - 1)
        dense_sum = 100 * (pdense[k].sum() / dense[k].sum() - 1)
    else:
        step_mape = step_sum = att_sum = dense_sum = np.nan
    pre_sum = 100 * (ppred.sum() / pre.sum() - 1) if len(pre) == len(ppred) and len(pre) else np.nan
    rows.append((name, len(meas), "yes" if same else "no", step_mape, step_sum, att_sum,
                 dense_sum, len(pre), pre_sum,
                 1e3 * lat[0], 1e3 * mlat[0], 100 * (mlat[0] / lat[0] - 1),
                 1e3 * lat[1], 1e3 * mlat[1], 100 * (mlat[1] / lat[1] - 1)))

lines = ["| run | steps | same steps | step MAPE | step sum err | attention sum err | "
         "dense sum err | prefills | prefill sum err | TTFT p50 ms cuda | model | err | "
         "TPOT p50 ms cuda | model | err |",
         "|" + "---|" * 15]
for r in rows:
    lines.append("| %s | %d | %s | %.1f%% | %+.1f%% | %+.1f%% | %+.1f%% | %d | %+.1f%% | %.2f | "
                 "%.2f | %+.1f%% | %.3f | %.3f | %+.1f%% |" % r)
if all_err:
    e = np.concatenate(all_err)
    lines.append("")
    lines.append("all matched steps: %d, MAPE %.2f%%, p90 |err| %.2f%%, max |err| %.2f%%" %
                 (len(e), 100 * np.mean(np.abs(e)), 100 * np.percentile(np.abs(e), 90),
                  100 * np.max(np.abs(e))))
shutil.rmtree(tmp)
text = "\n".join(lines)
print(text)
open(out_md, "w").write(text + "\n")
