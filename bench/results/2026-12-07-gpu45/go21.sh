#!/usr/bin/env bash
# GPU call of the forty-fifth session. On an H200: issue 49's backlog first (bench
# kernels' speed tables, the served model's own runs); on an H100: llama-3.1-70b's
# TP-4 shard on the cuda backend at 8, 64 and 192 rows and bench model's MoE fit line.
set -u
[ -d .bundle ] || tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
export LD_LIBRARY_PATH=$PWD/.bundle/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$name"
if [[ "$name" == *H200* ]]; then
  DEADLINE=530 bash scripts/gpu_session_backlog.sh $OUT/b speed own
  tar czf $OUT/all.tgz -C $OUT b
  exit 0
fi
W=$OUT/w; mkdir -p $W
echo "$name" > $W/gpu.txt
for b in 8 64 192; do
  s=$(date +%s)
  timeout 125 .bundle/run pkvsim run --backend cuda bench/model/l70b_tp4_b$b.json -o $W/l70b_tp4_b$b.h5 > $W/l70b_tp4_b$b.log 2>&1
  echo "l70b_tp4_b$b rc=$? $(( $(date +%s) - s )) s" >> $W/summary.txt
done
s=$(date +%s)
timeout 90 .bundle/run pkvsim bench model --model qwen3-30b-a3b --rows 64,256,1024,4096 --reps 5 --out $W/bench_qwen3.txt > $W/bench_qwen3.log 2>&1
echo "bench_qwen3 rc=$? $(( $(date +%s) - s )) s" >> $W/summary.txt
tar czf $OUT/all.tgz -C $OUT w
cat $W/summary.txt
