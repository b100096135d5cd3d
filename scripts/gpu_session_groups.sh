#!/usr/bin/env bash
# gpu_session_groups.sh OUT: issue 34's GQA groups on the H200: the kernel tests (every
# route against the CPU reference for 1 to 8 query heads per KV head), bench kernels at
# groups 3, 4, 5, 6, 7 (B=1 32K, B=8 bimodal), and qwen2.5-7b (7 per KV head) served on
# the cuda backend and on the model backend. From the repository root with .bundle/
# (build-fi's pkvsim and tests/test_kernels_gpu).
set -u
out=${1:?usage: gpu_session_groups.sh OUT}
mkdir -p "$out"
.bundle/run test_kernels_gpu > "$out/test_kernels_gpu.txt" 2>&1; echo "test_kernels_gpu rc $?" | tee -a "$out/summary.txt"
tail -2 "$out/test_kernels_gpu.txt" | tee -a "$out/summary.txt"
for h in 32/8 24/8 40/8 48/8 28/4; do
  .bundle/run pkvsim bench kernels --heads $h --reps 20 \
    --cases "b1-32k:32K;b8-bimodal:64K,8K,8K,8K,64K,8K,8K,8K" \
    --calibration experiments/calibration/h200.json --out "$out/bench_${h/\//_}.txt" > /dev/null 2>&1
  echo "bench $h rc $?" | tee -a "$out/summary.txt"
done
cal=$PWD/experiments/calibration/h200.json
for b in cuda model; do
  .bundle/run pkvsim run bench/model/qwen2.5-7b_b8.json -q --backend $b -c "$cal" -o "$out/qwen.$b.h5" \
    --json "$out/qwen.$b.json" > "$out/qwen.$b.log" 2>&1
  echo "qwen $b rc $?" | tee -a "$out/summary.txt"
done
