#!/usr/bin/env python3
"""pkvsim fit over measured runs (the cpu backend measures its steps) against a shipped
calibration with a section per kind of run: runs of speculative decoding's verify steps
alone (EAGLE k 3: 4 query tokens a row) write route_model_by_q "4" (each route's decode
model with its CTA's constants, cta_gbps and cta_us, refitted, its others kept) and the "q4/G" gate, and
keep the base's decode gates and route models; decode runs fitted over that file keep
its verify models and gates. --verify-only writes the verify models and gates alone (the
section's other keys byte for byte the base's, its record fit_by_q) and refuses runs
without verify steps. Usage: fit_cli.py PKVSIM SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

pkvsim, src = sys.argv[1], sys.argv[2]
base = os.path.abspath(os.path.join(src, "experiments", "calibration", "h200.json"))
tmp = tempfile.mkdtemp()
fails = []


def check(what, ok):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)


def run(route, k):
    """A small served model (G 4) on the cpu backend, record full: its file."""
    exp = {"name": f"fit_{route}_{k}",
           "model": {"layers": 1, "hidden": 256, "hq": 4, "hkv": 1, "head_dim": 128,
                     "intermediate": 512, "vocab": 256},
           "workload": {"arrival": {"process": "closed", "concurrency": 2},
                        "prompt": {"dist": "uniform", "min": 16, "max": 64},
                        "decode": {"dist": "fixed", "value": 24}, "num_requests": 6},
           "serving": {"max_active": 2, "kv_pages": 64},
           "route": {"policy": route, "calibration": base},
           "run": {"backend": "cpu", "record": "full", "seed": 3}}
    if k:
        exp["serving"]["speculative"] = {"method": "eagle", "tokens": k, "acceptance": 0.7}
    path, out = os.path.join(tmp, exp["name"] + ".json"), os.path.join(tmp, exp["name"] + ".h5")
    with open(path, "w") as f:
        json.dump(exp, f)
    r = subprocess.run([pkvsim, "run", "-q", "-o", out, path], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"FAIL: {exp['name']}: {r.stderr}")
    return out


def fit(files, against, out, *flags):
    r = subprocess.run([pkvsim, "fit", *files, "--base", against, "--section", "served_model",
                        "-o", out, *flags], capture_output=True, text=True)
    print(r.stdout[-600:], r.stderr[-400:])
    check(f"fit{''.join(' ' + f for f in flags)} over {len(files)} runs: exit 0", r.returncode == 0)
    return json.load(open(out))["served_model"] if r.returncode == 0 else {}


routes = ("ref_paged", "pkv_workqueue")
shipped = json.load(open(base))["served_model"]
verify_runs = [run(r, 3) for r in routes]
verify = fit(verify_runs, base, os.path.join(tmp, "verify.json"))
gates = verify.get("gates", {})
check("the base's decode gates kept (the runs hold verify steps alone)",
      {g: v for g, v in gates.items() if not g.startswith("q")} == shipped["gates"])
check("the q4/4 gate written, its margin in [1, 2]",
      "q4/4" in gates and 1 <= gates["q4/4"]["margin_small"] <= 2)
check("route_model kept", verify.get("route_model") == shipped["route_model"])
by_q = verify.get("route_model_by_q", {}).get("4", {})
check("route_model_by_q \"4\" holds both routes", sorted(by_q) == sorted(routes))
for r in routes:
    m, d = by_q.get(r, {}), shipped["route_model"][r]
    check(f"{r}: its verify model is its decode model with its CTA's constants refitted",
          m.get("cta_gbps", 0) > 0 and m.get("cta_gbps") != d["cta_gbps"] and
          all(m.get(c) == d[c] for c in ("launch_us", "fixed_us", "merge_gbps", "peak_gbps")))
check("the fit record names each route's verify model",
      all(f"{r}/q4" in verify.get("fit", {}).get("routes", {}) for r in routes))

decode_runs = [run(r, 0) for r in routes]
decode = fit(decode_runs, os.path.join(tmp, "verify.json"), os.path.join(tmp, "decode.json"))
check("a decode fit keeps the verify models", decode.get("route_model_by_q") ==
      verify.get("route_model_by_q"))
check("a decode fit keeps the q4/4 gate and writes the runs' decode gate",
      decode.get("gates", {}).get("q4/4") == gates.get("q4/4") and "4" in decode.get("gates", {}))

only = fit(verify_runs, base, os.path.join(tmp, "only.json"), "--verify-only")
check("--verify-only: the section's other keys are the base's",
      {k: v for k, v in only.items() if k not in ("route_model_by_q", "gates", "fit_by_q")} ==
      {k: v for k, v in shipped.items() if k not in ("route_model_by_q", "gates")})
check("--verify-only: the verify models and gates are the whole fit's, the decode gates the base's",
      only.get("route_model_by_q") == verify.get("route_model_by_q") and
      only.get("gates") == verify.get("gates"))
check("--verify-only: its record is fit_by_q",
      all(f"{r}/q4" in only.get("fit_by_q", {}).get("routes", {}) for r in routes))
for name in ("verify", "decode", "only"):  # each written file is a calibration a run reads
    exp = {"name": "reads", "model": "llama-3.1-8b",
           "workload": {"arrival": {"process": "closed", "concurrency": 2},
                        "prompt": {"dist": "fixed", "value": 512},
                        "decode": {"dist": "fixed", "value": 8}, "num_requests": 4},
           "serving": {"speculative": {"method": "eagle", "tokens": 3, "acceptance": 0.7}},
           "route": {"policy": "adaptive", "calibration": os.path.join(tmp, name + ".json")},
           "run": {"backend": "model"}}
    path = os.path.join(tmp, "reads.json")
    with open(path, "w") as f:
        json.dump(exp, f)
    r = subprocess.run([pkvsim, "run", "-q", "-o", os.path.join(tmp, "reads.h5"), path],
                       capture_output=True, text=True)
    check(f"{name}.json is a calibration a run reads: {r.stderr.strip()[-200:]}", r.returncode == 0)
r = subprocess.run([pkvsim, "fit", *decode_runs, "--base", base, "--section", "served_model",
                    "-o", os.path.join(tmp, "none.json"), "--verify-only"],
                   capture_output=True, text=True)
check("--verify-only over decode runs is refused, nothing written",
      r.returncode != 0 and "no verify steps" in r.stderr and
      not os.path.exists(os.path.join(tmp, "none.json")))

print(f"{len(fails)} failed")
sys.exit(1 if fails else 0)
