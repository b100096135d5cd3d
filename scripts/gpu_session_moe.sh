#!/usr/bin/env bash
# gpu_session_moe.sh OUT: issue 47's mixture of experts on the cuda backend (its routed
# experts as cuBLAS grouped GEMMs, kernels/pkvk_model_moe.cu), in one call: the GPU
# tests (test_model_gpu: every case, the experts against the CPU mirror among them, at
# head dimensions 128, 64 and 256; test_cuda_backend), compute-sanitizer's memcheck and
# racecheck over the experts' case, `pkvsim bench model --model BENCH_MODEL` (default
# qwen3-30b-a3b: one MoE layer alone at each width against its active experts' weights
# at the read ceiling; ROWS the widths),
# then experiments (SERVED, default bench/model/qwen3-30b-a3b_b16.json) on the cuda
# backend and on the model backend: the served figures and, per decode step, the
# measured dense time against the predicted. PARTS picks (tests sanitize bench served;
# all by default); LIMIT bounds each served run (200 s).
# Run from the repository root with the programs bundled in .bundle/ (build-fi's).
set -u
out=$1
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader | tee -a "$out/summary.txt"
step() { # NAME LIMIT CMD...: run with a limit, log, one summary line
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc $? in $((SECONDS - t0)) s: $(tail -1 "$out/$name.log")" | tee -a "$out/summary.txt"
}
for part in ${PARTS:-tests sanitize bench served}; do
  case $part in
  tests)
    for t in test_model_gpu test_model_gpu_d64 test_model_gpu_d256 test_cuda_backend; do
      step "$t" 120 .bundle/run "$t"
    done ;;
  sanitize)
    step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
      .bundle/bin/test_model_gpu the_experts_match_the_cpu_mirror
    step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 \
      .bundle/bin/test_model_gpu the_experts_match_the_cpu_mirror ;;
  bench)
    bm=${BENCH_MODEL:-qwen3-30b-a3b}
    step "bench_$bm" 150 .bundle/run pkvsim bench model --model "$bm" \
      --rows "${ROWS:-1,4,16,64,256,1024,4096}" --reps 10 --out "$out/bench_$bm.txt" ;;
  served)
    for x in ${SERVED:-bench/model/qwen3-30b-a3b_b16.json}; do
      n=$(basename "$x" .json)
      for b in cuda model; do
        step "${n}_$b" "${LIMIT:-200}" .bundle/run pkvsim run "$x" -b "$b" \
          -o "$out/${n}_$b.h5" --json "$out/${n}_$b.json"
      done
      python3 - "$out" "$n" > "$out/$n.md" 2>&1 <<'PY'
import json, sys
import h5py, numpy as np
out, n = sys.argv[1], sys.argv[2]
print(f"{n}\n\n| backend | completed | TTFT p50 ms | TTFT mean ms | TPOT p50 ms | TPOT mean ms | TPOT p99 ms | output tok/s |")
print("|---|---|---|---|---|---|---|---|")
for b in ("cuda", "model"):
    j = json.load(open(f"{out}/{n}_{b}.json"))
    print(f"| {b} | {j['completed']} | {j['median_ttft_ms']:.2f} | {j['mean_ttft_ms']:.2f} | {j['median_tpot_ms']:.3f} | {j['mean_tpot_ms']:.3f} | {j['p99_tpot_ms']:.3f} | {j['output_throughput']:.1f} |")
with h5py.File(f"{out}/{n}_cuda.h5") as f:
    if "steps" not in f: sys.exit(0)  # run.record summary
    s = f["steps"]
    rows, pre = s["rows"][:], s["prefill_tokens"][:]
    td, tp = s["t_dense"][:], s["t_dense_predicted"][:]
    act = s["experts_active"][:]
    print("\nDecode steps (no prompt tokens) of the cuda run: measured dense time against the model backend's prediction of the same step")
    print("| rows | steps | measured dense ms (median) | predicted ms (median) | measured / predicted | experts active (mean) |")
    print("|---|---|---|---|---|---|")
    for lo, hi in ((1, 4), (5, 8), (9, 12), (13, 16)):
        k = (pre == 0) & (rows >= lo) & (rows <= hi) & np.isfinite(td)
        if k.sum() == 0: continue
        print(f"| {lo}-{hi} | {k.sum()} | {1e3*np.median(td[k]):.3f} | {1e3*np.median(tp[k]):.3f} | {np.median(td[k]/tp[k]):.3f} | {act[k].mean():.1f} |")
PY
      tee -a "$out/summary.txt" < "$out/$n.md"
    done
    rm -f "$out"/*.h5 ;;
  esac
done
echo "gpu_session_moe: ${SECONDS} s" | tee -a "$out/summary.txt"
