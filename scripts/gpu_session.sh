#!/usr/bin/env bash
# One GPU session: the GPU tests, the kernel benchmark, and the in-the-loop runs of
# the study's B=1 bucketed and B=8 bimodal experiments under every route, on the
# cuda backend (clock: wall). Run on the GPU machine from the repository root with
# the bundled programs in .bundle/; writes logs and tables under $1. With
# CALIBRATE=1 it first runs `pkvsim calibrate` and uses that file for the runs.
set -uo pipefail
out=${1:?usage: gpu_session.sh OUTDIR [skip-bench]}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
.bundle/run test_kernels_gpu > "$out/test_kernels_gpu.log" 2>&1; tail -3 "$out/test_kernels_gpu.log"
.bundle/run test_cuda_backend > "$out/test_cuda_backend.log" 2>&1; tail -12 "$out/test_cuda_backend.log"
.bundle/run test_noalloc > "$out/test_noalloc.log" 2>&1; grep -v '^/' "$out/test_noalloc.log" | tail -9
[ "${2:-}" = skip-bench ] || .bundle/run pkvsim bench kernels --out "$out/bench_kernels.txt" > /dev/null 2>&1
cal=()
if [ "${CALIBRATE:-0}" = 1 ]; then
  .bundle/run pkvsim calibrate -o "$out/calibration.json" > "$out/calibrate.log" 2>&1
  tail -8 "$out/calibrate.log"
  cal=(--calibration "$out/calibration.json")
fi
for exp in bucketed_b1 bimodal_b8; do
  for route in ref_paged flashinfer flashinfer_tc pkv_bucket pkv_workqueue pkv_fused adaptive oracle; do
    echo "== $exp $route"
    .bundle/run pkvsim run experiments/$exp.json --backend cuda --route "$route" "${cal[@]}" \
      -o "$out/run.h5" 2>&1 | grep -E "decode|host|of which|routes|steps|pkvsim:"
  done
done 2>&1 | tee "$out/loop.log"
echo "== bimodal_b8_graph adaptive" | tee -a "$out/loop.log"
.bundle/run pkvsim run experiments/bimodal_b8_graph.json --backend cuda "${cal[@]}" -o "$out/run.h5" \
  2>&1 | grep -E "decode|host|of which|routes|graphs|pkvsim:" | tee -a "$out/loop.log"
# The step's metadata in the prologue launch's parameters (the default) against one
# copy before it (run.metadata_upload: copy): B=8 bimodal, three routes, twice each,
# interleaved.
sed -e 's/"run": {/"run": {"metadata_upload": "copy", /' \
  -e "s#\"calibration/h200.json\"#\"$PWD/experiments/calibration/h200.json\"#" \
  experiments/bimodal_b8.json > "$out/bimodal_b8_copy.json"
for rep in 1 2; do
  for exp in experiments/bimodal_b8.json "$out/bimodal_b8_copy.json"; do
    for route in ref_paged pkv_workqueue adaptive; do
      echo "== $rep $(basename "$exp" .json) $route"
      .bundle/run pkvsim run "$exp" --backend cuda --route "$route" "${cal[@]}" -o "$out/run.h5" \
        2>&1 | grep -E "decode|host|of which|pkvsim:"
    done
  done
done 2>&1 | tee "$out/upload_ab.log"
rm -f "$out/run.h5"
echo "gpu_session: ${SECONDS} s"
