#!/bin/bash
# From the repository root: bench/results/2026-12-04-one-calibration/run.sh; then table.py.
mkdir -p ${OUT:-/tmp/eq}
# The experiments that named the study layer's fit for a served model: old file vs route.gpu's served section.
R=bench/results/calibrations
for e in experiments/fleet/autoscale_diurnal.json experiments/fleet/colocated.json experiments/fleet/disaggregated.json experiments/fleet/routers_mooncake.json experiments/scheduler/chunked_prefill.json experiments/scheduler/prefix_caching_mooncake.json experiments/scheduler/prefix_caching_multiturn.json experiments/scheduler/prefix_caching_shared.json experiments/scheduler/slo_classes.json experiments/scheduler/swap_pressure.json experiments/thresholds/rate_policy.json; do
  n=$(basename $e .json)
  rm -f ${OUT:-/tmp/eq}/$n.old.h5 ${OUT:-/tmp/eq}/$n.new.h5  # a sweep resumes an existing file
  /usr/bin/time -f "$n old %e s" build/pkvsim run -q $e --backend model -c $R/h200-fit.json -o ${OUT:-/tmp/eq}/$n.old.h5 > ${OUT:-/tmp/eq}/$n.old.log 2>&1
  /usr/bin/time -f "$n new %e s" build/pkvsim run -q $e --backend model -o ${OUT:-/tmp/eq}/$n.new.h5 > ${OUT:-/tmp/eq}/$n.new.log 2>&1
  tail -1 ${OUT:-/tmp/eq}/$n.old.log; tail -1 ${OUT:-/tmp/eq}/$n.new.log
done
