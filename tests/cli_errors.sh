#!/usr/bin/env bash
# Every class of bad input exits non-zero with a message naming the problem and
# leaves no output file behind. Usage: cli_errors.sh PKVSIM SOURCE_DIR
set -u
pkvsim=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
# the interpreter itself, once (a version manager's shim costs 0.1 s a start, ~80 starts)
py=$(python3 -c 'import sys; print(sys.executable)')
cal="$src/experiments/calibration/default.json"

good() { # a valid experiment with one JSON fragment merged over it by python
  "$py" - "$1" "$cal" "$tmp/out.h5" <<'PY'
import json, sys
frag, cal, out = sys.argv[1], sys.argv[2], sys.argv[3]
e = {"model": {"hq": 32, "hkv": 8, "head_dim": 128, "page_size": 16},
     "workload": {"arrival": {"process": "poisson", "rate": 50},
                  "prompt": {"dist": "fixed", "value": 1000},
                  "decode": {"dist": "fixed", "value": 10}, "num_requests": 5},
     "route": {"policy": "adaptive", "calibration": cal},
     "run": {"output": out}}
def merge(a, b):
    for k, v in b.items():
        if v is None: a.pop(k, None)
        elif isinstance(v, dict) and isinstance(a.get(k), dict): merge(a[k], v)
        else: a[k] = v
merge(e, json.loads(frag))
print(json.dumps(e))
PY
}

expect_fail() { # NAME EXPECTED-TEXT COMMAND...
  local name=$1 want=$2; shift 2
  rm -f "$tmp"/out.h5*
  "$@" >"$tmp/stdout" 2>"$tmp/stderr"; local rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$want" "$tmp/stderr" && ! ls "$tmp"/out.h5* >/dev/null 2>&1; then
    pass=$((pass+1))
  else
    fail=$((fail+1))
    echo "FAIL $name: exit $rc, wanted message containing '$want', got: $(cat "$tmp/stderr")"
    ls "$tmp"/out.h5* 2>/dev/null && echo "  (and an output file was left behind)"
  fi
}

check() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $1"; fi; }
case_json() { # NAME FRAGMENT EXPECTED
  good "$2" > "$tmp/e.json"
  expect_fail "$1" "$3" "$pkvsim" run -q "$tmp/e.json"
}

