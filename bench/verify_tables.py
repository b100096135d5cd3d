#!/usr/bin/env python3
"""The verify step's kernel tables side by side (issue 47): reads the tables that
`pkvsim bench kernels --q-len N --kv-dtype T --out FILE` wrote and prints, per KV type and
case, the best PersistentKV route's time against FlashInfer's prefill path's (flashinfer, or
flashinfer_tc at q_len 1, the faster) at each q_len.
Usage: verify_tables.py FILE... [--out OUT.md]; prints the table (and writes it to OUT)."""
import argparse
import re

ap = argparse.ArgumentParser()
ap.add_argument("files", nargs="+")
ap.add_argument("--out")
args = ap.parse_args()

best = {}  # (kv, case) -> {q: (pkv us, route, fi us)}
qs, kvs, cases = set(), [], []
for f in args.files:
    head = open(f).readline()
    q = re.search(r"(\d+) query tokens a row", head)
    q = int(q.group(1)) if q else 1
    kv = re.search(r"KV (\w+)", head).group(1)
    qs.add(q)
    if kv not in kvs:
        kvs.append(kv)
    for line in open(f):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or not cells[3].replace(".", "").isdigit():
            continue
        case, route, t = cells[0], cells[1], float(cells[3])
        if case not in cases:
            cases.append(case)
        pkv, pr, fi = best.setdefault((kv, case), {}).get(q, (None, None, None))
        if route.startswith("pkv_") and (pkv is None or t < pkv):
            pkv, pr = t, route
        if route.startswith("flashinfer") and (fi is None or t < fi):
            fi = t
        best[(kv, case)][q] = (pkv, pr, fi)
qs = sorted(qs)
out = ["| KV | case | " + " | ".join(
    f"q={q}: best PKV us (route) / FlashInfer us, ratio" for q in qs) + " |",
       "|---|---|" + "---|" * len(qs)]
for kv in kvs:
    for case in cases:
        row = best.get((kv, case))
        if not row:
            continue
        cells = []
        for q in qs:
            pkv, pr, fi = row.get(q, (None, None, None))
            cells.append(f"{pkv:.1f} ({pr}) / {fi:.1f}, {fi / pkv:.2f}x" if pkv and fi else "-")
        out.append(f"| {kv} | {case} | " + " | ".join(cells) + " |")
text = "\n".join(out)
print(text)
if args.out:
    open(args.out, "w").write(text + "\n")
