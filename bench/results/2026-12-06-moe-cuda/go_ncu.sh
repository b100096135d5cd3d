#!/usr/bin/env bash
# 38th session: the kernels of one MoE layer (ncu's list over test_model_gpu's experts
# case), and on an H200 Mixtral-8x7B's MoE layer alone and served (cuda against model).
out=$1; mkdir -p "$out"
tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader | tee "$out/gpu.txt"
export LD_LIBRARY_PATH=$PWD/.bundle/lib:/usr/local/cuda/lib64
timeout 200 ncu --csv --metrics gpu__time_duration.sum --launch-count 400 .bundle/bin/test_model_gpu the_experts_match_the_cpu_mirror > "$out/ncu.csv" 2> "$out/ncu.err"
python3 - "$out/ncu.csv" > "$out/ncu_layers.txt" 2>&1 <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
hdr = rows[0]; ki = hdr.index("Kernel Name"); ii = hdr.index("ID"); vi = hdr.index("Metric Value")
names = []
for r in rows[1:]:
    if r[ii] and (not names or names[-1][0] != r[ii]): names.append((r[ii], r[ki][:100], r[vi]))
start = [i for i, (_, n, _) in enumerate(names) if "to_slots" in n]
for s in start[:3]:
    e = next(i for i in range(s, len(names)) if "combine" in names[i][1])
    print("---", e - s + 1, "kernels from to_slots to combine")
    for i in range(max(0, s - 3), e + 1): print(names[i][2], names[i][1])
PY
cat "$out/ncu_layers.txt"
if grep -q H200 "$out/gpu.txt"; then
  BENCH_MODEL=mixtral-8x7b PARTS="bench served" LIMIT=200 \
    SERVED="bench/model/mixtral-8x7b_b16.json" scripts/gpu_session_moe.sh "$out/h200"
fi