# sanity: the base experiment runs and writes its file
good '{}' > "$tmp/e.json"
if "$pkvsim" run -q "$tmp/e.json" && [ -f "$tmp/out.h5" ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL base run"; fi

expect_fail missing-file "cannot open" "$pkvsim" run -q "$tmp/nope.json"
printf '{"model": {"hq": 32,,}}' > "$tmp/bad.json"
expect_fail invalid-json "bad.json:1:" "$pkvsim" run -q "$tmp/bad.json"
# Inputs that are not regular files are refused before reading: a device would be read
# to exhaustion and a pipe would wait for a writer for ever.
expect_fail device-experiment "not a regular file" timeout 10 "$pkvsim" run -q /dev/zero
expect_fail dir-experiment "not a regular file (a directory)" "$pkvsim" run -q "$tmp"
mkfifo "$tmp/fifo"
case_json device-trace '{"workload": {"trace": {"path": "/dev/zero"}, "arrival": null, "prompt": null, "decode": null}}' "/dev/zero: not a regular file"
case_json fifo-trace "{\"workload\": {\"trace\": {\"path\": \"$tmp/fifo\"}, \"arrival\": null, \"prompt\": null, \"decode\": null}}" "fifo: not a regular file"
case_json unknown-key '{"model": {"heads": 4}}' "model.heads: unknown key"
case_json unknown-top '{"extra": 1}' "extra: unknown key"
case_json wrong-type '{"workload": {"arrival": {"rate": "fast"}}}' "workload.arrival.rate: must be a number"
case_json out-of-range '{"workload": {"arrival": {"rate": 0}}}' "workload.arrival.rate: must be >= 1e-06"
case_json negative-length '{"workload": {"prompt": {"dist": "fixed", "value": -5}}}' "workload.prompt.value"
case_json bad-enum '{"route": {"policy": "fastest"}}' "route.policy: \"fastest\" is not one of"
case_json gqa '{"model": {"hq": 30}}' "model.hq: 30 is not a multiple"
case_json pool '{"serving": {"kv_pages": 10}}' "serving.kv_pages"
case_json unbounded '{"workload": {"num_requests": 0}}' "nothing ends this run"
case_json calib-missing '{"route": {"calibration": "/nonexistent/cal.json"}}' "/nonexistent/cal.json: cannot open"
case_json calib-override '{"route": {"overrides": {"beta_gbps": -1}}}' "route.overrides.beta_gbps: must be >= 0.001"
# Numbers that vanish: a rate or a bandwidth that underflows would give infinite times.
case_json tiny-rate '{"workload": {"arrival": {"rate": 1e-320}}}' "workload.arrival.rate: must be >= 1e-06"
case_json tiny-bandwidth '{"route": {"overrides": {"beta_gbps": 5e-324}}}' "route.overrides.beta_gbps: must be >= 0.001"
case_json tiny-mmpp '{"workload": {"arrival": {"process": "mmpp", "rate": null, "mean_off_s": 1e-300}}}' "workload.arrival.mean_off_s: must be >= 1e-09"
printf '{"beta_gbps": "x"}' > "$tmp/cal.json"
case_json calib-corrupt "{\"route\": {\"calibration\": \"$tmp/cal.json\"}}" "cal.json: beta_gbps: must be a number"
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.0,12,4\n2023-11-16 18:17:04.0,12,x\n' > "$tmp/bad.csv"
case_json bad-trace-row "{\"workload\": {\"trace\": {\"path\": \"$tmp/bad.csv\"}, \"arrival\": null, \"prompt\": null, \"decode\": null}}" 'bad.csv:3: field "GeneratedTokens": not a number'
# A key given twice on a JSON Lines row, a column given twice in a CSV header: refused
# (a JSON array trace already is), not the first or the last value kept.
printf '{"timestamp": 0, "input_length": 100, "output_length": 4}\n{"timestamp": 1, "input_length": 100, "input_length": 9000, "output_length": 4}\n' > "$tmp/dup.jsonl"
case_json dup-jsonl-key "{\"workload\": {\"trace\": {\"path\": \"$tmp/dup.jsonl\"}, \"arrival\": null, \"prompt\": null, \"decode\": null}}" 'dup.jsonl:2: field "input_length": a key given twice'
printf 'TIMESTAMP,ContextTokens,GeneratedTokens,ContextTokens\n2023-11-16 18:17:03.0,12,4,900\n' > "$tmp/dup.csv"
case_json dup-csv-column "{\"workload\": {\"trace\": {\"path\": \"$tmp/dup.csv\"}, \"arrival\": null, \"prompt\": null, \"decode\": null}}" 'dup.csv:1: column "ContextTokens" given twice in the header (columns 2 and 4)'
case_json bad-trace-key "{\"workload\": {\"trace\": {\"path\": \"$tmp/bad.csv\", \"colums\": \"azure\"}, \"arrival\": null, \"prompt\": null, \"decode\": null}}" "workload.trace.colums: unknown key"
case_json bad-preset '{"workload": {"preset": "spiky"}}' 'workload.preset: "spiky" is not one of'
case_json bad-upload '{"run": {"metadata_upload": "mapped"}}' 'run.metadata_upload: "mapped" is not one of'
case_json bad-prefill-attn '{"run": {"prefill_attention": "fused"}}' 'run.prefill_attention: "fused" is not one of'
case_json bad-graph '{"run": {"cuda_graph": 3}}' 'run.cuda_graph: must be true, false or one of: auto'
case_json bad-graph-word '{"run": {"cuda_graph": "yes"}}' 'run.cuda_graph: "yes" is not one of'
# Keys of one kind of model (the key table's kinds): one check, one message.
case_json layers-measured-study '{"run": {"layers_measured": 1}}' \
  'run.layers_measured: applies to a served model (model.hidden > 0) only; this model is the study'
case_json experts-study '{"model": {"experts": 8, "experts_per_token": 2}}' \
  'model.experts: applies to a served model (model.hidden > 0) only'
case_json mlp-tail-served '{"model": {"preset": "llama-3.1-8b", "mlp_intermediate": 4096}, "route": {"calibration": null}}' \
  'model.mlp_intermediate: applies to the study'
case_json layers-measured-over '{"model": "llama-3.1-8b", "run": {"layers_measured": 33}}' 'run.layers_measured: 33, but model llama-3.1-8b has 32 layers'
case_json layers-measured-oracle '{"model": "llama-3.1-8b", "route": {"policy": "oracle"}, "run": {"layers_measured": 4}}' 'run.layers_measured: the oracle'
case_json class-shares '{"workload": {"classes": [{"name": "a", "share": 0.5}, {"name": "b", "share": 0.4}]}}' "workload.classes: the shares must sum to 1 (got 0.9)"
case_json class-name '{"workload": {"classes": [{"name": "a", "share": 0.5}, {"name": "a", "share": 0.5}]}}' 'workload.classes[1].name: "a" names workload.classes[0] too'
case_json big-seed-json '{"run": {"seed": 9007199254740993}}' 'a larger seed, up to 2^64 - 1, goes as a string of digits'
case_json seed-too-big '{"run": {"seed": "18446744073709551616"}}' "run.seed: must be a whole number in [0, 9e15] or a string of digits"
case_json chunked-study-layer '{"serving": {"scheduler": "chunked"}}' 'serving.scheduler: "chunked" needs a model with a dense part'
case_json swap-no-pool '{"serving": {"preemption": "swap"}}' "serving.swap_pages: preemption by swap needs a host pool"
case_json prefix-block '{"serving": {"prefix_caching": true, "prefix_block_tokens": 100}}' "serving.prefix_block_tokens: 100 is not a multiple of the page size"
good '{}' > "$tmp/e.json"
expect_fail unwritable "cannot create the output file" "$pkvsim" run -q -o /nonexistent-dir/out.h5 "$tmp/e.json"
expect_fail bad-seed "--seed" "$pkvsim" run -q --seed -3 "$tmp/e.json"
# Seeds up to 2^64 - 1 keep every digit in /config/resolved (a string beyond what a
# double prints exactly), from --seed and from run.seed's string; one more is refused.
expect_fail big-seed "in [0, 2^64 - 1]" "$pkvsim" run -q --seed 18446744073709551616 "$tmp/e.json"
for how in "--seed 18446744073709551615" ""; do
  if [ -z "$how" ]; then
    sed 's/"run": {/"run": {"seed": "18446744073709551615", /' "$tmp/e.json" > "$tmp/s.json"
  else cp "$tmp/e.json" "$tmp/s.json"; fi
  # shellcheck disable=SC2086
  if "$pkvsim" run -n $how "$tmp/s.json" 2>&1 | grep -q '"seed":[[:space:]]*"18446744073709551615"'; then
    pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL seed-digits ($how): /config/resolved lost the seed's digits"; fi
done
expect_fail bad-backend "--backend" "$pkvsim" run -q --backend tpu "$tmp/e.json"
expect_fail no-args "EXPERIMENT.json" "$pkvsim" run
expect_fail unknown-command "unknown command" "$pkvsim" frobnicate
# A key given twice is an error naming both lines; a UTF-8 byte order mark is accepted.
printf '{"workload": {"preset": "bimodal", "num_requests": 2},\n "serving": {"max_active": 2},\n "serving": {"max_active": 4},\n "route": {"calibration": "%s"}}\n' "$cal" > "$tmp/dup.json"
expect_fail duplicate-key "dup.json:2 and 3: serving: the key is given twice" "$pkvsim" run -q --backend model -o "$tmp/out.h5" "$tmp/dup.json"
printf '\xef\xbb\xbf{"workload": {"preset": "bimodal", "num_requests": 2}, "route": {"calibration": "%s"}}\n' "$cal" > "$tmp/bom.json"
if "$pkvsim" run -q --backend model -o "$tmp/bom.h5" "$tmp/bom.json" 2>"$tmp/stderr"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL bom: $(cat "$tmp/stderr")"; fi
# A full disk or a file-size limit: the OS's reason named, exit 1 (not a crash in
# HDF5's exit handlers), no temporary file left. The file-size limit always; a full
# tmpfs where this machine lets us mount one.
good '{"workload": {"num_requests": 2000, "decode": {"dist": "fixed", "value": 200}}}' > "$tmp/big.json"
expect_disk_full() { # NAME EXPECTED OUT-DIR COMMAND-PREFIX...
  local name=$1 want=$2 dir=$3; shift 3
  "$@" "$pkvsim" run -q --backend model -o "$dir/full.h5" "$tmp/big.json" 2>"$tmp/stderr"; local rc=$?
  if [ $rc -eq 1 ] && grep -qF -- "$want" "$tmp/stderr" && ! ls "$dir"/full.h5* >/dev/null 2>&1; then
    pass=$((pass+1))
  else
    fail=$((fail+1)); echo "FAIL $name: exit $rc, wanted '$want', got: $(cat "$tmp/stderr"); left: $(ls "$dir")"
  fi
}
# SIGXFSZ at its default disposition, as a shell leaves it: pkvsim ignores it itself.
expect_disk_full file-size-limit "HDF5 error while writing /steps: File too large" "$tmp" \
  bash -c 'ulimit -f 200; exec "$@"' limit
# A sweep whose points fit but whose single file does not: refused before libhdf5's
# object copy writes (which crashes when a write fails), no temporary file, the point
# files kept, and the sweep assembles once there is room.
good '{"workload": {"num_requests": 300, "decode": {"dist": "fixed", "value": 200}},
       "run": {"backend": "model", "output": null},
       "sweep": {"axes": [{"path": "run.seed", "values": [1, 2]}]}}' > "$tmp/sweep.json"
