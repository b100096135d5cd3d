#!/usr/bin/env bash
# gpu_session_saturation.sh OUT: issue 31's saturated workloads on the H200, each on
# the cuda backend (wall clock) and on the model backend, for the model backend's
# accuracy at saturation and its refit: llama-3.1-8b, ShareGPT-like lengths (the
# validation files' lognormals), the measured H200 calibration, adaptive routing.
#   burst200_c512    200 prompts at once, chunked with a 512-token budget (vLLM's
#                    dashboard throughput test, experiments/validation/)
#   burst1000_c2048  1000 prompts at once, chunked, 2048 tokens
#   poisson40_c512   1000 prompts, Poisson 40 req/s, chunked, 512 tokens
#   burst1000_pf     1000 prompts at once, prefill_first, prefill batches of 8192 tokens
#   latency_b8       the dashboard's latency test (8 x 32 in, 128 out)
# Writes each run's HDF5 (record steps) and vLLM-named --json, and the wall times.
# RUNS picks the runs; CAL another calibration (another GPU's own); KV_PAGES the KV cache's
# pages (default the preset's 65536, 128 GiB: on an 80 GB H100, 26000 leave the weights and
# activations room, as vLLM's 0.9 of the memory does). Run from the repository root with .bundle/ (build-fi's pkvsim).
set -u
out=${1:?usage: gpu_session_saturation.sh OUT}
mkdir -p "$out"
cal=$(realpath "${CAL:-experiments/calibration/h200.json}")
python3 - "$out" "$cal" "${KV_PAGES:-}" <<'PY'
import json, sys
out, cal, kv_pages = sys.argv[1:]
sg = {"prompt": {"dist": "lognormal", "median": 143, "sigma": 0.9},
      "decode": {"dist": "lognormal", "median": 130, "sigma": 0.9}, "max_context": 2048}
def burst(n): return dict(sg, arrival={"process": "closed", "concurrency": n}, num_requests=n)
runs = {
  "burst200_c512": (dict(burst(200)), {"scheduler": "chunked", "token_budget": 512}, 4),
  "burst1000_c2048": (dict(burst(1000)), {"scheduler": "chunked", "token_budget": 2048}, 1),
  "poisson40_c512": (dict(sg, arrival={"process": "poisson", "rate": 40}, num_requests=1000),
                     {"scheduler": "chunked", "token_budget": 512}, 1),
  "burst1000_pf": (dict(burst(1000)), {"scheduler": "prefill_first",
                                       "prefill_batch_tokens": 8192}, 1),
  "latency_b8": ({"arrival": {"process": "closed", "concurrency": 8},
                  "prompt": {"dist": "fixed", "value": 32}, "decode": {"dist": "fixed", "value": 128},
                  "num_requests": 8}, {"scheduler": "chunked", "token_budget": 512}, 1),
}
for name, (wl, sv, seed) in runs.items():
    sv = dict(sv, max_active=256)
    if kv_pages:
        sv["kv_pages"] = int(kv_pages)
    e = {"name": name, "model": "llama-3.1-8b", "workload": wl, "serving": sv,
         "route": {"policy": "adaptive", "calibration": cal},
         "run": {"seed": seed, "record": "steps"}}
    json.dump(e, open(f"{out}/{name}.json", "w"), indent=1)
PY
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
for x in ${RUNS:-latency_b8 burst200_c512 poisson40_c512 burst1000_c2048 burst1000_pf}; do
  for b in cuda model; do
    t0=$(date +%s%N)
    .bundle/run pkvsim run "$out/$x.json" --backend $b -q -o "$out/$x.$b.h5" --json "$out/$x.$b.json" \
      > "$out/$x.$b.log" 2>&1 || echo "FAILED $x $b: $(tail -3 "$out/$x.$b.log")"
    echo "$x $b wall_s $(( ($(date +%s%N) - t0) / 1000000 ))e-3" | tee -a "$out/wall.txt"
  done
done
