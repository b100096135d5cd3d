#!/usr/bin/env bash
# GPU call of the forty-fifth session: bench model's GEMM rates by width for Llama-3.1-70B's
# TP-4 shard (a preset made for the call) beside Llama-3.1-8B's, on the same machine.
set -u
[ -d .bundle ] || tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
export LD_LIBRARY_PATH=$PWD/.bundle/lib
W=$OUT/w; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $W/gpu.txt
for m in llama-3.1-70b-tp4 llama-3.1-8b llama-3.1-70b; do
  s=$(date +%s)
  timeout 130 .bundle/run pkvsim bench model --model $m --rows 8,64,128,192,256,384,512,1024,4096 --reps 5 --out $W/bm_$m.txt > $W/bm_$m.log 2>&1
  echo "bm_$m rc=$? $(( $(date +%s) - s )) s" >> $W/summary.txt
done
tar czf $OUT/all.tgz -C $OUT w
cat $W/gpu.txt $W/summary.txt
