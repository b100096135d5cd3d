#!/usr/bin/env python3
"""Speculative decoding's proposer run for real (issue 47): Llama-3.1-8B with the
Llama-3.2-1B draft (k 3) and with EAGLE's head (k 4), acceptance 0.7, against plain
decoding, at 1 to 64 requests in flight (closed loop, 1K prompts, 128 tokens out) on the
cuda backend (the draft's passes, the verify and the plain steps on real kernels) and on
the model backend (all predicted): the proposer's device time a step measured against the
cost model's for the same passes (and of it, the passes' attention, measured / predicted),
TPOT p50, output tokens/s and speculation's speed-up on
each backend. Needs a GPU for the cuda rows (`--backends model` runs the rest).
Usage: proposer_bench.py PKVSIM [--gpu h100-sxm] [--backends cuda,model] [--conc 1,4,16,64]
[--out OUT.txt] (default bench/results/proposer.txt); prints the table and writes it."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("pkvsim")
ap.add_argument("--gpu", default="h100-sxm", help="route.gpu: the calibration (default h100-sxm)")
ap.add_argument("--backends", default="cuda,model")
ap.add_argument("--conc", default="1,4,16,64", help="requests in flight, comma-separated")
ap.add_argument("--out", default=os.path.join(here, "results", "proposer.txt"))
a = ap.parse_args()
NOTE = re.compile(r"proposer \(.*\) run on the \w+ backend: ([0-9.]+) ms a step measured, "
                  r"([0-9.]+) ms predicted by the cost model \(its passes' attention "
                  r"([0-9.]+) / ([0-9.]+) ms")


def run(tmp, backend, conc, spec):
    exp = {"name": "proposer", "model": "llama-3.1-8b",
           "workload": {"arrival": {"process": "closed", "concurrency": conc},
                        "prompt": {"dist": "fixed", "value": 1024},
                        "decode": {"dist": "fixed", "value": 128},
                        "num_requests": max(4, 2 * conc)},
           "serving": {"max_active": conc, "speculative": spec},
           "route": {"gpu": a.gpu}, "run": {"backend": backend, "record": "summary", "seed": 1}}
    path = os.path.join(tmp, "p.json")
    json.dump(exp, open(path, "w"))
    js = os.path.join(tmp, "p.out.json")
    r = subprocess.run([a.pkvsim, "run", "-o", os.path.join(tmp, "p.h5"), "--json", js, path],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{backend} {conc} {spec}: {r.stderr.strip()}")
    j = json.load(open(js))
    m = NOTE.search(r.stderr)
    return (j["median_tpot_ms"], j["output_throughput"],
            tuple(float(g) for g in m.groups()) if m else None)


cases = [("draft 1B, k 3", {"method": "draft", "tokens": 3, "acceptance": 0.7}),
         ("EAGLE, k 4", {"method": "eagle", "tokens": 4, "acceptance": 0.7})]
backends = a.backends.split(",")
concs = [int(c) for c in a.conc.split(",")]
lines = [f"# pkvsim proposer bench: llama-3.1-8b, {a.gpu} calibration, closed loop, 1024 in / "
         f"128 out, acceptance 0.7; backends {', '.join(backends)}",
         "| proposer | in flight | " + " | ".join(
             (["proposer ms a step measured (cuda)", "predicted", "measured / predicted",
               "its attention ms measured / predicted"]
              if "cuda" in backends else []) +
             [f"TPOT p50 ms plain ({b})" for b in backends] +
             [f"TPOT p50 ms ({b})" for b in backends] +
             [f"speed-up ({b})" for b in backends]) + " |"]
lines.append("|" + "---|" * (lines[1].count("|") - 1))
with tempfile.TemporaryDirectory() as tmp:
    plain = {(b, c): run(tmp, b, c, {"method": "none"}) for b in backends for c in concs}
    for name, sp in cases:
        for c in concs:
            got = {b: run(tmp, b, c, sp) for b in backends}
            cells = [name, str(c)]
            if "cuda" in backends:
                note = got["cuda"][2]
                cells += ([f"{note[0]:.3f}", f"{note[1]:.3f}", f"{note[0] / note[1]:.2f}",
                           f"{note[2]:.3f} / {note[3]:.3f}"] if note else ["-"] * 4)
            cells += [f"{plain[b, c][0]:.2f}" for b in backends]
            cells += [f"{got[b][0]:.2f}" for b in backends]
            cells += [f"{got[b][1] / plain[b, c][1]:.2f}x" for b in backends]
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
text = "\n".join(lines) + "\n"
print(text, end="")
os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
open(a.out, "w").write(text)
