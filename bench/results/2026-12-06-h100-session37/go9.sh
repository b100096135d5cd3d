#!/usr/bin/env bash
# Call 6 of the 37th session: test_model_gpu (its CPU mirror now carries the cpu backend's
# MoE layer; dense here) at head dimensions 128, 64 and 256, at f69b2f0.
out=$1
tar xJf .gpu/bundle_model.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/summary.txt"
for t in test_model_gpu test_model_gpu_d64 test_model_gpu_d256; do
  timeout 60 .bundle/run $t > "$out/$t.log" 2>&1
  echo "$t: rc $?: $(tail -1 "$out/$t.log")" | tee -a "$out/summary.txt"
done
