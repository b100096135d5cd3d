#!/usr/bin/env bash
# One GPU call for cuBLAS at token widths that are not round and the decode step's
# host overhead by metadata path (run.metadata_upload): the GPU tests, pkvsim bench
# model at the default widths and at widths that are not round (is padding a prompt
# forward's GEMMs worth it? bench/RESULTS.md, twelfth session: no), the runs of
# bench/model/ with the defaults (auto) and with the step's metadata by copy (copy).
# Run on the GPU machine from the
# repository root with the bundled programs in .bundle/; everything ends up in
# $1/pad.tar.xz (the test summary also in $1/summary.txt).
set -uo pipefail
out=${1:?usage: gpu_session_pad.sh OUTDIR}
w=$out/pad
mkdir -p "$w"
{
  bash scripts/gpu_session_graph.sh "$w/a" "tests bench"
  .bundle/run pkvsim bench model --reps 10 --rows "${ODD_ROWS:-136,200,264,300,320,341,384,500,512,1000,1364,1408,2729,2752,5000,5056}" \
    --out "$w/bench_rows_odd.txt" 2>&1 | tail -3
  mkdir -p "$w/b" && cp "$w/a/bench_model.txt" "$w/b/"
  RUNS="l8b_b1_1k l8b_b8_32k l8b_b64_4k l8b_trace_azure" VARIANTS="auto copy" \
    bash scripts/gpu_session_graph.sh "$w/b" "runs"
  mkdir -p "$w/c" && cp "$w/a/bench_model.txt" "$w/c/"
  RUNS="l8b_prefill_8k l8b_prefill_16x512" VARIANTS="auto" bash scripts/gpu_session_graph.sh "$w/c" "runs"
} 2>&1 | tee "$w/session.log" | grep -E "rc=|^==|TTFT|TPOT|host time|FAIL" > "$out/summary.txt"
(cd "$out" && tar cJf pad.tar.xz pad && rm -rf pad)
