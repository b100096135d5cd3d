#!/usr/bin/env bash
# One GPU call for the model backend's accuracy on a full model: closed-loop
# llama-3.1-8b decode runs over a grid of batch sizes and ragged contexts (B = 1..128,
# prompts uniform in [L/2, L] for L = 512..32K, B*L at most 64K tokens, 16 tokens
# each, run.cuda_graph auto), for `pkvsim fit` (two shapes in three fitted, the third
# held out) and bench/model_accuracy.py's comparison of the model backend; then the decode
# run of bench/model/l8b_b8_32k.json under each PKV_CUDA_SCHEDULE (the host's wait;
# SCHED=0: not). ROUTES="ref_paged pkv_workqueue": every shape once with each of
# these fixed routes instead of once with adaptive (so that each route's fit sees
# every shape). MAX_BL (default 65536): the largest B*L of the grid (262144 reaches the
# B=8 32K and B=64 4K shapes of bench/model, whose attention the 64K grid's fit
# over-predicted by 10% on the twelfth session's machine).
# CAL (default experiments/calibration/h200.json): the calibration the runs name (on
# another GPU, that GPU's own from `pkvsim calibrate`, the base of its fit). SHARD=I/N runs
# the I-th of N interleaved parts of the grid (a grid longer than one call, in several).
# Run on the GPU machine from the repository root with the bundled programs in
# .bundle/; writes the runs as fitset.tar.xz and the logs under $1.
set -uo pipefail
out=${1:?usage: gpu_session_fit.sh OUTDIR}
mkdir -p "$out/fitset"
cal=$(realpath "${CAL:-experiments/calibration/h200.json}")
python3 - "$out/fitset" "$cal" "${ROUTES:-}" "${MAX_BL:-65536}" <<'PY'
import json, os, sys
dst, cal, routes, max_bl = sys.argv[1:]
base = json.load(open("bench/model/l8b_b1_1k.json"))
k = 0
for L in (512, 1024, 2048, 4096, 8192, 16384, 32768):
    for B in (1, 2, 4, 8, 16, 32, 64, 128):
        if B * L > int(max_bl):
            continue
        for r in routes.split() or [None]:
            e = json.loads(json.dumps(base))
            e["name"] = f"fit_b{B}_l{L}{'_' + r if r else ''}_{'test' if k % 3 == 2 else 'fit'}"
            e["description"] = f"llama-3.1-8b decode, {B} requests of {L // 2}-{L} prompt tokens"
            e["workload"] = {"arrival": {"process": "closed", "concurrency": B},
                             "prompt": {"dist": "uniform", "min": L // 2, "max": L},
                             "decode": {"dist": "fixed", "value": 16},
                             "num_requests": B, "max_context": L + 32}
            e["serving"] = {"max_active": B, "kv_pages": B * (L + 48) // 16 + 64}
            e["route"] = {"calibration": cal}
            if r:
                e["route"]["policy"] = r
            e["run"] = {"record": "full"}
            json.dump(e, open(os.path.join(dst, e["name"] + ".json"), "w"))
        k += 1
PY
# The runs travel as one file (a call returns at most eight), packed also when a time
# limit stops the grid: what ran comes back.
pack() { (cd "$out/fitset" && tar cJf ../fitset.tar.xz ./*.h5 ./*.json && cd .. && rm -rf fitset); }
trap 'exit 124' TERM INT
trap pack EXIT
shard=${SHARD:-1/1} k=0
for j in "$out"/fitset/*.json; do
  n=$(basename "$j" .json)
  k=$((k + 1))
  [ $(((k - 1) % ${shard#*/})) = $((${shard%/*} - 1)) ] || { rm -f "$j"; continue; }
  echo "== $n"
  .bundle/run pkvsim run "$j" --backend cuda -q -o "$out/fitset/$n.h5" 2>&1 | grep -vE "^pkvsim: (reading|cuda graphs)"
done 2>&1 | tee "$out/fitset.log"
pack
trap - EXIT
[ "${SCHED:-1}" = 0 ] && exit 0
for sched in auto spin yield blocking; do
  echo "== l8b_b8_32k PKV_CUDA_SCHEDULE=$sched"
  PKV_CUDA_SCHEDULE=$sched .bundle/run pkvsim run bench/model/l8b_b8_32k.json --backend cuda -q \
    -c "$cal" -o "$out/sched_$sched.h5" 2>&1 | grep "host time"
  python3 - "$out/sched_$sched.h5" <<'PY'
import h5py, sys, numpy as np
with h5py.File(sys.argv[1]) as f:
    s = f["steps"]
    o = 1e6 * (s["t_wall"][2:] - s["t_device"][2:] - s["t_dense"][2:])
    print("   host overhead us p10 %.1f p50 %.1f p90 %.1f" % tuple(np.percentile(o, [10, 50, 90])))
PY
done 2>&1 | tee "$out/sched.log"
rm -f "$out"/sched_*.h5
