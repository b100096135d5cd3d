#!/usr/bin/env bash
# GPU call of the forty-sixth session (second): on an H100, Llama-3.1-70B's TP-4 and TP-8
# shards on the cuda backend at 8, 64 and 192 rows (for bench/model_accuracy.py against
# the model backend with gemm_tflops_by_model); on an H200, issue 49's speed part.
set -u
[ -d .bundle ] || tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
export LD_LIBRARY_PATH=$PWD/.bundle/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$name"
if [[ "$name" == *H200* ]]; then
  DEADLINE=400 bash scripts/gpu_session_backlog.sh $OUT/b speed
  tar czf $OUT/all.tgz -C $OUT b; rm -rf $OUT/b
  exit 0
fi
W=$OUT/w; mkdir -p $W
# the bundle (0f8f77f) predates gemm_tflops_by_model: the calibration without it
python3 -c "import json; d = json.load(open('experiments/calibration/h100-sxm.json')); d.pop('gemm_tflops_by_model'); json.dump(d, open('.gpu/h100-sxm-0f8f77f.json', 'w'))"
echo "$name" > $W/gpu.txt
for tp in 4 8; do for b in 8 64 192; do
  n=l70b_tp${tp}_b$b; s=$(date +%s)
  timeout 100 .bundle/run pkvsim run --backend cuda -c .gpu/h100-sxm-0f8f77f.json bench/model/$n.json -o $W/$n.h5 > $W/$n.log 2>&1
  echo "$n rc=$? $(( $(date +%s) - s )) s" >> $W/summary.txt
done; done
cat $W/summary.txt
tar czf $OUT/all.tgz -C $OUT w; rm -rf $W
