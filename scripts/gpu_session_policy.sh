#!/usr/bin/env bash
# One GPU session for the route policy (issue 11), from the repository root on the GPU
# machine with the bundled programs in .bundle/ (BACKEND=model runs the same on a
# machine without one, with build-cpu/pkvsim, to try the script):
#  fixed  every baseline and PersistentKV route fixed (ROUTES), and adaptive with the shipped
#         calibration, on the study's families and the trace replays
#         (bucketed_b1, bimodal_b8 and experiments/policy/*.json);
#  fit    pkvsim fit on half of those runs, the other half held out -> OUT/fitted.json;
#  eval   adaptive with the fitted calibration (CAL_FIT, default OUT/fitted.json), and the
#         oracle (route.oracle_repeats 3) on ORACLE_EXPS (unset: every experiment;
#         empty: none);
#         with REPEAT=1, per experiment adaptive, then every fixed route again (POLICY~2),
#         then adaptive again (adaptive_fitted~2): repeats in the same lease, interleaved,
#         which bench/policy_bench.py pools and whose spread it prints;
#  table  bench/policy_bench.py over everything -> OUT/policy_table.md.
# MODEL (e.g. llama-3.1-8b): every experiment run with that model (copies under
# OUT/exps; run.layers_measured LAYERS, DECODE tokens a request and NUM_REQUESTS
# requests where given, the last two not for trace replays) and fitted on BASE_CAL
# (default experiments/calibration/h200.json; for llama-3.1-8b, h200.json).
# HELDOUT_SEED=N: every fixed route also runs each experiment with --seed N (labelled
# ROUTE~seedN; a trace replay, which no seed changes, on the trace's next requests;
# bucketed_b1's lengths do not depend on the seed either), the fit takes the
# experiments' own seeds and holds out the seed-N runs of every experiment
# (fitted.json; the split by experiment above is fitted too, as
# fitted_by_experiment.json), and adaptive runs on both seeds (pooled by policy_bench).
# DEADLINE (seconds from the start): runs that would start later are skipped (named),
# so that a call inside the device's limit still brings its tables back.
# Usage: gpu_session_policy.sh OUTDIR [STAGES] (default "fixed fit eval table").
set -uo pipefail
out=${1:?usage: gpu_session_policy.sh OUTDIR [STAGES]}
stages=${2:-fixed fit eval table}
backend=${BACKEND:-cuda}
if [ "$backend" = cuda ]; then pkvsim=(.bundle/run pkvsim); else pkvsim=(build-cpu/pkvsim); fi
mkdir -p "$out/runs"
has() { [[ " $stages " == *" $1 "* ]]; }
t0=$(date +%s)
exps=${EXPS:-"experiments/bucketed_b1.json experiments/bimodal_b8.json $(ls experiments/policy/*.json)"}
base_cal=${BASE_CAL:-experiments/calibration/h200.json}
if [ -n "${MODEL:-}" ]; then # copies with the model (their paths made absolute)
  mkdir -p "$out/exps"
  copies=""
  for e in $exps; do
    python3 - "$e" "$out/exps/$(basename "$e")" "$MODEL" "${LAYERS:-}" "${DECODE:-}" "${NUM_REQUESTS:-}" <<'PY'
import json, os, sys
src, dst, model, layers, decode, nreq = sys.argv[1:]
e = json.load(open(src))
d = os.path.dirname(os.path.abspath(src))
e["model"] = model
if layers:
    e.setdefault("run", {})["layers_measured"] = int(layers)
if decode and "trace" not in e["workload"]:  # a trace gives its own lengths
    e["workload"]["decode"] = {"dist": "fixed", "value": int(decode)}
if nreq and "trace" not in e["workload"]:
    e["workload"]["num_requests"] = int(nreq)
cal = e.get("route", {}).get("calibration")
if cal and not os.path.isabs(cal):
    e["route"]["calibration"] = os.path.normpath(os.path.join(d, cal))
t = e["workload"].get("trace")
if t and not os.path.isabs(t["path"]):
    t["path"] = os.path.normpath(os.path.join(d, t["path"]))
json.dump(e, open(dst, "w"), indent=1)
PY
    copies="$copies $out/exps/$(basename "$e")"
  done
  exps=$copies
  oracle_exps=""
  for e in ${ORACLE_EXPS:-}; do oracle_exps="$oracle_exps $out/exps/$(basename "$e")"; done
  [ -n "${ORACLE_EXPS+set}" ] && ORACLE_EXPS=$oracle_exps
