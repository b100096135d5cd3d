#!/usr/bin/env bash
# 39th session: speculative decoding's verify on the GPU (issue 47 item 2): the GPU tests
# (test_kernels_gpu's verify case, test_model_gpu's verify forward against the CPU mirror),
# memcheck over test_kernels_gpu's quick mode, vLLM's published MT-bench runs at batch 1
# (plain, EAGLE-1 k3, EAGLE-3 k2 and k4) on the cuda and model backends, then
# `bench kernels --q-len` 1, 2, 4, 8 (FP16 and FP16 over FP8 at 32/8).
top=$1
out=$top/w; mkdir -p "$out"
t0=$SECONDS
tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader | tee -a "$out/summary.txt"
left() { echo $((${DEADLINE:-470} - (SECONDS - t0))); }
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS
  [ "$limit" -gt "$(left)" ] && limit=$(left)
  [ "$limit" -lt 5 ] && { echo "$name: skipped (time)" | tee -a "$out/summary.txt"; return; }
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc $? in $((SECONDS - t)) s: $(tail -1 "$out/$name.log")" | tee -a "$out/summary.txt"; }
step test_kernels_gpu 200 .bundle/run test_kernels_gpu
grep -h "verify cases" "$out/test_kernels_gpu.log" | tee -a "$out/summary.txt"
for t in test_model_gpu test_model_gpu_d64 test_model_gpu_d256; do step "$t" 60 .bundle/run "$t"; done
grep -h "verify of" "$out/test_model_gpu.log" | head -4 | tee -a "$out/summary.txt"
cal=h100-sxm; nvidia-smi -L | grep -q H200 && cal=h200
C="b1-8k:8K;b1-32k:32K;b1-128k:128K;b8-32k:32Kx8;b8-bimodal:64K,8K,8K,8K,64K,8K,8K,8K"
verify() { for q in 1 2 4 8; do
    step "verify_${1}_q$q" 60 .bundle/run pkvsim bench kernels --q-len $q --kv-dtype $1 \
      --cases "$C" --reps 20 --calibration experiments/calibration/$cal.json \
      --out "$out/verify_${1}_q$q.txt"
  done; }
verify fp16
for v in ${SPEC:-bs1-eagle3-k4 bs1}; do
  f=experiments/validation/vllm-h100-mtbench-$v.json
  for b in cuda model; do
    step "spec_${v}_$b" 100 .bundle/run pkvsim run "$f" -b "$b" -o "$out/spec_${v}_$b.h5" \
      --json "$out/spec_${v}_$b.json"
  done
done
python3 - "$out" > "$out/spec.md" 2>&1 <<'PY'
import json, sys, os
out = sys.argv[1]
print("| run | backend | completed | TPOT mean ms | TPOT p50 ms | TTFT mean ms | output tok/s |")
print("|---|---|---|---|---|---|---|")
for v in ("bs1", "bs1-eagle1-k3", "bs1-eagle3-k2", "bs1-eagle3-k4"):
    for b in ("cuda", "model"):
        p = f"{out}/spec_{v}_{b}.json"
        if not os.path.exists(p): continue
        j = json.load(open(p))
        print(f"| {v} | {b} | {j['completed']} | {j['mean_tpot_ms']:.3f} | {j['median_tpot_ms']:.3f} | {j['mean_ttft_ms']:.2f} | {j['output_throughput']:.1f} |")
PY
cat "$out/spec.md" | tee -a "$out/summary.txt"
rm -f "$out"/*.h5
PKV_QUICK=1 step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
  .bundle/bin/test_kernels_gpu
verify fp8_e4m3
echo "go12: $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
cp "$out/summary.txt" "$top/"
cat "$out"/verify_*.txt > "$top/verify_tables.txt" 2>/dev/null
tar czf "$top/all.tgz" -C "$out" .
