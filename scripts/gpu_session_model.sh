#!/usr/bin/env bash
# One GPU session for the served model: the GPU tests, pkvsim bench model (GEMMs
# alone and the ceilings), the full-model runs of bench/model/*.json on the cuda
# backend, the study's experiments inside llama-3.1-8b under every route (with
# run.cuda_graph auto, and ref_paged, pkv_workqueue and adaptive also eager), and the
# table (bench/model_bench.py). Run on the GPU machine from the repository root with
# the bundled programs in .bundle/; writes logs, files and tables under $1.
# Stages to run: $2 (default "tests bench runs study"); the study's runs may be cut
# short with $STUDY_DECODE (tokens per request) and $STUDY_LAYERS (run.layers_measured).
set -uo pipefail
out=${1:?usage: gpu_session_model.sh OUTDIR [STAGES]}
stages=${2:-tests bench runs study}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
has() { [[ " $stages " == *" $1 "* ]]; }
if has tests; then
  for t in ${TESTS:-test_model_gpu test_noalloc test_cuda_backend test_kernels_gpu}; do
    .bundle/run $t > "$out/$t.log" 2>&1
    echo "$t rc=$? $(grep -v '^/' "$out/$t.log" | tail -1)"
  done
  grep -E "^(prefill|decode):" "$out/test_model_gpu.log"
  grep -E "FAIL" "$out"/test_*.log | head -20
fi
if has bench; then
  .bundle/run pkvsim bench model --out "$out/bench_model.txt" 2>&1 | tail -14
fi
if has runs; then
  for e in bench/model/l8b_*.json; do
    n=$(basename "$e" .json)
    echo "== $n"
    .bundle/run pkvsim run "$e" --backend cuda -o "$out/$n.h5" 2>&1 | grep -E "steps|decode|TTFT|TPOT|routes|pkvsim:"
  done 2>&1 | tee "$out/runs.log"
  [ -f "$out/bench_model.txt" ] && python3 bench/model_bench.py "$out/bench_model.txt" \
    "$out"/l8b_*.h5 | tee "$out/model_table.md"
fi
if has study; then
  # The study's families inside the full model: every route, wall clock.
  for exp in bucketed_b1 bimodal_b8; do
    python3 - "experiments/$exp.json" "$out/${exp}_l8b.json" "$PWD" <<'PY'
import json, os, sys
src, dst, root = sys.argv[1:]
e = json.load(open(src))
e["model"] = "llama-3.1-8b"
e["workload"]["num_requests"] = 4 if "bucketed" in src else 8
e["workload"]["max_context"] = 65536 + 512
e["serving"]["kv_pages"] = 9000 if "bucketed" in src else 24000
e["route"]["calibration"] = root + "/experiments/calibration/h200.json"
e["run"] = {"record": "full"}
if os.environ.get("STUDY_DECODE"):  # tokens per request (default: the family's)
    e["workload"]["decode"] = {"dist": "fixed", "value": int(os.environ["STUDY_DECODE"])}
if os.environ.get("STUDY_LAYERS"):  # run.layers_measured (default: every layer)
    e["run"]["layers_measured"] = int(os.environ["STUDY_LAYERS"])
json.dump(e, open(dst, "w"))
e["name"] += "_eager"
e["run"]["cuda_graph"] = False
json.dump(e, open(dst.replace(".json", "_eager.json"), "w"))
PY
    # run.cuda_graph auto (graphs for the routes they hold), and every route eager
    for run in ref_paged flashinfer flashinfer_tc pkv_bucket pkv_workqueue pkv_fused adaptive \
               ref_paged:eager pkv_workqueue:eager adaptive:eager; do
      route=${run%%:*}
      sfx=; [ "$run" != "$route" ] && sfx=_eager
      echo "== ${exp} llama-3.1-8b $route$sfx"
      .bundle/run pkvsim run "$out/${exp}_l8b$sfx.json" --backend cuda --route "$route" \
        -o "$out/study_${exp}_$route$sfx.h5" 2>&1 | grep -E "decode|routes|pkvsim:"
      python3 - "$out/study_${exp}_$route$sfx.h5" <<'PY'
import h5py, sys, numpy as np
with h5py.File(sys.argv[1]) as f:
    s = f["steps"]
    att, dense, wall = s["t_device"][2:], s["t_dense"][2:], s["t_wall"][2:]
    rows = s["rows"][2:]
    print(f"   wall decode tokens/s {rows.sum() / wall.sum():.1f}, attention share of device "
          f"time {att.sum() / (att + dense).sum():.3f}, mean step {1e3 * wall.mean():.3f} ms")
PY
    done
  done 2>&1 | tee "$out/study.log"
  rm -f "$out"/study_*.h5
fi
echo "gpu_session_model: ${SECONDS} s"
# Few files come back from the device: the logs and the runs' files in two archives.
(cd "$out" && tar czf logs.tgz --remove-files -- *.log 2>/dev/null; \
  ls *.h5 >/dev/null 2>&1 && tar cf runs.tar --remove-files -- *.h5)