fi
# Half of the experiments are fitted, the other half held out.
fit_set="bucketed_b1 bimodal_b8 zipf_b8 trace_azure_x1 trace_azure_x256 trace_mooncake_x16"
routes=${ROUTES:-"ref_paged pkv_bucket pkv_workqueue flashinfer flashinfer_tc"}
late() { [ -n "${DEADLINE:-}" ] && (( $(date +%s) - t0 > DEADLINE )); }
# The held-out seed's copy of a trace replay (whose requests no seed changes): the
# same number of requests from where the experiment's own end (workload.trace.window_s
# from the first_n-th request's time).
heldout() { # experiment -> the path to run with --seed HELDOUT_SEED
  local e=$1 c="$out/heldout/$(basename "$1")"
  grep -q '"trace"' "$e" || { echo "$e"; return; }
  mkdir -p "$out/heldout"
  python3 - "$e" "$c" <<'PY'
import csv, datetime, json, os, sys
src, dst = sys.argv[1:]
e = json.load(open(src))
d = os.path.dirname(os.path.abspath(src))
t = e["workload"]["trace"]
t["path"] = os.path.normpath(os.path.join(d, t["path"]))
cal = e.get("route", {}).get("calibration")
if cal and not os.path.isabs(cal):
    e["route"]["calibration"] = os.path.normpath(os.path.join(d, cal))
if t["path"].endswith(".jsonl"):  # Mooncake's: timestamp in ms
    times = [json.loads(line)["timestamp"] / 1e3 for line in open(t["path"])]
else:  # Azure's: TIMESTAMP as a date and time
    rows = list(csv.reader(open(t["path"])))[1:]
    times = [datetime.datetime.fromisoformat(r[0][:26]).timestamp() for r in rows]
t["window_s"] = [times[t["first_n"]] - times[0], 1e12]
json.dump(e, open(dst, "w"), indent=1)
PY
  echo "$c"
}
run() { # experiment, policy label, extra options...
  local e=$1 label=$2 n
  n=$(basename "$e" .json)
  shift 2
  [[ "$label" == *"~seed"* ]] && e=$(heldout "$e")
  if late; then
    echo "SKIPPED $n $label (past DEADLINE)"
    return
  fi
  "${pkvsim[@]}" run "$e" --backend "$backend" -q -o "$out/runs/${n}__${label}.h5" "$@" \
    > "$out/runs/${n}__${label}.log" 2>&1 || echo "FAILED $n $label: $(tail -2 "$out/runs/${n}__${label}.log")"
}
if has fixed; then
  for e in $exps; do
    for r in $routes; do
      run "$e" "$r" --route "$r"
      [ -z "${HELDOUT_SEED:-}" ] || run "$e" "$r~seed$HELDOUT_SEED" --route "$r" --seed "$HELDOUT_SEED"
    done
    [ -n "${NO_SHIPPED:-}" ] || run "$e" adaptive_shipped --route adaptive
    echo "fixed $(basename "$e" .json) done at $(( $(date +%s) - t0 )) s"
  done
fi
fit_split() { # split (seed or experiment), output name
  local fit=() test=() f n exp label
  for f in "$out"/runs/*__*.h5; do
    n=$(basename "$f" .h5)
    exp=${n%%__*} label=${n#*__}
    if [ "$1" = seed ]; then
      if [[ " $routes " == *" $label "* ]]; then fit+=("$f")
      elif [[ " $routes " == *" ${label%~seed$HELDOUT_SEED} "* ]]; then test+=(--test "$f"); fi
      continue
    fi
    [[ " $routes " == *" $label "* ]] || continue
    if [[ " $fit_set " == *" $exp "* ]]; then fit+=("$f"); else test+=(--test "$f"); fi
  done
  "${pkvsim[@]}" fit "${fit[@]}" "${test[@]}" --base "$base_cal" \
    -o "$out/$2.json" --out "$out/${2/fitted/fit_table}.md" > "$out/$2.log" 2>&1
  echo "fit ($1 held out) rc=$? at $(( $(date +%s) - t0 )) s"
  grep -E "^\| (route|ref|pkv|flash)|gates" "$out/$2.log"
}
if has fit; then
  if [ -n "${HELDOUT_SEED:-}" ]; then
    fit_split seed fitted
    fit_split experiment fitted_by_experiment
  else
    fit_split experiment fitted
  fi
fi
if has eval; then
  cal_fit=${CAL_FIT:-$out/fitted.json}
  for e in $exps; do
    [ -f "$cal_fit" ] || break
    run "$e" adaptive_fitted --route adaptive -c "$cal_fit"
    [ -z "${HELDOUT_SEED:-}" ] ||
      run "$e" "adaptive_fitted~seed$HELDOUT_SEED" --route adaptive -c "$cal_fit" --seed "$HELDOUT_SEED"
    [ -n "${REPEAT:-}" ] || continue
    for r in $routes; do run "$e" "$r~2" --route "$r"; done
    run "$e" adaptive_fitted~2 --route adaptive -c "$cal_fit"
    echo "eval $(basename "$e" .json) done at $(( $(date +%s) - t0 )) s"
  done
  echo "adaptive (fitted) done at $(( $(date +%s) - t0 )) s"
  for e in ${ORACLE_EXPS-$exps}; do
    if late; then
      echo "SKIPPED $(basename "$e" .json) oracle (past DEADLINE)"
      continue
    fi
    python3 - "$e" "$out/oracle.json" <<'PY'
import json, os, sys
e = json.load(open(sys.argv[1]))
e["route"]["oracle_repeats"] = 3
d = os.path.dirname(os.path.abspath(sys.argv[1]))
# Paths relative to the experiment's folder stay valid from the copy's.
for sec, key in (("route", "calibration"),):
    if key in e.get(sec, {}):
        e[sec][key] = os.path.join(d, e[sec][key])
t = e["workload"].get("trace")
if t: t["path"] = os.path.join(d, t["path"])
json.dump(e, open(sys.argv[2], "w"))
PY
    n=$(basename "$e" .json)
    "${pkvsim[@]}" run "$out/oracle.json" --backend "$backend" -q --route oracle \
      -o "$out/runs/${n}__oracle.h5" > "$out/runs/${n}__oracle.log" 2>&1 ||
      echo "FAILED $n oracle: $(tail -2 "$out/runs/${n}__oracle.log")"
    echo "oracle $n done at $(( $(date +%s) - t0 )) s"
  done
fi
if has table; then
  python3 bench/policy_bench.py "$out"/runs/*.h5 | tee "$out/policy_table.md"
fi
echo "gpu_session_policy: $(( $(date +%s) - t0 )) s"
