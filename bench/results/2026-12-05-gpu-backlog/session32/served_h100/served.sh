#!/usr/bin/env bash
# The served model (llama-3.1-8b) in FP16, BF16 and either over FP8 KV on the cuda backend:
# bench/model's l8b_b1_1k, l8b_b8_32k, l8b_b64_4k in each type (.gpu/served/*.json).
w=$1
for f in .gpu/served/*.json; do
  n=$(basename "$f" .json)
  t0=$SECONDS
  timeout 120 .bundle/run pkvsim run "$f" -b cuda -q -o "$w/$n.h5" --json "$w/$n.json" > "$w/$n.log" 2>&1
  echo "$n: rc $?, $((SECONDS - t0)) s"
done
