#!/usr/bin/env python3
"""Prefill batches of runs of one experiment side by side: for each batch of the first
file whose prompt tokens are below --below (default 2000), its device time in each
file (matched by index and token count; '-' where another file batched differently),
and per file, over the batches every file has alike, their summed time and how many
took more than 1.3x the fastest file's (a first forward at a width not yet run).
Usage: prefill_widths.py OUT.md LABEL=RUN.h5... [--below N]
Prints the table and writes it to OUT.md."""
import sys

import h5py
import numpy as np

args = sys.argv[1:]
below = 2000
if "--below" in args:
    i = args.index("--below")
    below = int(args[i + 1])
    del args[i:i + 2]
if len(args) < 2:
    sys.exit(__doc__)
out, runs = args[0], [a.split("=", 1) for a in args[1:]]
data = []
for label, path in runs:
    with h5py.File(path) as f:
        p = f["prefills"]
        data.append((label, p["tokens"][:].astype(int), p["requests"][:].astype(int),
                     p["t_device"][:] * 1e3))
lines = ["| batch | tokens | requests | " + " | ".join(f"{d[0]} ms" for d in data) + " |",
         "|---|---|---|" + "---|" * len(data)]
t0, r0 = data[0][1], data[0][2]
for i in np.nonzero(t0 < below)[0]:
    cells = []
    for _, t, _, d in data:
        cells.append(f"{d[i]:.1f}" if i < len(t) and t[i] == t0[i] else "-")
    lines.append(f"| {i} | {t0[i]} | {r0[i]} | " + " | ".join(cells) + " |")
lines.append("")
same = [i for i in np.nonzero(t0 < below)[0]
        if all(i < len(t) and t[i] == t0[i] for _, t, _, _ in data)]
best = np.min([[d[i] for i in same] for _, _, _, d in data], axis=0)
for label, _, _, d in data:
    x = np.array([d[i] for i in same])
    lines.append(f"- {label}: the {len(same)} batches below {below} tokens every file has alike "
                 f"{x.sum():.1f} ms in all ({x.sum() / best.sum():.3f}x the fastest file's per "
                 f"batch); {(x > 1.3 * best).sum()} over 1.3x the fastest")
text = "\n".join(lines) + "\n"
print(text, end="")
open(out, "w").write(text)
