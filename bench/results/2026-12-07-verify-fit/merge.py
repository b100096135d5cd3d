#!/usr/bin/env python3
"""Put what `pkvsim fit` wrote for verify steps (route_model_by_q, the "qN/G" gates) into a
shipped calibration's section, leaving everything else of it as it is (its route_model,
fit record and note: fitted to decode steps). Usage: merge.py FIT_OUT.json SHIPPED.json
SECTION NOTE; writes SHIPPED.json in place."""
import json
import sys

fit_out, shipped, section, note = sys.argv[1:5]
f = json.load(open(fit_out))[section]
whole = json.load(open(shipped))
dst = whole[section]
dst["route_model_by_q"] = f["route_model_by_q"]
for k, g in f.get("gates", {}).items():
    if k.startswith("q"):
        dst.setdefault("gates", {})[k] = g
dst["note"] = dst["note"].rstrip() + " " + note
open(shipped, "w").write(json.dumps(whole, indent=2, ensure_ascii=False) + "\n")
