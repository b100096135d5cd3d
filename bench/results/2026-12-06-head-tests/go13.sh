#!/usr/bin/env bash
# 40th session, call 1: the GPU tests at HEAD (583b710 changed pkvk_launch's host code after
# the last GPU run) and compute-sanitizer's racecheck and memcheck over the verify case.
top=$1
out=$top/w; mkdir -p "$out"
t0=$SECONDS
tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
export LD_LIBRARY_PATH=$PWD/.bundle/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader | tee -a "$out/summary.txt"
echo "rev $(cat .gpu/rev)" | tee -a "$out/summary.txt"
left() { echo $((${DEADLINE:-570} - (SECONDS - t0))); }
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS
  [ "$limit" -gt "$(left)" ] && limit=$(left)
  [ "$limit" -lt 5 ] && { echo "$name: skipped (time)" | tee -a "$out/summary.txt"; return; }
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc $? in $((SECONDS - t)) s: $(tail -1 "$out/$name.log")" | tee -a "$out/summary.txt"; }
step test_kernels_gpu 200 .bundle/run test_kernels_gpu
grep -h "verify cases" "$out/test_kernels_gpu.log" | tee -a "$out/summary.txt"
for t in test_model_gpu test_model_gpu_d64 test_model_gpu_d256 test_cuda_backend; do step "$t" 100 .bundle/run "$t"; done
grep -h "verify of" "$out/test_model_gpu.log" | head -2 | tee -a "$out/summary.txt"
PKV_QUICK=1 step racecheck_verify 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
  .bundle/bin/test_kernels_gpu verify_steps_match_the_reference
PKV_QUICK=1 step memcheck_verify 100 compute-sanitizer --tool memcheck --error-exitcode 9 \
  .bundle/bin/test_kernels_gpu verify_steps_match_the_reference
echo "go13: $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
cp "$out/summary.txt" "$top/"
tar czf "$top/all.tgz" -C "$out" .
