#!/usr/bin/env bash
# gpu_session_fleet.sh OUT: issue 30's H200 comparison. A fleet of four llama-3.1-8b
# replicas (one copy of the weights, read by all, and a 5,000-page KV pool each on the
# one GPU, its iterations run and timed one at a time) behind least_requests, on the
# cuda backend, then the same experiment on the model backend; `mixed8`: eight such
# replicas at twice the rate (their pools and one copy of the weights fit in the H200's
# memory, eight copies would not); and the same four GPUs split two prefill and two
# decode (the KV link modelled on both); and one replica alone at a quarter of the rate
# (`one`: how far the model backend is from the real kernels without a fleet). Writes
# each run's vLLM-named --json, its /replicas and the wall time, and table.md. RUNS
# picks the runs (mixed4 mixed8 pd22 one), CLOCK the cuda runs' clock (wall; device), N the
# fleet's requests (600). Run from the repository root with the programs bundled in
# .bundle/ (build-fi's pkvsim). CAL: the calibration (default h200.json); KEEP_H5=1 keeps
# the runs' files.
set -u
out=$1
mkdir -p "$out"
cal=${CAL:-$PWD/experiments/calibration/h200.json}
w='"workload": {"arrival": {"process": "poisson", "rate": 16}, "prompt": {"dist": "lognormal", "median": 1000, "sigma": 0.7, "max": 8000}, "decode": {"dist": "lognormal", "median": 128, "sigma": 0.6, "max": 1000}, "num_requests": '${N:-600}', "max_context": 9216}'
s='"serving": {"max_active": 32, "kv_pages": 5000, "scheduler": "chunked", "token_budget": 2048}'
r="\"route\": {\"policy\": \"adaptive\", \"calibration\": \"$cal\"}"
echo "{\"name\": \"mixed4\", \"model\": \"llama-3.1-8b\", $w, $s, $r, \"fleet\": {\"replicas\": 4, \"router\": \"least_requests\"}, \"run\": {\"seed\": 5, \"record\": \"steps\"}}" > "$out/mixed4.json"
echo "{\"name\": \"mixed8\", \"model\": \"llama-3.1-8b\", ${w/\"rate\": 16/\"rate\": 32}, $s, $r, \"fleet\": {\"replicas\": 8, \"router\": \"least_requests\"}, \"run\": {\"seed\": 5, \"record\": \"steps\"}}" > "$out/mixed8.json"
echo "{\"name\": \"pd22\", \"model\": \"llama-3.1-8b\", $w, $s, $r, \"fleet\": {\"router\": \"least_requests\", \"pools\": [{\"name\": \"prefill\", \"replicas\": 2, \"role\": \"prefill\", \"serving\": {\"token_budget\": 8192}}, {\"name\": \"decode\", \"replicas\": 2, \"role\": \"decode\"}]}, \"run\": {\"seed\": 5, \"record\": \"steps\"}}" > "$out/pd22.json"
echo "{\"name\": \"one\", \"model\": \"llama-3.1-8b\", ${w/\"rate\": 16/\"rate\": 4}, $s, $r, \"run\": {\"seed\": 5, \"record\": \"steps\"}}" | sed "s/\"num_requests\": ${N:-600}/\"num_requests\": $(( ${N:-600} / 4 ))/" > "$out/one.json"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
for x in ${RUNS:-mixed4 pd22}; do
  for b in model cuda; do
    ck=predicted; [ $b = cuda ] && ck=${CLOCK:-wall}
    sed "s/\"run\": {/\"run\": {\"clock\": \"$ck\", /" "$out/$x.json" > "$out/$x.$b.in.json"
    t0=$(date +%s%N)
    timeout "${LIMIT:-280}" .bundle/run pkvsim run -q --backend $b "$out/$x.$b.in.json" -o "$out/$x.$b.h5" \
      --json "$out/$x.$b.json" > "$out/$x.$b.txt" 2>&1 || { echo "FAIL $x $b"; tail -3 "$out/$x.$b.txt"; }
    echo "$x $b wall $(( ($(date +%s%N) - t0) / 1000000 ))e-3 clock $ck" | tee -a "$out/wall.txt"
  done
done
python3 - "$out" <<'PY'
import json, sys, os, h5py
out = sys.argv[1]
wall = {tuple(l.split()[:2]): float(l.split()[3]) for l in open(f"{out}/wall.txt")}
sys.stdout = open(f"{out}/table.md", "w")
print("| fleet | backend | completed | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | output tok/s | simulated s | wall s | wall s per simulated s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for x in ("mixed4", "mixed8", "pd22", "one"):
    for b in ("model", "cuda"):
        p = f"{out}/{x}.{b}.json"
        if not os.path.exists(p): continue
        j = json.load(open(p))
        with h5py.File(f"{out}/{x}.{b}.h5") as f:
            rq = f["requests"]; t_end = float(rq["t_finish"][:].max())
            if "replicas" in f:
                rep = {k: f["replicas"][k][:].tolist() for k in ("routed", "steps", "prefills", "busy_s")}
                json.dump(rep, open(f"{out}/{x}.{b}.replicas.json", "w"))
        wl = wall.get((x, b), float("nan"))
        print(f"| {x} | {b} | {j['completed']} | {j['median_ttft_ms']:.2f} | {j['p99_ttft_ms']:.2f} | {j['median_tpot_ms']:.3f} | {j['p99_tpot_ms']:.3f} | {j['output_throughput']:.1f} | {t_end:.2f} | {wl:.1f} | {wl / t_end:.2f} |")
PY
cat "$out/table.md"
[ -n "${KEEP_H5:-}" ] || rm -f "$out"/*.h5
