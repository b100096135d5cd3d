#!/usr/bin/env bash
# gpu_session_seams.sh OUT: the seams issue's GPU check (issue 29). GPU tests on this
# revision, then the same short runs on the revision before the change (bundled as
# pkvsim_before) and on this one, interleaved twice: a llama-3.1-8b run under
# prefill_first, one under chunked prefill with swap (the prefill and swap times the
# engine now decides), and the study layer's quickstart, all on the cuda backend.
# Run from the repository root with the programs bundled in .bundle/.
set -u
out=$1
mkdir -p "$out"
[ -n "${SKIP_TESTS:-}" ] || for t in test_kernels_gpu test_cuda_backend test_model_gpu test_noalloc test_side_by_side; do
  [ -x .bundle/bin/$t ] || continue
  .bundle/run $t > "$out/$t.log" 2>&1; echo "$t: rc $? $(tail -1 "$out/$t.log")"; gzip -f "$out/$t.log"
done
cal=$PWD/experiments/calibration/h200.json
w='"workload": {"arrival": {"process": "poisson", "rate": 8}, "prompt": {"dist": "uniform", "min": 200, "max": 3000}, "decode": {"dist": "uniform", "min": 32, "max": 160}, "num_requests": 96, "max_context": 4096}'
echo "{\"name\": \"pf\", \"model\": \"llama-3.1-8b\", $w, \"serving\": {\"max_active\": 16, \"kv_pages\": 2000}, \"route\": {\"policy\": \"adaptive\", \"calibration\": \"$cal\"}, \"run\": {\"seed\": 3}}" > "$out/pf.json"
echo "{\"name\": \"ch\", \"model\": \"llama-3.1-8b\", $w, \"serving\": {\"max_active\": 32, \"kv_pages\": 450, \"scheduler\": \"chunked\", \"token_budget\": 1024, \"preemption\": \"swap\", \"swap_pages\": 2000}, \"route\": {\"policy\": \"pkv_workqueue\", \"calibration\": \"$cal\"}, \"run\": {\"seed\": 3}}" > "$out/ch.json"
for rep in $(seq "${REPS:-2}"); do
  for bin in pkvsim_before pkvsim; do
    for x in pf ch; do
      .bundle/run $bin run -q --backend cuda "$out/$x.json" -o "$out/$x.$bin.$rep.h5" \
        --json "$out/$x.$bin.$rep.json" > "$out/$x.$bin.$rep.txt" 2>&1 ||
        { echo "FAIL $bin $x"; head -3 "$out/$x.$bin.$rep.txt"; }
    done
    .bundle/run $bin run -q --backend cuda experiments/quickstart.json -o "$out/qs.$bin.$rep.h5" \
      --json "$out/qs.$bin.$rep.json" > "$out/qs.$bin.$rep.txt" 2>&1 || echo "FAIL $bin qs"
  done
done
python3 - "$out" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
rows = []
for f in sorted(glob.glob(f"{out}/*.*.*.json")):
    x, b, r, _ = os.path.basename(f).split(".")
    j = json.load(open(f))
    rows.append((x, b, r, j.get("median_ttft_ms"), j.get("median_tpot_ms"), j.get("output_throughput"), j.get("completed")))
sys.stdout = open(f"{out}/table.md", "w")
print("| run | binary | rep | TTFT p50 ms | TPOT p50 ms | output tok/s | completed |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(v if not isinstance(v, float) else round(v, 3)) for v in r) + " |")
PY
cat "$out/table.md"
rm -f "$out"/*.h5 "$out"/*.*.*.txt "$out"/*.*.*.json
# BENCH=1: bench model and bench kernels, the revision before and this one, interleaved
# (after the served model's kernels were split one operation a file); BENCH_REPS (2)
# rounds of bench model, BENCH_BINS (both) the binaries benched. REPS (2): rounds of
# the runs above.
if [ -n "${BENCH:-}" ]; then
  for rep in $(seq "${BENCH_REPS:-2}"); do
    for bin in ${BENCH_BINS:-pkvsim_before pkvsim}; do
      timeout 150 .bundle/run $bin bench model --out "$out/bmodel.$bin.$rep.txt" > /dev/null 2>&1 ||
        echo "FAIL bench model $bin $rep"
    done
  done
  for bin in ${BENCH_BINS:-pkvsim_before pkvsim}; do
    timeout 200 .bundle/run $bin bench kernels --reps 20 --out "$out/bkern.$bin.txt" > /dev/null 2>&1 ||
      echo "FAIL bench kernels $bin"
  done
  (cd "$out" && tar czf bench.tgz bmodel.*.txt bkern.*.txt && rm -f bmodel.*.txt bkern.*.txt)
fi
