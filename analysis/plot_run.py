#!/usr/bin/env python3
"""Plot one pkvsim run: step times, the route each step took, active rows, and the
TTFT / TPOT distributions, into one PNG.

usage: plot_run.py RUN.h5 [-o OUT.png]

Needs h5py and matplotlib (Debian: python3-h5py python3-matplotlib). Reads only the
datasets pkvsim writes (README.md, "Reading the output"); changes nothing.
"""
import argparse
import sys

import os

import h5py
import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pkvh5  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a pkvsim output file")
    ap.add_argument("-o", "--output", help="PNG to write (default: RUN.png)")
    a = ap.parse_args()
    out = a.output or a.run.rsplit(".", 1)[0] + ".png"
    try:
        f = h5py.File(a.run, "r")
        steps, req = pkvh5.table(f, "steps"), pkvh5.table(f, "requests")
        summ = dict(f["summary"].attrs)
        prov = dict(f["provenance"].attrs)
    except (OSError, KeyError) as e:
        sys.exit(f"plot_run.py: {a.run}: not a complete pkvsim output ({e})")
    if len(steps["index"]) == 0:
        sys.exit(f"plot_run.py: {a.run}: the run has no decode steps")
    route_of = pkvh5.enum_names(f, "steps", "route")

    fig, ax = plt.subplots(2, 2, figsize=(13, 8))
    t = steps["t_sim"]
    a0 = ax[0, 0]
    a0.plot(t, steps["t_predicted"] * 1e6, ".", ms=1.5, label="predicted")
    for col, lab in (("t_device", "device"), ("t_wall", "wall")):
        if col in steps and np.isfinite(steps[col]).any():
            a0.plot(t, steps[col] * 1e6, ".", ms=1.5, label=lab)
    a0.set(xlabel="simulated time (s)", ylabel="step time (µs)", yscale="log",
           title="decode step time")
    a0.legend(markerscale=6)

    a1 = ax[0, 1]
    for code in sorted(set(steps["route"].tolist())):
        m = steps["route"] == code
        a1.plot(t[m], steps["context_tokens"][m], ".", ms=1.5, label=route_of.get(code, code))
    a1.set(xlabel="simulated time (s)", ylabel="context tokens in the step",
           title="route taken per step")
    a1.legend(markerscale=6)

    a2 = ax[1, 0]
    a2.plot(t, steps["rows"], lw=0.7)
    a2.set(xlabel="simulated time (s)", ylabel="active rows", title="batch size")

    a3 = ax[1, 1]
    done = req["state"] == 3
    for vals, lab in ((req["t_first_token"] - req["t_arrival"], "TTFT"),
                      ((req["t_finish"] - req["t_first_token"])[done] /
                       np.maximum(req["decode_len"][done] - 1, 1), "TPOT")):
        v = np.sort(vals[np.isfinite(vals)])
        if len(v):
            a3.plot(v * 1e3, np.arange(1, len(v) + 1) / len(v), label=lab)
    a3.set(xlabel="ms", ylabel="share of requests", xscale="log", title="latency CDF")
    a3.legend()

    fig.suptitle(f"{a.run}: {prov.get('backend', '?')} backend, "
                 f"{summ.get('decode_tok_s', float('nan')):.0f} decode tok/s, "
                 f"{int(summ.get('finished', 0))}/{int(summ.get('arrived', 0))} finished"
                 + (" (interrupted)" if summ.get("interrupted") else ""))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
