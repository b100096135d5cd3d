#!/usr/bin/env python3
"""A run's /steps and /requests read into pandas DataFrames through analysis/pkvh5.py,
with route names as strings, column by column equal to h5py's own read; every
dataset's type has no hidden bytes. Usage: read_frame.py PKVSIM SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile

src = sys.argv[2]
sys.path.insert(0, os.path.join(src, "analysis"))
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import pkvh5  # noqa: E402

fails = 0


def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL", what)


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "run.h5")
    subprocess.run([sys.argv[1], "run", "-q", os.path.join(src, "experiments", "quickstart.json"),
                    "-o", out], check=True)
    df = pkvh5.frame(out, "steps")
    f = h5py.File(out, "r")
    check(len(df) == f["steps/index"].shape[0] and len(df) > 100, f"{len(df)} steps")
    names = {"ref_paged", "pkv_bucket", "pkv_workqueue", "pkv_fused", "flashinfer",
             "flashinfer_tc"}
    check(set(map(str, df["route"].unique())) <= names and df["route"].dtype == "category",
          f"route names: {df['route'].unique()}")
    codes = f["steps/route"][:]
    back = {v: k for k, v in h5py.check_enum_dtype(f["steps/route"].dtype).items()}
    check(all(back[c] == str(r) for c, r in zip(codes[:1000], df["route"][:1000])),
          "route names do not match the codes")
    check(np.array_equal(df["t_sim"].to_numpy(), f["steps/t_sim"][:]), "t_sim differs")
    req = pkvh5.frame(out, "requests")
    check(len(req) == int(f["summary"].attrs["arrived"]), "one row per request")
    check(set(map(str, req["state"].unique())) <= {"waiting", "prefill", "running", "finished", "refused"},
          "state names")

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.dtype.fields:
            check(sum(obj.dtype.fields[k][0].itemsize for k in obj.dtype.fields)
                  == obj.dtype.itemsize, f"{name}: hidden bytes in its type")
    f.visititems(visit)
print(f"{'0' if fails == 0 else fails} failed")
sys.exit(1 if fails else 0)
