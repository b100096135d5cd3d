#!/usr/bin/env bash
# 43rd session, call 2: verify steps of 2, 4 and 8 query tokens a row (EAGLE k 1, 3, 7) on
# ref_paged and pkv_workqueue alone, record full: fit_* (1 and 8 in flight, 1K-8K
# prompts, seed 5) for pkvsim fit's route_model_by_q and qN gates, test_* (2 and 16 in flight,
# 2K-16K, seed 6) held out. Usage: go18.sh OUT (DEADLINE seconds, default 540).
top=$1
out=$top/w; mkdir -p "$out"
t0=$SECONDS
tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
export LD_LIBRARY_PATH=$PWD/.bundle/lib:${LD_LIBRARY_PATH:-}
here=$(dirname "$0")
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee -a "$out/summary.txt"
echo "rev $(cat .gpu/rev)" | tee -a "$out/summary.txt"
# the cuda backend's test at this revision first (the engine prices verify steps by their
# query length's route models now)
t=$SECONDS
timeout 120 .bundle/run test_cuda_backend > "$out/test_cuda_backend.log" 2>&1
echo "test_cuda_backend: rc $? in $((SECONDS - t)) s: $(tail -1 "$out/test_cuda_backend.log")" | tee -a "$out/summary.txt"
for part in fit test; do
  for f in "$here"/${part}_*.json; do
    n=$(basename "$f" .json)
    left=$(( ${DEADLINE:-540} - (SECONDS - t0) ))
    [ $left -lt 20 ] && { echo "$n: skipped (time)" >> "$out/summary.txt"; continue; }
    t=$SECONDS
    timeout $left .bundle/run pkvsim run "$f" -b cuda -q -o "$out/$n.h5" > "$out/$n.log" 2>&1
    echo "$n: rc $? in $((SECONDS - t)) s: $(tail -1 "$out/$n.log")" | tee -a "$out/summary.txt"
  done
done
echo "go18: $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
tar czf "$top/all.tgz" -C "$out" .
cp "$out/summary.txt" "$top/"
