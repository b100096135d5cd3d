#!/usr/bin/env bash
# One GPU call for the serving scheduler (issue 14), from the repository root of the GPU
# machine with the bundled programs in .bundle/: the GPU tests the scheduler touches,
# then experiments/scheduler/NAME.json on the cuda backend (each file to OUT/NAME.h5)
# for NAME in EXPS (default: chunked_prefill prefix_caching_shared; the Mooncake replay
# takes about an hour there). TESTS overrides the tests run; CALIBRATE=1 runs
# `pkvsim calibrate` first (OUT/calibration.json: the route constants and the swap
# copies' link).
# Usage: gpu_session_sched.sh OUT [skip-tests]
set -uo pipefail
out=${1:?usage: gpu_session_sched.sh OUT [skip-tests]}
mkdir -p "$out"
log="$out/sched.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
if [ "${2:-}" != skip-tests ]; then
  for t in ${TESTS:-test_model_gpu test_cuda_backend test_noalloc}; do
    t0=$SECONDS
    .bundle/run "$t" > "$out/$t.log" 2>&1
    echo "$t: rc $?, $((SECONDS - t0)) s: $(tail -1 "$out/$t.log")" | tee -a "$log"
    grep -E "^FAIL|chunked|mixed" "$out/$t.log" | head -20 | tee -a "$log"
  done
fi
if [ "${CALIBRATE:-0}" = 1 ]; then
  t0=$SECONDS
  .bundle/run pkvsim calibrate -o "$out/calibration.json" > "$out/calibrate.log" 2>&1
  echo "calibrate: rc $?, $((SECONDS - t0)) s" | tee -a "$log"
  grep -A8 "host link" "$out/calibrate.log" | tee -a "$log"
fi
for n in ${EXPS-chunked_prefill prefix_caching_shared}; do
  e=experiments/scheduler/$n.json
  t0=$SECONDS
  .bundle/run pkvsim run "$e" --backend cuda -q -o "$out/$n.h5" > "$out/$n.log" 2>&1
  echo "$n: rc $?, $((SECONDS - t0)) s" | tee -a "$log"
  tail -3 "$out/$n.log" | tee -a "$log"
done
echo "gpu_session_sched: ${SECONDS} s" | tee -a "$log"
