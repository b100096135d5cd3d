#!/usr/bin/env bash
# One GPU call for the prefill attention: the model GPU tests, pkvsim bench model
# (GEMMs alone, the prefill attention alone on both kernels), then the prefill and
# B=1 runs of bench/model/ on the cuda backend with each kernel
# (run.prefill_attention flashinfer and cublas), and bench/model_bench.py's tables of
# both. Run on the GPU machine from the repository root with the bundled programs in
# .bundle/; writes logs, files and tables under $1. Stages: $2 (default
# "tests bench runs"); runs: $RUNS (default "l8b_prefill_8k l8b_prefill_16x512 l8b_b1_1k").
set -uo pipefail
out=${1:?usage: gpu_session_prefill.sh OUTDIR [STAGES]}
stages=${2:-tests bench runs}
mkdir -p "$out"
has() { [[ " $stages " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
if has tests; then
  for t in ${TESTS:-test_model_gpu test_cuda_backend test_noalloc}; do
    .bundle/run $t > "$out/$t.log" 2>&1
    echo "$t rc=$? $(grep -v '^/' "$out/$t.log" | tail -1)"
  done
  grep -E "^(prefill|decode|chunked)" "$out/test_model_gpu.log"
  grep -h FAIL "$out"/test_*.log | head -20
fi
if has bench; then
  .bundle/run pkvsim bench model --reps ${REPS:-10} --out "$out/bench_model.txt" 2>&1 | tail -10
fi
if has runs; then
  for n in ${RUNS:-l8b_prefill_8k l8b_prefill_16x512 l8b_b1_1k}; do
    for k in flashinfer cublas; do
      python3 - "bench/model/$n.json" "$out/${n}_$k.json" "$k" "$PWD" <<'PY'
import json, sys
src, dst, kernel, root = sys.argv[1:]
e = json.load(open(src))
e["name"] += "_" + kernel
e["route"]["calibration"] = root + "/experiments/calibration/h200.json"
e["run"]["prefill_attention"] = kernel
json.dump(e, open(dst, "w"))
PY
      echo "== $n $k"
      .bundle/run pkvsim run "$out/${n}_$k.json" --backend cuda -o "$out/${n}_$k.h5" 2>&1 |
        grep -E "TTFT|TPOT|pkvsim:"
    done
  done 2>&1 | tee "$out/runs.log"
  [ -f "$out/bench_model.txt" ] && python3 bench/model_bench.py "$out/bench_model.txt" \
    "$out"/l8b_*.h5 | tee "$out/model_table.md"
fi
