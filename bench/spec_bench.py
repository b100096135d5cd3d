#!/usr/bin/env python3
"""Speculative decoding on the model backend (issue 47's benchmark): Llama-3.1-8B with the
Llama-3.2-1B draft (k 3) and with EAGLE (k 4) at acceptance 0.6 and 0.8, against plain
decoding, at 1 to 64 requests in flight (closed loop, 1K prompts, 256 tokens out, the
H200's calibration): TPOT p50, output tokens/s and the speed-up, and where speculation
stops paying. Beside it, the published check: vLLM V1 at batch 1 on MT-bench (vLLM issue
20780, 2025-07-10, its GPU not stated: TPOT 7.07 ms plain, 4.05 ms with EAGLE-3 at k 4,
acceptance length 3.08, i.e. acceptance about 0.75) against pkvsim on the derived H100
preset (an assumption).
Usage: spec_bench.py PKVSIM [OUT.txt]; prints the table and writes it to OUT (default
bench/results/spec.txt)."""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
pkvsim = sys.argv[1]
out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "results", "spec.txt")


def run(tmp, conc, spec, gpu="h200", prompt=1024, decode=256):
    exp = {"name": "spec", "model": "llama-3.1-8b",
           "workload": {"arrival": {"process": "closed", "concurrency": conc},
                        "prompt": {"dist": "fixed", "value": prompt},
                        "decode": {"dist": "fixed", "value": decode},
                        "num_requests": max(8, 4 * conc)},
           "serving": {"max_active": max(conc, 1), "speculative": spec},
           "route": {"gpu": gpu}, "run": {"backend": "model", "record": "summary"}}
    path = os.path.join(tmp, "spec.json")
    json.dump(exp, open(path, "w"))
    h5 = os.path.join(tmp, "spec.h5")
    subprocess.run([pkvsim, "run", "-q", "-o", h5, path], check=True)
    with h5py.File(h5) as f:
        s = f["summary"].attrs
        return float(s["median_tpot"]), float(s["output_throughput"])


cases = [("draft 1B, k 3", {"method": "draft", "tokens": 3}),
         ("eagle, k 4", {"method": "eagle", "tokens": 4})]
lines = ["# pkvsim spec bench: llama-3.1-8b, model backend, h200 calibration, closed loop, "
         "1024 in / 256 out",
         "| proposer | acceptance | in flight | TPOT p50 ms (plain) | TPOT p50 ms | "
         "output tok/s (plain) | output tok/s | speed-up |", "|" + "---|" * 8]
with tempfile.TemporaryDirectory() as tmp:
    plain = {c: run(tmp, c, {"method": "none"}) for c in (1, 2, 4, 8, 16, 32, 64)}
    for name, sp in cases:
        for acc in (0.6, 0.8):
            for c, (tp, th) in plain.items():
                t, h = run(tmp, c, dict(sp, acceptance=acc))
                lines.append(f"| {name} | {acc} | {c} | {1e3 * tp:.2f} | {1e3 * t:.2f} | "
                             f"{th:.0f} | {h:.0f} | {h / th:.2f}x |")
    # the published check (its prompts: MT-bench's, about 100 tokens; its outputs 256)
    p = run(tmp, 1, {"method": "none"}, "h100-sxm", 100, 256)
    e = run(tmp, 1, {"method": "eagle", "tokens": 4, "acceptance": 0.75}, "h100-sxm", 100, 256)
    lines += ["", "# against vLLM V1 at batch 1 (issue 20780; its GPU not stated, pkvsim on h100-sxm)",
              "| | published TPOT ms | pkvsim TPOT p50 ms | error |", "|---|---|---|---|",
              f"| plain | 7.07 | {1e3 * p[0]:.2f} | {100 * (p[0] * 1e3 / 7.07 - 1):+.1f}% |",
              f"| EAGLE-3, k 4, acceptance 0.75 | 4.05 | {1e3 * e[0]:.2f} | "
              f"{100 * (e[0] * 1e3 / 4.05 - 1):+.1f}% |",
              f"| speed-up | 1.75x | {p[0] / e[0]:.2f}x | |"]
text = "\n".join(lines) + "\n"
print(text, end="")
os.makedirs(os.path.dirname(out), exist_ok=True)
open(out, "w").write(text)
