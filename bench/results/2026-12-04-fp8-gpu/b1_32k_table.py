#!/usr/bin/env python3
"""Median per-step times (us) of b1_32k.json's points, point 0 FP16 KV and point 1 FP8:
predicted, device (attention) and wall, over the decode steps.
Usage: b1_32k_table.py OUT.h5 [OUT2.h5 ...]"""
import sys

import h5py
import numpy as np

for path in sys.argv[1:]:
    f = h5py.File(path, "r")
    for k in sorted(f["points"]):
        st = f["points"][k]["steps"]
        decode = st["prefill_chunks"][:] == 0
        meds = {c: float(np.nanmedian(st[c][:][decode])) * 1e6
                for c in ("t_predicted", "t_device", "t_wall") if c in st}
        print(f"{path} point {k} ({['fp16', 'fp8_e4m3'][int(k)]}): {int(decode.sum())} steps, "
              + ", ".join(f"{c} {v:.1f}" for c, v in meds.items()))
