#!/usr/bin/env bash
# 40th session, call 2: the verify kernel in 16 MMA rows (issue 47). The GPU tests, every
# test_kernels_gpu case its own process, side by side with compute-sanitizer's racecheck and
# memcheck over the verify case (quick: 4 tokens at G 4, all 16 rows); then, alone on the
# GPU, `bench kernels --q-len` 1, 2, 4, 8 (FP16 and FP8 KV) and vLLM's published EAGLE runs.
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
  [ "$limit" -lt 5 ] && { echo "$name: skipped (time)" >> "$out/summary.txt"; return; }
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc $? in $((SECONDS - t)) s: $(tail -1 "$out/$name.log")" >> "$out/summary.txt"; }
if [ "${PARTS:-tests bench}" != bench ]; then
for c in $(.bundle/run test_kernels_gpu --list); do step "k_$c" 300 .bundle/run test_kernels_gpu "$c" & done
for t in test_model_gpu test_model_gpu_d64 test_model_gpu_d256 test_cuda_backend; do step "$t" 200 .bundle/run "$t" & done
PKV_QUICK=1 step racecheck_verify 300 compute-sanitizer --tool racecheck --error-exitcode 9 \
  .bundle/bin/test_kernels_gpu verify_steps_match_the_reference &
PKV_QUICK=1 step memcheck_verify 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
  .bundle/bin/test_kernels_gpu verify_steps_match_the_reference &
wait
cat "$out/summary.txt"
grep -h "verify cases" "$out/k_verify_steps_match_the_reference.log"
grep -h "verify of" "$out/test_model_gpu.log" | head -2
fi
C="b1-8k:8K;b1-32k:32K;b1-128k:128K;b8-32k:32Kx8;b8-bimodal:64K,8K,8K,8K,64K,8K,8K,8K"
for kv in fp16 fp8_e4m3; do for q in 1 2 4 8; do
  step "verify_${kv}_q$q" 60 .bundle/run pkvsim bench kernels --q-len $q --kv-dtype $kv \
    --cases "$C" --reps 20 --calibration experiments/calibration/h200.json \
    --out "$out/verify_${kv}_q$q.txt"
done; done
python3 bench/verify_tables.py "$out"/verify_fp16_q*.txt "$out"/verify_fp8_e4m3_q*.txt --out "$out/verify_summary.md"
for v in bs1-eagle3-k4 bs1-eagle1-k3; do
  f=experiments/validation/vllm-h100-mtbench-$v.json
  step "spec_${v}_cuda" 60 .bundle/run pkvsim run "$f" -b cuda -o "$out/spec_${v}_cuda.h5" --json "$out/spec_${v}_cuda.json"
done
rm -f "$out"/*.h5
tail -n +3 "$out/summary.txt"
echo "go14: $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
cp "$out/summary.txt" "$out/verify_summary.md" "$top/" 2>/dev/null
tar czf "$top/all.tgz" -C "$out" .
