#!/usr/bin/env bash
# One GPU call for graph replay of the full-model step: the GPU tests and
# compute-sanitizer's memcheck on the model test, pkvsim bench model (GEMMs alone,
# ceilings), the decode runs of bench/model/ on the cuda backend without and with
# run.cuda_graph (and with run.layers_measured 4), bench/model_bench.py's table, and
# pkvsim calibrate. Run on the GPU machine from the repository root with the bundled
# programs in .bundle/; writes logs, files and tables under $1. Stages: $2 (default
# "tests sanitize bench runs pack calibrate"); runs: $RUNS (default "l8b_b1_1k l8b_b8_32k
# l8b_b64_4k"), variants: $VARIANTS (default "eager graph layers4"; auto: run.cuda_graph
# left at its default; eagerwq and graphwq: the fixed route pkv_workqueue; copy:
# run.metadata_upload copy), calibration:
# $CAL (default experiments/calibration/h200.json). The runs' files end up in runs.tar.xz.
set -uo pipefail
out=${1:?usage: gpu_session_graph.sh OUTDIR [STAGES]}
stages=${2:-tests sanitize bench runs pack calibrate}
mkdir -p "$out"
has() { [[ " $stages " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
if has tests; then
  for t in ${TESTS:-test_model_gpu test_cuda_backend test_noalloc test_kernels_gpu}; do
    .bundle/run $t > "$out/$t.log" 2>&1
    echo "$t rc=$? $(grep -v '^/' "$out/$t.log" | tail -1)"
  done
  grep -hE "^(graph|full model|layers_measured)" "$out"/test_*.log
  grep -h FAIL "$out"/test_*.log | head -20
fi
if has sanitize; then
  compute-sanitizer --tool memcheck --target-processes all --report-api-errors no \
    .bundle/run test_model_gpu > "$out/memcheck_model.log" 2>&1
  echo "memcheck test_model_gpu rc=$? $(grep -E 'ERROR SUMMARY' "$out/memcheck_model.log" | tail -1)"
fi
if has bench; then
  .bundle/run pkvsim bench model --reps ${REPS:-10} ${ROWS:+--rows $ROWS} --out "$out/bench_model.txt" 2>&1 | tail -4
fi
if has runs; then
  for n in ${RUNS:-l8b_b1_1k l8b_b8_32k l8b_b64_4k}; do
    for v in ${VARIANTS:-eager graph layers4}; do
      python3 - "bench/model/$n.json" "$out/${n}_$v.json" "$v" "$PWD" <<'PY'
import json, os, sys
src, dst, variant, root = sys.argv[1:]
e = json.load(open(src))
e["name"] += "_" + variant
e["route"]["calibration"] = os.environ.get("CAL", root + "/experiments/calibration/h200.json")
trace = e["workload"].get("trace")
if trace and not os.path.isabs(trace["path"]):  # relative to the experiment's folder
    trace["path"] = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(src)), trace["path"]))
e.setdefault("run", {})
if variant == "copy":  # the step's metadata by one copy, not in the launch's parameters
    e["run"]["metadata_upload"] = "copy"
if variant not in ("auto", "copy"):  # auto: the default (graphs for a full model)
    e["run"]["cuda_graph"] = variant not in ("eager", "eagerwq")
if variant in ("graphwq", "eagerwq"):  # the fixed route graphs hold that is fastest here
    e["route"]["policy"] = "pkv_workqueue"
if variant == "layers4":
    e["run"]["layers_measured"] = 4
json.dump(e, open(dst, "w"))
PY
      echo "== $n $v"
      .bundle/run pkvsim run "$out/${n}_$v.json" --backend cuda -o "$out/${n}_$v.h5" 2>&1 |
        grep -E "TTFT|TPOT|pkvsim:"
    done
  done 2>&1 | tee "$out/runs.log"
  [ -f "$out/bench_model.txt" ] && python3 bench/model_bench.py "$out/bench_model.txt" \
    "$out"/l8b_*.h5 | tee "$out/model_table.md"
fi
if has pack; then
  (cd "$out" && tar cJf runs.tar.xz l8b_*.h5 && rm -f l8b_*.h5 l8b_*.json)
fi
if has calibrate; then
  .bundle/run pkvsim calibrate -o "$out/calibration.json" > "$out/calibrate.log" 2>&1
  echo "calibrate rc=$? $(tail -3 "$out/calibrate.log")"
fi