expect_sweep_full() { # NAME EXPECTED OUT-DIR COMMAND-PREFIX...
  local name=$1 want=$2 dir=$3; shift 3
  "$@" "$pkvsim" run -q -o "$dir/sw.h5" "$tmp/sweep.json" 2>"$tmp/stderr"; local rc=$?
  local kept; kept=$(ls "$dir/sw.h5.points"/*.h5 2>/dev/null | wc -l)
  if [ $rc -eq 1 ] && grep -qF -- "$want" "$tmp/stderr" && [ "$kept" -eq 2 ] &&
     ! ls "$dir"/sw.h5 "$dir"/sw.h5.tmp.* >/dev/null 2>&1; then
    pass=$((pass+1))
  else
    fail=$((fail+1)); echo "FAIL $name: exit $rc, wanted '$want', $kept point files, got: $(cat "$tmp/stderr"); left: $(ls "$dir")"
  fi
}
mkdir -p "$tmp/sweep-limit"
expect_sweep_full sweep-file-size-limit "sw.h5: File too large" "$tmp/sweep-limit" \
  bash -c 'ulimit -f 800; exec "$@"' limit
if "$pkvsim" run -q -o "$tmp/sweep-limit/sw.h5" "$tmp/sweep.json" 2>"$tmp/stderr" &&
   [ -f "$tmp/sweep-limit/sw.h5" ] && [ ! -e "$tmp/sweep-limit/sw.h5.points" ]; then
  pass=$((pass+1))
else
  fail=$((fail+1)); echo "FAIL sweep-after-limit: $(cat "$tmp/stderr")"
fi
mkdir -p "$tmp/small"
if mount -t tmpfs -o size=256k tmpfs "$tmp/small" 2>/dev/null; then
  expect_disk_full disk-full "No space left on device" "$tmp/small" env
  umount "$tmp/small"
  mount -t tmpfs -o size=1500k tmpfs "$tmp/small"
  expect_sweep_full sweep-disk-full "sw.h5: No space left on device" "$tmp/small" env
  umount "$tmp/small"
fi
# A KV or swap pool whose bookkeeping (12 bytes a page) exceeds what the process may
# use is refused before anything is allocated, naming the setting, the bytes and the
# limit: the machine's available memory (where the page count fits in int32), the
# address-space limit (where this build runs under one: not under AddressSanitizer).
# (Pages past all of the machine's memory: available memory moves while the test runs.)
mem_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
pages=$(( mem_kib * 1024 / 12 + 1000000 ))
if [ "$pages" -lt 2147483647 ]; then
  case_json kv-pages-memory "{\"serving\": {\"kv_pages\": $pages}}" "serving.kv_pages: the simulation's bookkeeping needs"
  case_json swap-pages-memory "{\"serving\": {\"preemption\": \"swap\", \"swap_pages\": $pages}}" "(this machine's available memory); lower serving.swap_pages"
fi
good '{"serving": {"kv_pages": 200000000}}' > "$tmp/e.json"
if bash -c 'ulimit -v 1000000; exec "$@"' limit "$pkvsim" --version >/dev/null 2>&1; then
  expect_fail kv-pages-ulimit-v "(the address-space limit (ulimit -v) less what the process holds); lower serving.kv_pages" \
    bash -c 'ulimit -v 1000000; exec "$@"' limit "$pkvsim" run -q "$tmp/e.json"
fi
# A pool of 100 million pages (1.2 GB of bookkeeping) is set up without touching it: the
# run serves its requests and writes its file (its pages are written as the run reaches them).
good '{"serving": {"kv_pages": 100000000}}' > "$tmp/e.json"
rm -f "$tmp"/out.h5*
if "$pkvsim" run -q "$tmp/e.json" -o "$tmp/out.h5" 2>"$tmp/stderr" && [ -s "$tmp/out.h5" ]; then
  pass=$((pass+1))
else
  fail=$((fail+1)); echo "FAIL huge-pool: $(cat "$tmp/stderr")"
fi
# A clock that cannot advance: steps of ~1e-8 s at 9e11 s of simulated time (double
# precision absorbs them) are an error, not zero latencies.
printf '{"timestamp": 0, "input_length": 100, "output_length": 4}\n{"timestamp": 900000000000000, "input_length": 100, "output_length": 4}\n' > "$tmp/far.jsonl"
case_json clock-stands "{\"workload\": {\"trace\": {\"path\": \"$tmp/far.jsonl\"}, \"arrival\": null, \"prompt\": null, \"decode\": null}, \"serving\": {\"prefill\": {\"base_us\": 0, \"per_token_us\": 0}}, \"route\": {\"overrides\": {\"beta_gbps\": 1000000, \"launch_us\": 0}}}" "cannot advance by its"
# Steps below the 1 ns floor (a route scaled to 1e-12 of its cost would creep the
# clock by ~1e-17 s a step) are refused, naming the calibration.
case_json step-floor '{"route": {"policy": "ref_paged", "overrides": {"route_scale": {"ref_paged": 1e-12}}}}' "below the 1 ns floor of any GPU iteration: the costs of route.calibration"
# An MMPP whose on-periods (1 ns) vanish against the clock once its off-periods (1e9 s)
# have moved it far: an error naming the time without run.max_time_s, the run's end
# with it; and `workload` alike.
mmpp='{"workload": {"arrival": {"process": "mmpp", "rate": null, "rate_on": 10, "rate_off": 0, "mean_on_s": 1e-9, "mean_off_s": 1e9}}}'
case_json mmpp-vanishing "$mmpp" "workload.arrival: the mmpp process cannot advance at t ="
good "$mmpp" > "$tmp/e.json"
expect_fail workload-mmpp-vanishing "the process cannot advance at t =" timeout 20 "$pkvsim" workload "$tmp/e.json"
good "{\"run\": {\"max_time_s\": 100}, ${mmpp:1:-1}}" > "$tmp/e.json"
if timeout 20 "$pkvsim" run -q "$tmp/e.json" 2>"$tmp/stderr"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL mmpp-bounded: exit $?: $(cat "$tmp/stderr")"; fi
# A piecewise rate at 0 for 1e9 s: the search for the next arrival polls the stop flag,
# so SIGTERM ends the run at once with a valid file (exit 143).
good '{"workload": {"arrival": {"process": "piecewise", "rate": null, "points": [[0, 1000], [1, 0], [1e9, 0], [1000000001, 1000]]}, "num_requests": 2000}}' > "$tmp/e.json"
rm -f "$tmp"/out.h5*
"$pkvsim" run -q "$tmp/e.json" 2>"$tmp/stderr" & pid=$!
sleep 1; t0=$(date +%s%N); kill -TERM $pid; wait $pid; rc=$?; ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ $rc -eq 143 ] && [ $ms -lt 2000 ] && [ -f "$tmp/out.h5" ]; then
  pass=$((pass+1))
else
  fail=$((fail+1)); echo "FAIL stop-in-arrival-search: exit $rc after $ms ms: $(cat "$tmp/stderr")"
fi
# pkvsim fit: a run that measured nothing, a missing file, an output that is an input.
good '{}' > "$tmp/e.json"
"$pkvsim" run -q --backend model -o "$tmp/model.h5" "$tmp/e.json" >/dev/null 2>&1
expect_fail fit-unmeasured "no measured steps" "$pkvsim" fit "$tmp/model.h5" -o "$tmp/out.h5"
expect_fail fit-missing "not a readable HDF5 file" "$pkvsim" fit "$tmp/none.h5"
expect_fail fit-no-args "measured runs" "$pkvsim" fit
cp "$tmp/model.h5" "$tmp/keep.h5"
expect_fail fit-onto-input "is an input" "$pkvsim" fit "$tmp/model.h5" -o "$tmp/model.h5"
if cmp -s "$tmp/model.h5" "$tmp/keep.h5"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL fit destroyed its input"; fi
# pkvsim fit onto a base with a section per kind of run: the base written whole, the runs'
# section (the one they applied: the study layer's) refitted, the other as it was; runs
# that do not say which they applied need --section; a bad --section is named.
h200s="$src/experiments/calibration/h200.json"
good "{\"serving\": {\"max_active\": 4, \"kv_pages\": 2000}, \"route\": {\"policy\": \"pkv_workqueue\", \"calibration\": \"$h200s\"}, \"workload\": {\"num_requests\": 6, \"decode\": {\"dist\": \"fixed\", \"value\": 8}}}" > "$tmp/e.json"
"$pkvsim" run -q --backend cpu -o "$tmp/cpu.h5" "$tmp/e.json" >/dev/null 2>&1
"$pkvsim" fit "$tmp/cpu.h5" --base "$h200s" -o "$tmp/fitted.json" >/dev/null 2>&1
check fit-sectioned '"$py" - "$h200s" "$tmp/fitted.json" <<'"'"'PY'"'"'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
top = [k for k in a if k not in ("study_layer", "served_model")]
sys.exit(0 if b["served_model"] == a["served_model"] and "route_model" not in b and
         b["study_layer"]["route_model"] != a["study_layer"]["route_model"] and
         b["study_layer"]["fit"]["files"][0].endswith("cpu.h5") and
         all(b[k] == a[k] for k in top) else 1)
PY'
# An FP8 KV run fits FP8's CTA cap (kv_fp8_cta_gbps, into the section), no route
# model; --keep-gates keeps the section's gates as they are.
good "{\"model\": {\"kv_dtype\": \"fp8_e4m3\"}, \"serving\": {\"max_active\": 4, \"kv_pages\": 2000}, \"route\": {\"policy\": \"pkv_workqueue\", \"calibration\": \"$h200s\"}, \"workload\": {\"num_requests\": 6, \"decode\": {\"dist\": \"fixed\", \"value\": 8}}}" > "$tmp/e8.json"
"$pkvsim" run -q --backend cpu -o "$tmp/cpu8.h5" "$tmp/e8.json" >/dev/null 2>&1
"$pkvsim" fit "$tmp/cpu8.h5" --base "$h200s" --keep-gates -o "$tmp/fitted8.json" >/dev/null 2>&1
check fit-fp8 '"$py" - "$h200s" "$tmp/fitted8.json" <<'"'"'PY'"'"'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
s, t = a["study_layer"], b["study_layer"]
sys.exit(0 if t["kv_fp8_cta_gbps"] > 0 and t["route_model"] == s["route_model"] and
         t["gates"] == s["gates"] and b["served_model"] == a["served_model"] else 1)
PY'
"$pkvsim" run -q --backend cpu -o "$tmp/cpuflat.h5" "$tmp/e.json" -c "$cal" >/dev/null 2>&1
expect_fail fit-which-section "does not say which it ran with: give --section" "$pkvsim" fit "$tmp/cpuflat.h5" --base "$h200s" -o "$tmp/out.json"
expect_fail fit-bad-section '--section: "decode" is not study_layer or served_model' "$pkvsim" fit "$tmp/cpu.h5" --section decode
# model.kv_dtype: a type it does not take is named with the choices; KV of another 16-bit
# type than the activations' is refused on the cpu backend naming the backends that run
# it (a full model's BF16 over FP8 runs there).
case_json kv-dtype-bad '{"model": {"kv_dtype": "int4"}}' 'model.kv_dtype'
good '{"model": {"layers": 2, "hidden": 256, "hq": 4, "hkv": 2, "head_dim": 64, "intermediate": 512, "vocab": 1000, "kv_dtype": "bf16"}, "serving": {"kv_pages": 200}}' > "$tmp/e.json"
expect_fail kv-dtype-cpu-model 'runs on the model backend' "$pkvsim" run -q --backend cpu "$tmp/e.json"
good '{"model": {"layers": 2, "hidden": 256, "hq": 4, "hkv": 2, "head_dim": 64, "intermediate": 512, "vocab": 1000, "dtype": "bf16", "kv_dtype": "fp8_e4m3"}, "workload": {"num_requests": 4, "prompt": {"dist": "fixed", "value": 40}, "decode": {"dist": "fixed", "value": 4}}, "serving": {"kv_pages": 200}}' > "$tmp/e.json"
check dtype-cpu-model '"$pkvsim" run -q --backend cpu -o "$tmp/bf16fp8.h5" "$tmp/e.json"'
# FlashInfer's paths alone, where the backend cannot run them: FP8 KV on the GPU (its
# FP8 path takes one scale for the whole cache), a group of 3 anywhere (refused at the
# engine, before any GPU is looked for).
case_json fi-fp8-gpu '{"model": {"hq": 8, "hkv": 2, "kv_dtype": "fp8_e4m3"}, "route": {"policy": "flashinfer_tc"}, "run": {"backend": "cuda"}}' \
  'FlashInfer'"'"'s paths run 1, 2, 4 or 8 query heads per KV head, over FP16 or BF16 KV (and head_dim 128 on the GPU); this model has 4, KV fp8_e4m3, head_dim 128'
case_json fi-group-3 '{"model": {"hq": 6, "hkv": 2}, "route": {"policy": "flashinfer"}}' 'this model has 3, KV fp16'
# bench kernels names a type it does not take before it looks for a GPU (a build with CUDA)
if "$pkvsim" bench kernels --help >/dev/null 2>&1; then
  expect_fail kbench-dtype '--dtype: "fp8" is not fp16 or bf16' "$pkvsim" bench kernels --dtype fp8
  expect_fail kbench-kv-dtype '--kv-dtype: "int8" is not bf16 or fp8_e4m3' "$pkvsim" bench kernels --dtype bf16 --kv-dtype int8
  # a verify step's rows hold their query tokens
  expect_fail kbench-q-len '--q-len 9: case a has a row of 8 tokens' "$pkvsim" bench kernels --q-len 9 --cases 'a:8'
fi
# A study-layer run on a calibration with a served model's section only: refused, naming
# the file and the section.
case_json study-on-served "{\"route\": {\"calibration\": \"$src/experiments/calibration/h100-sxm-derived.json\"}}" \
  'h100-sxm-derived.json: no "study_layer" section, which a run of this kind reads (the file has: served_model)'
# --help and --version answer
# pkvsim calibrate's options are refused before it looks for a GPU (a build with CUDA)
if "$pkvsim" calibrate --help >/dev/null 2>&1; then
  for g in 3 4,4 4, "" 1,2,4,8,1; do
    expect_fail "calibrate-groups-$g" "--groups" "$pkvsim" calibrate --groups "$g" -o "$tmp/out.h5"
  done
fi
if "$pkvsim" --help | grep -q "run EXPERIMENT.json" && "$pkvsim" --version | grep -q "pkvsim"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL help/version"; fi
# Swap with prefix caching can strand requests (issue 33): a swapped-out request's cached
# blocks stay referenced on the GPU, the queue's head needs more pages than are left, and
# nothing runs to free any. The run stops with an error naming them, not exit 0.
cat > "$tmp/stranded.json" <<JSON
{"name": "s", "model": {"hq": 32, "hkv": 8, "head_dim": 128, "page_size": 16},
 "workload": {"arrival": {"process": "poisson", "rate": 500},
   "prompt": {"dist": "uniform", "min": 1, "max": 3000}, "decode": {"dist": "fixed", "value": 1000},
   "num_requests": 20, "max_context": 4352, "shared_prefix_tokens": 256},
 "serving": {"max_active": 4, "kv_pages": 330, "preemption": "swap", "swap_pages": 50,
   "prefix_caching": true, "prefix_block_tokens": 16, "prefill": {"base_us": 200, "per_token_us": 0.1}},
 "route": {"policy": "pkv_workqueue", "calibration": "$cal"},
 "run": {"output": "$tmp/out.h5", "backend": "model"}}
JSON
expect_fail stranded "the run cannot finish: 15 requests are still in it" "$pkvsim" run -q "$tmp/stranded.json"

# Without a shared prefix the same pressure cycles (issue 33): the latest request preempted,
# swapped back in and preempted again at the same instant, no decode step ever again. The
# run stops, naming the cycle, instead of hanging.
sed 's/"shared_prefix_tokens": 256/"shared_prefix_tokens": 0/; s/"max_context": 4352/"max_context": 4096/;
     s/"max_active": 4, "kv_pages": 330/"max_active": 2, "kv_pages": 400/; s/"swap_pages": 50/"swap_pages": 200/' \
  "$tmp/stranded.json" > "$tmp/cycle.json"
expect_fail preemption-cycle "the run cannot make progress: 100000 preemptions in a row" \
  timeout 60 "$pkvsim" run -q "$tmp/cycle.json"

# --json naming the run's own output is refused before the run, not after it (issue 33, 7).
good '{}' > "$tmp/e.json"
expect_fail json-is-output "--json $tmp/./out.h5 is the run's output file" \
  "$pkvsim" run -q "$tmp/e.json" -o "$tmp/out.h5" --json "$tmp/./out.h5"

"$pkvsim" run -q "$tmp/e.json" -o "$tmp/r.h5" >/dev/null 2>&1
expect_fail report-csv-is-json "--csv and --json name one file" \
  "$pkvsim" report "$tmp/r.h5" --csv "$tmp/out.h5" --json "$tmp/./out.h5"
# One run given twice, by its name or through a hard link, is refused: it would count as
# two seeds.
expect_fail report-twice "are one file" "$pkvsim" report "$tmp/r.h5" "$tmp/./r.h5"
ln -f "$tmp/r.h5" "$tmp/r-link.h5"
expect_fail report-hard-link "are one file" "$pkvsim" report "$tmp/r.h5" "$tmp/r-link.h5"

# Every command's options come from one table (sim/cmd/cli.c): --help answers, an
# unknown option or a missing value is refused naming the command, a bad count too.
for c in run workload report fit validate "bench sim" "bench traces"; do
  # shellcheck disable=SC2086
  if "$pkvsim" $c --help 2>&1 | grep -qi "usage"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $c --help"; fi
  # shellcheck disable=SC2086
  expect_fail "$c-unknown-option" "pkvsim $c: --no-such-option: unknown option" "$pkvsim" $c --no-such-option x
done
# pkvsim validate and fit --engine: a missing operand, a file that is no validation file,
# an output that is a validation file (left as it was).
expect_fail validate-missing "no-such-file: No such file" "$pkvsim" validate "$tmp/no-such-file"
expect_fail validate-not-validation "validation: missing" "$pkvsim" validate "$src/experiments/quickstart.json"
cp "$src/experiments/validation/vllm-h200-latency-b8.json" "$tmp/v.json"
cp "$tmp/v.json" "$tmp/v.keep"
expect_fail validate-onto-input "is a validation file" "$pkvsim" validate "$tmp/v.json" --json "$tmp/v.json"
expect_fail fit-engine-onto-input "is a validation file" "$pkvsim" fit --engine "$src/experiments/engines/vllm@0.6.0.json" "$tmp/v.json" -o "$tmp/v.json"
if cmp -s "$tmp/v.json" "$tmp/v.keep"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL validate destroyed its input"; fi
expect_fail fit-engine-no-files "validation files" "$pkvsim" fit --engine "$src/experiments/engines/vllm@0.6.0.json"
expect_fail report-missing-value "pkvsim report: --baseline: unknown option, or its value is missing" \
  "$pkvsim" report --baseline
expect_fail bench-sim-steps "--steps: \"0\" is not a positive integer" "$pkvsim" bench sim --steps 0 --out "$tmp/out.h5"
# A benchmark's table is written whole or not at all: an unwritable one is named, and a
# finished one leaves no temporary beside it.
expect_fail bench-traces-unwritable "bench traces: cannot write /nonexistent-dir/t.txt" "$pkvsim" bench traces --rows 100 --out /nonexistent-dir/t.txt
check bench-traces-whole '"$pkvsim" bench traces --rows 100 --out "$tmp/bt.txt" >/dev/null && grep -q "| azure" "$tmp/bt.txt" && ! ls "$tmp"/bt.txt.tmp.* >/dev/null 2>&1'
expect_fail fit-too-many-tests "more than 256 --test values" "$pkvsim" fit $(for i in $(seq 257); do printf -- "--test x "; done) a.h5
# A served model's pool against the calibration's GPU memory: 65,536 pages of
# Llama-3.1-8B (128 GiB beside 15 GiB of weights) are refused on the H200 with the most
# that fit; left out, the pool is sized to them (the resolved configuration says so).
h200="$src/experiments/calibration/h200.json"
case_json kv-pages-gpu "{\"model\": \"llama-3.1-8b\", \"serving\": {\"kv_pages\": 65536}, \"route\": {\"calibration\": \"$h200\"}}" \
  "128.0 GiB; with 15.0 GiB of weights"
good "{\"model\": \"llama-3.1-8b\", \"route\": {\"calibration\": \"$h200\"}}" > "$tmp/e.json"
check kv-pages-sized '"$pkvsim" run -n "$tmp/e.json" | grep -Eq "\"kv_pages\":[[:space:]]*56526,"'
# Prompts past workload.max_context are refused (an engine's answer) or, with
# workload.over_context "cut", cut; the summary says how many (all five of 9,000 tokens in
# 8,192), in one run and in a fleet (whose router draws them).
for fl in "" ', "fleet": {"replicas": 2}'; do
  name=${fl:+-fleet}
  good "{\"workload\": {\"prompt\": {\"dist\": \"fixed\", \"value\": 9000}, \"max_context\": 8192}, \"serving\": {\"kv_pages\": 4000}$fl}" > "$tmp/e.json"
  check refused-run$name '"$pkvsim" run "$tmp/e.json" 2>/dev/null | grep -q "refused      5 requests past workload.max_context"'
  good "{\"workload\": {\"prompt\": {\"dist\": \"fixed\", \"value\": 9000}, \"max_context\": 8192, \"over_context\": \"cut\"}, \"serving\": {\"kv_pages\": 4000}$fl}" > "$tmp/e.json"
  check clamped-run$name '"$pkvsim" run "$tmp/e.json" 2>/dev/null | grep -q "WARNING      5 requests had their prompt or decode length cut"'
done
case_json over-context-bad '{"workload": {"over_context": "truncate"}}' 'workload.over_context'
# A mistyped preset lists the presets and offers the closest; a trace without the
# default columns shows its header and names workload.trace.columns.
case_json preset-typo '{"model": "llama-3-8b"}' 'did you mean "llama-3.1-8b"?'
printf 't,a,b\n0,1,2\n' > "$tmp/cols.csv"
case_json trace-columns "{\"workload\": {\"trace\": {\"path\": \"$tmp/cols.csv\"}, \"prompt\": null, \"decode\": null, \"arrival\": null, \"num_requests\": null}}" \
  '(it has: t,a,b); name the trace'"'"'s columns in workload.trace.columns'
# A model's own context bounds workload.max_context (mistral-7b took 50,000-token
# prompts) and is its default.
case_json past-model-context '{"model": "mistral-7b", "workload": {"max_context": 50000}}' \
  "workload.max_context: 50000 tokens is past mistral-7b's context of 32768"
good '{"model": "mistral-7b"}' > "$tmp/e.json"
check model-context-default '"$pkvsim" run -n "$tmp/e.json" | grep -q "\"max_context\":[[:space:]]*32768"'
# A mixture of experts: its keys whole, its routing only where it has experts, and the
# backends that cannot run it refuse it by name.
case_json moe-k-above-experts '{"model": {"preset": "mixtral-8x7b", "experts_per_token": 9}, "route": {"calibration": null}}' \
  'model.experts_per_token: 9 must be 1 to model.experts (8)'
case_json moe-keys-without-experts '{"model": {"preset": "llama-3.1-8b", "expert_intermediate": 768}, "route": {"calibration": null}}' \
  'give model.experts too'
case_json moe-routing-dense '{"model": {"preset": "llama-3.1-8b", "expert_routing": {"law": "zipf"}}, "route": {"calibration": null}}' \
  'model.expert_routing: routes a mixture of experts'
case_json moe-ep-one-gpu '{"model": {"preset": "qwen3-30b-a3b", "expert_parallel": true}, "route": {"calibration": null}}' \
  'model.expert_parallel: spreads the experts over the tensor-parallel GPUs'
case_json moe-law '{"model": {"preset": "qwen3-30b-a3b", "expert_routing": {"law": "pareto"}}, "route": {"calibration": null}}' \
  'model.expert_routing.law'
good '{"model": "qwen3-30b-a3b", "route": {"calibration": null}}' > "$tmp/e.json"
expect_fail moe-cpu-too-big 'the cpu backend runs a full model in host memory' \
  "$pkvsim" run -q -b cpu "$tmp/e.json"
# the cpu backend runs a small one's routed experts; shared ones on the model backend only
moe='{"layers": 2, "hidden": 256, "hq": 4, "hkv": 2, "head_dim": 64, "intermediate": 0, "experts": 8, "experts_per_token": 2, "expert_intermediate": 128, "vocab": 1000}'
good '{"model": '"$moe"', "serving": {"kv_pages": 200}, "workload": {"prompt": {"dist": "fixed", "value": 64}}}' > "$tmp/e.json"
check moe-cpu-runs '"$pkvsim" run -q -b cpu "$tmp/e.json" && [ -f "$tmp/out.h5" ]'
good '{"model": '"${moe%\}}"', "shared_experts": 1}, "serving": {"kv_pages": 200}}' > "$tmp/e.json"
expect_fail moe-cpu-shared 'the cpu backend runs the routed experts only' \
  "$pkvsim" run -q -b cpu "$tmp/e.json"
# Speculative decoding: on a served model, a dense draft, the model backend.
# a prompt chunk inside a decode step: refused before the run starts on the cpu backend
case_json chunked-cpu '{"model": "llama-3.1-8b", "serving": {"scheduler": "chunked"}, "run": {"backend": "cpu"}, "route": {"calibration": null}}' \
  'serving.scheduler "chunked" runs prompt chunks inside decode steps, which the cpu backend does not'
case_json chunked-cpu-engine '{"model": "llama-3.1-8b", "serving": {"engine": "vllm@0.9.0"}, "run": {"backend": "cpu"}, "route": {"calibration": null}}' \
  "serving.engine's profile's) runs prompt chunks"
case_json spec-study-layer '{"serving": {"speculative": {"method": "ngram"}}}' \
  'serving.speculative.method: applies to a served model'
case_json spec-draft-moe '{"model": "llama-3.1-8b", "serving": {"speculative": {"method": "draft", "draft_model": "mixtral-8x7b"}}, "route": {"calibration": null}}' \
  'serving.speculative.draft_model: mixtral-8x7b is not a dense served model'
case_json spec-draft-typo '{"model": "llama-3.1-8b", "serving": {"speculative": {"method": "draft", "draft_model": "llama-1b"}}, "route": {"calibration": null}}' \
  'serving.speculative.draft_model'
case_json spec-sd-wide '{"model": "llama-3.1-8b", "serving": {"speculative": {"method": "ngram", "acceptance": 0.9, "acceptance_sd": 0.4}}, "route": {"calibration": null}}' \
  'serving.speculative.acceptance_sd: 0.4 is too wide for a mean of 0.9'
# the cpu backend runs a small model's verify steps, every one checked against the reference
good '{"model": {"layers": 2, "hidden": 256, "hq": 4, "hkv": 2, "head_dim": 64, "intermediate": 512, "vocab": 1000}, "serving": {"kv_pages": 400, "speculative": {"method": "ngram", "tokens": 3}}, "workload": {"prompt": {"dist": "fixed", "value": 64}}, "run": {"check_every": 1}}' > "$tmp/e.json"
check spec-cpu-runs '"$pkvsim" run -q -b cpu "$tmp/e.json" && [ -f "$tmp/out.h5" ]'
# Named columns with a time column say its unit (milliseconds read as seconds ran 1000
# times slower, silently).
case_json trace-unit "{\"workload\": {\"trace\": {\"path\": \"$tmp/cols.csv\", \"columns\": {\"time\": \"t\", \"prompt\": \"a\", \"decode\": \"b\"}}, \"prompt\": null, \"decode\": null, \"arrival\": null, \"num_requests\": null}}" \
  'workload.trace.columns.unit: required where a time column is named'
# `bench` lists its benchmarks (--help: on stdout, exit 0); an unknown one is named;
# `run --help` is the run's own text; --version names the revision.
check bench-help '"$pkvsim" bench --help | grep -q "bench fleet"'
expect_fail bench-alone "bench NAME" "$pkvsim" bench
expect_fail bench-unknown 'unknown benchmark "foo"' "$pkvsim" bench foo
check run-help '"$pkvsim" run --help | head -1 | grep -q "^usage: pkvsim run EXPERIMENT.json"'
check version-revision '"$pkvsim" --version | grep -q "revision [^ ]"'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
