#!/bin/bash
# From the repository root: bench/results/2026-12-04-sched-rerun/run.sh [OUT]; then
# python3 bench/results/2026-12-04-sched-rerun/table.py OUT.
# The scheduler section's model-backend tables again, on the calibration a served model
# now takes (h200.json's served_model section).
OUT=${1:-/tmp/sr}
mkdir -p "$OUT"
for n in chunked_prefill prefix_caching_shared prefix_caching_mooncake prefix_caching_multiturn swap_pressure slo_classes; do
  rm -f "$OUT/$n.h5" # a sweep resumes an existing file
  /usr/bin/time -f "$n %e s" build/pkvsim run -q experiments/scheduler/$n.json --backend model -o "$OUT/$n.h5"
done
