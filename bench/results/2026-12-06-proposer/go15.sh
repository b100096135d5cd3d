#!/usr/bin/env bash
# 41st session: speculative decoding's proposer run for real on the GPU (issue 47), cuBLAS
# opened on first use. The GPU tests (test_model_gpu x3, test_cuda_backend with its new
# proposer case, test_kernels_gpu's cuBLAS case) side by side; then alone on the GPU vLLM's published MT-bench
# runs at batch 1 (plain, EAGLE-1 k3, EAGLE-3 k2, k4) on the cuda backend (EAGLE's head now
# run) and the model backend, and bench/proposer_bench.py (draft 1B k3, EAGLE k4, 1-64 in flight).
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
cal=h100-sxm; nvidia-smi -L | grep -q H200 && cal=h200
if [ "${PARTS:-tests bench}" != bench ]; then
for c in ${KCASES:-the_mlp_tail_matches_the_reference}; do step "k_$c" 300 .bundle/run test_kernels_gpu "$c" & done
for t in test_model_gpu test_model_gpu_d64 test_model_gpu_d256 test_cuda_backend; do step "$t" 250 .bundle/run "$t" & done
wait
grep -h "proposer's least" "$out/test_cuda_backend.log" | tee -a "$out/summary.txt"
cat "$out/summary.txt"
fi
for v in bs1 bs1-eagle1-k3 bs1-eagle3-k2 bs1-eagle3-k4; do
  f=experiments/validation/vllm-h100-mtbench-$v.json
  for b in cuda model; do
    step "spec_${v}_$b" 60 .bundle/run pkvsim run "$f" -b "$b" -o "$out/spec_${v}_$b.h5" --json "$out/spec_${v}_$b.json"
  done
done
python3 - "$out" > "$out/spec.md" 2>&1 <<'PY'
import json, sys, os, re
out = sys.argv[1]
pub = {"bs1": 7.07, "bs1-eagle1-k3": None, "bs1-eagle3-k2": None, "bs1-eagle3-k4": 4.05}
print("| run | backend | completed | TPOT mean ms | TPOT p50 ms | TTFT mean ms | output tok/s | proposer ms a step: measured / predicted |")
print("|---|---|---|---|---|---|---|---|")
for v in pub:
    for b in ("cuda", "model"):
        p = f"{out}/spec_{v}_{b}.json"
        if not os.path.exists(p): continue
        j = json.load(open(p))
        m = re.search(r"([0-9.]+) ms a step measured, ([0-9.]+) ms predicted", open(f"{out}/spec_{v}_{b}.log").read())
        note = f"{m.group(1)} / {m.group(2)}" if m else "-"
        print(f"| {v} | {b} | {j['completed']} | {j['mean_tpot_ms']:.3f} | {j['median_tpot_ms']:.3f} | {j['mean_ttft_ms']:.2f} | {j['output_throughput']:.1f} | {note} |")
PY
cat "$out/spec.md" | tee -a "$out/summary.txt"
rm -f "$out"/*.h5
printf '#!/bin/sh\nexec %s/.bundle/run pkvsim "$@"\n' "$PWD" > "$out/pkvsim"; chmod +x "$out/pkvsim"
step proposer_bench 300 python3 bench/proposer_bench.py "$out/pkvsim" --gpu $cal --conc ${CONC:-1,16,64} --out "$out/proposer.txt"
cat "$out/proposer.txt"
echo "go15: $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
cp "$out/summary.txt" "$top/" 2>/dev/null
tar czf "$top/all.tgz" -C "$out" .
