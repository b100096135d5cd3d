#!/usr/bin/env bash
# gpu_session_fp8.sh OUT [part]: issue 34's element types on the H200, as recorded in
# bench/RESULTS.md (FP8 KV on the GPU). Part "kernels" (the default): the kernel tests
# (FP16, BF16 and FP8 KV against the CPU reference), compute-sanitizer's quick mode, and
# bench kernels in FP16, BF16, FP16 over FP8 KV and BF16 over FP8 KV at 32/8, FP8 at 28/4
# (B=1 8K/32K/128K, B=8 bimodal); .bundle/ holds build-fi's pkvsim and
# tests/test_kernels_gpu. Part "backend": test_cuda_backend and the study layer at B=1
# 32K in FP16 and over FP8 KV in the loop (bench/results/2026-12-04-fp8-gpu/b1_32k.json);
# .bundle/ holds build-fi's pkvsim and tests/test_cuda_backend (both parts at once do not
# fit the device tool's 64 MiB). Run from the repository root.
set -u
out=${1:?usage: gpu_session_fp8.sh OUT [kernels|backend]}
part=${2:-kernels}
mkdir -p "$out"
here=$PWD
if [ "$part" = kernels ]; then
  .bundle/run test_kernels_gpu > "$out/test_kernels_gpu.txt" 2>&1
  echo "test_kernels_gpu rc $?" | tee -a "$out/summary.txt"; tail -1 "$out/test_kernels_gpu.txt"
  for t in memcheck racecheck; do
    PKV_QUICK=1 LD_LIBRARY_PATH=$here/.bundle/lib:/usr/local/cuda/lib64 \
      compute-sanitizer --tool $t .bundle/bin/test_kernels_gpu > "$out/sanitizer_$t.txt" 2>&1
    echo "$t rc $?" | tee -a "$out/summary.txt"; tail -1 "$out/sanitizer_$t.txt"
  done
  cases="b1-8k:8K;b1-32k:32K;b1-128k:128K;b8-bimodal:64K,8K,8K,8K,64K,8K,8K,8K"
  for run in "32/8 fp16 fp16" "32/8 bf16 bf16" "32/8 fp16 fp8_e4m3" "32/8 bf16 fp8_e4m3" \
             "28/4 fp16 fp8_e4m3"; do
    set -- $run
    .bundle/run pkvsim bench kernels --heads "$1" --dtype "$2" --kv-dtype "$3" --reps 20 \
      --cases "$cases" --calibration experiments/calibration/h200.json \
      --out "$out/bench_${1/\//_}_$2_$3.txt" > /dev/null 2>&1
    echo "bench $run rc $?" | tee -a "$out/summary.txt"
  done
else
  .bundle/run test_cuda_backend > "$out/test_cuda_backend.txt" 2>&1
  echo "test_cuda_backend rc $?" | tee -a "$out/summary.txt"; tail -1 "$out/test_cuda_backend.txt"
  (cd bench/results/2026-12-04-fp8-gpu &&
     "$here/.bundle/run" pkvsim run -q b1_32k.json -o "$out/b1_32k_cuda.h5" &&
     python3 b1_32k_table.py "$out/b1_32k_cuda.h5") | tee -a "$out/summary.txt"
fi
