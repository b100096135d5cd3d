#!/usr/bin/env bash
# Call 3 of the 37th session (an H100): the fleet's cuda-against-model comparison on the
# H100's measured calibration, one replica and four.
out=$1
[ -d .bundle ] || tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
CAL=$PWD/experiments/calibration/h100-sxm.json KEEP_H5=1 RUNS="one mixed4" LIMIT=${LIMIT:-240} \
  scripts/gpu_session_fleet.sh "$out/fleet"
tar cf - -C "$out" fleet | xz -T8 > "$out/fleet.txz" && rm -rf "$out/fleet"
