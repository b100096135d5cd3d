#!/usr/bin/env bash
# 40th session, call 3: the verify kernel's short query blocks (q_len 3 and 5: EAGLE's k 2
# and 4) against FlashInfer's prefill path, FP16 and FP8 KV, Llama-3.1-8B's heads.
top=$1; out=$top/w; mkdir -p "$out"; t0=$SECONDS
tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee "$out/summary.txt"
C="b1-8k:8K;b1-32k:32K;b1-128k:128K;b8-32k:32Kx8;b8-bimodal:64K,8K,8K,8K,64K,8K,8K,8K"
for kv in fp16 fp8_e4m3; do for q in 1 3 5; do
  timeout 60 .bundle/run pkvsim bench kernels --q-len $q --kv-dtype $kv --cases "$C" --reps 20 \
    --calibration experiments/calibration/h200.json --out "$out/verify_${kv}_q$q.txt" > "$out/verify_${kv}_q$q.log" 2>&1
  echo "verify_${kv}_q$q: rc $?" | tee -a "$out/summary.txt"
done; done
python3 bench/verify_tables.py "$out"/verify_fp16_q*.txt "$out"/verify_fp8_e4m3_q*.txt --out "$out/verify_summary.md"
cat "$out/verify_summary.md"
echo "go15: $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
tar czf "$top/all.tgz" -C "$out" .
