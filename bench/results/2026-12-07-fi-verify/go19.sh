#!/usr/bin/env bash
# 44th session: FlashInfer's routes run verify steps on its prefill path inside a step
# (issue 47). The GPU tests, every test_kernels_gpu case its own process, side by side with
# compute-sanitizer's racecheck and memcheck over the verify case (quick: 3 tokens at G 4,
# FlashInfer's routes among them over FP16 and one-scale FP8 KV); then, alone on the GPU,
# `bench kernels --q-len` 4 and 8 (FP16 and FP8 KV: FlashInfer's routes' rows now) and the
# served verify runs here on the cuda backend, record full. Usage: go19.sh OUT (DEADLINE).
top=$1
out=$top/w; mkdir -p "$out"
t0=$SECONDS
tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
export LD_LIBRARY_PATH=$PWD/.bundle/lib:${LD_LIBRARY_PATH:-}
here=$(dirname "$0")
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader | tee -a "$out/summary.txt"
echo "rev $(cat .gpu/rev)" | tee -a "$out/summary.txt"
cal=h100-sxm; nvidia-smi -L | grep -q H200 && cal=h200
left() { echo $((${DEADLINE:-500} - (SECONDS - t0))); }
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS
  [ "$limit" -gt "$(left)" ] && limit=$(left)
  [ "$limit" -lt 5 ] && { echo "$name: skipped (time)" >> "$out/summary.txt"; return; }
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc $? in $((SECONDS - t)) s: $(tail -1 "$out/$name.log")" >> "$out/summary.txt"; }
for c in $(.bundle/run test_kernels_gpu --list); do step "k_$c" 240 .bundle/run test_kernels_gpu "$c" & done
for t in test_model_gpu test_model_gpu_d64 test_model_gpu_d256 test_cuda_backend; do step "$t" 240 .bundle/run "$t" & done
PKV_QUICK=1 step racecheck_verify 240 compute-sanitizer --tool racecheck --error-exitcode 9 \
  .bundle/bin/test_kernels_gpu verify_steps_match_the_reference &
PKV_QUICK=1 step memcheck_verify 240 compute-sanitizer --tool memcheck --error-exitcode 9 \
  .bundle/bin/test_kernels_gpu verify_steps_match_the_reference &
wait
grep -h "verify cases" "$out/k_verify_steps_match_the_reference.log" | tee -a "$out/summary.txt"
grep -h "proposer's least" "$out/test_cuda_backend.log" | tee -a "$out/summary.txt"
C="b1-8k:8K;b1-32k:32K;b1-128k:128K;b8-32k:32Kx8;b8-bimodal:64K,8K,8K,8K,64K,8K,8K,8K"
for kv in fp16 fp8_e4m3; do for q in 4 8; do
  step "verify_${kv}_q$q" 60 .bundle/run pkvsim bench kernels --q-len $q --kv-dtype $kv \
    --cases "$C" --reps 20 --calibration experiments/calibration/$cal.json \
    --out "$out/verify_${kv}_q$q.txt"
done; done
for f in "$here"/flashinfer*.json; do
  n=$(basename "$f" .json)
  step "$n" 60 .bundle/run pkvsim run "$f" -b cuda -q -c experiments/calibration/$cal.json -o "$out/$n.h5"
done
echo "go19: $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
tar czf "$top/all.tgz" -C "$out" .
cp "$out/summary.txt" "$top/"
