#!/usr/bin/env bash
# 42nd session, call 1: the GPU tests at HEAD on a FlashInfer build (e7d56a8's test fix,
# pkvk_h2f and the lazy cuBLAS loader with FlashInfer's routes built): test_kernels_gpu's
# cases side by side with test_model_gpu x3 and test_cuda_backend; then alone on the GPU
# bench/proposer_bench.py (the proposer priced by the route model for its shape; the log's
# split of its passes' attention) and vLLM's MT-bench runs at batch 1 on cuda and model.
top=$1
out=$top/w; mkdir -p "$out"
t0=$SECONDS
tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
export LD_LIBRARY_PATH=$PWD/.bundle/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader | tee -a "$out/summary.txt"
echo "rev $(cat .gpu/rev)" | tee -a "$out/summary.txt"
left() { echo $((${DEADLINE:-560} - (SECONDS - t0))); }
step() { local name=$1 limit=$2; shift 2; local t=$SECONDS
  [ "$limit" -gt "$(left)" ] && limit=$(left)
  [ "$limit" -lt 5 ] && { echo "$name: skipped (time)" >> "$out/summary.txt"; return; }
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc $? in $((SECONDS - t)) s: $(tail -1 "$out/$name.log")" >> "$out/summary.txt"; }
cal=h100-sxm; nvidia-smi -L | grep -q H200 && cal=h200
if [ "${PARTS:-tests bench}" != bench ]; then
for c in ${KCASES:-small_shapes_match_the_reference_on_every_route verify_steps_match_the_reference long_rows_match_under_the_engine_planner many_states_take_the_serial_merge shared_prefix_pages_match_private_ones the_mlp_tail_matches_the_reference a_device_past_the_visible_ones_is_refused allocations_past_the_gpu_are_out_of_memory the_workqueue_kernel_keeps_its_residency plans_the_kernels_cannot_run_are_refused swapped_pages_keep_their_bytes}; do
  step "k_$c" 300 .bundle/run test_kernels_gpu "$c" & done
for t in test_model_gpu test_model_gpu_d64 test_model_gpu_d256 test_cuda_backend; do step "$t" 300 .bundle/run "$t" & done
wait
grep -h "proposer's least" "$out/test_cuda_backend.log" | tee -a "$out/summary.txt"
cat "$out/summary.txt"
fi
# the MoE layer alone (the grouped GEMMs' fit) and the served Qwen3-30B-A3B, cuda against model
PARTS="bench served" step moe 120 bash scripts/gpu_session_moe.sh "$out/moe"
cat "$out/moe/summary.txt" >> "$out/summary.txt"
# verify steps of 4 query tokens a row on ref_paged and pkv_workqueue, for pkvsim fit's q4 gates
mkdir -p "$out/vfit"
for r in ref_paged pkv_workqueue; do
  step "vfit_$r" 90 .bundle/run pkvsim run .gpu/vfit/$r.json -b cuda -q -o "$out/vfit/$r.h5"
done
# an H200 (issue 49): the served model's twelve type runs against h200.json, the speed tables
if [ $cal = h200 ] && [ -z "${NO_BACKLOG:-}" ]; then
  DEADLINE=$(( $(left) - ${KEEP:-150} )) scripts/gpu_session_backlog.sh "$top/bl" ${BL:-own speed}
fi
printf '#!/bin/sh\nexec %s/.bundle/run pkvsim "$@"\n' "$PWD" > "$out/pkvsim"; chmod +x "$out/pkvsim"
step proposer_bench 200 python3 bench/proposer_bench.py "$out/pkvsim" --gpu $cal --conc ${CONC:-1,16} --out "$out/proposer.txt"
cat "$out/proposer.txt"
for v in bs1-eagle1-k3 bs1-eagle3-k4; do
  f=experiments/validation/vllm-h100-mtbench-$v.json
  for b in cuda model; do
    step "spec_${v}_$b" 60 .bundle/run pkvsim run "$f" -b "$b" -o "$out/spec_${v}_$b.h5" --json "$out/spec_${v}_$b.json"
  done
done
python3 - "$out" > "$out/spec.md" 2>&1 <<'PY'
import json, sys, os, re
out = sys.argv[1]
print("| run | backend | completed | TPOT mean ms | TPOT p50 ms | proposer log |")
print("|---|---|---|---|---|---|")
for v in ("bs1-eagle1-k3", "bs1-eagle3-k4"):
    for b in ("cuda", "model"):
        p = f"{out}/spec_{v}_{b}.json"
        if not os.path.exists(p): continue
        j = json.load(open(p))
        m = re.search(r"backend: (.*)\)", open(f"{out}/spec_{v}_{b}.log").read())
        print(f"| {v} | {b} | {j['completed']} | {j['mean_tpot_ms']:.3f} | {j['median_tpot_ms']:.3f} | {m.group(1) if m else '-'} |")
PY
cat "$out/spec.md" | tee -a "$out/summary.txt"
rm -f "$out"/*.h5
echo "go17: $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
cp "$out/summary.txt" "$top/" 2>/dev/null
tar czf "$top/all.tgz" -C "$out" .
