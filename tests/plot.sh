#!/usr/bin/env bash
# analysis/plot_run.py draws a PNG of a run, and refuses a file that is not a pkvsim
# output with a message; analysis/plot.py draws each of its plots from a small sweep
# and a run, and names what is wrong with a file or an axis. Usage: plot.sh PKVSIM SOURCE_DIR
set -u
pkvsim=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import h5py, matplotlib" 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "FAIL: no python3 with h5py and matplotlib (scripts/deps.sh installs them)"; exit 1; }
"$pkvsim" run -q "$src/experiments/quickstart.json" -o "$tmp/run.h5" || { echo "FAIL run"; exit 1; }
pass=0; fail=0
check() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $1"; fi; }
"$py" "$src/analysis/plot_run.py" "$tmp/run.h5" -o "$tmp/run.png" > /dev/null 2> "$tmp/err"
check "plot exit code" '[ $? -eq 0 ]'
check "a PNG was written" '[ "$(head -c 8 "$tmp/run.png" | od -An -tx1 | tr -d " \n")" = "89504e470d0a1a0a" ]'
check "the PNG is not empty" '[ $(stat -c %s "$tmp/run.png") -gt 20000 ]'
echo "not hdf5" > "$tmp/bad.h5"
"$py" "$src/analysis/plot_run.py" "$tmp/bad.h5" > /dev/null 2> "$tmp/err"; rc=$?
check "bad file refused (exit $rc)" '[ $rc -ne 0 ] && grep -q "bad.h5: not a complete pkvsim output" "$tmp/err"'
# Under a python3 without h5py (where this machine has one) plot.py runs itself under
# /usr/bin/python3, which has them, and says so.
if command -v python3 >/dev/null && ! python3 -c "import h5py" 2>/dev/null && [ "$py" = /usr/bin/python3 ]; then
  python3 "$src/analysis/plot.py" --help > "$tmp/out" 2> "$tmp/err"; rc=$?
  check "plot.py under a python3 without h5py (exit $rc: $(head -c 200 "$tmp/err"))" \
    '[ $rc -eq 0 ] && grep -q "running under /usr/bin/python3" "$tmp/err" && grep -q "^usage" "$tmp/out"'
fi
# analysis/plot.py: every plot from a small sweep (three policies x two rates) and a run.
cat > "$tmp/sw.json" <<EOF
{"name": "sw", "workload": {"arrival": {"process": "poisson", "rate": 10},
  "prompt": {"dist": "fixed", "value": 2000}, "decode": {"dist": "fixed", "value": 8},
  "num_requests": 12}, "serving": {"max_active": 8},
 "route": {"calibration": "$src/experiments/calibration/h200.json"},
 "sweep": {"axes": [{"path": "route.policy", "values": ["ref_paged", "pkv_workqueue", "adaptive"]},
                    {"path": "workload.arrival.rate", "values": [50, 3200]}]}}
EOF
"$pkvsim" run -q --backend model "$tmp/sw.json" -o "$tmp/sw.h5" || { echo "FAIL sweep run"; exit 1; }
png() { [ "$(head -c 8 "$1" 2>/dev/null | od -An -tx1 | tr -d " \n")" = "89504e470d0a1a0a" ]; }
plot() { # NAME OUT.png ARGS...
  local name=$1 out=$2; shift 2
  "$py" "$src/analysis/plot.py" "$@" -o "$out" > /dev/null 2> "$tmp/err"
  check "plot.py $name (exit $?: $(head -c 300 "$tmp/err"))" 'png "$out"'
}
plot curve "$tmp/c.png" curve "$tmp/sw.h5"
plot threshold "$tmp/t.png" threshold "$tmp/sw.h5" --x workload.arrival.rate --ratio adaptive/ref_paged
plot cdf "$tmp/cdf.png" cdf "$tmp/sw.h5:0" "$tmp/sw.h5:5" "$tmp/run.h5" --metric tpot
plot steps "$tmp/s.png" steps "$tmp/run.h5"
plot timeline "$tmp/tl.png" timeline "$tmp/run.h5"
# a fleet: an autoscaled one's timeline (one line a replica) and replicas views
"$pkvsim" run -q "$src/experiments/fleet/autoscale_diurnal.json" -o "$tmp/fleet.h5" || { echo "FAIL fleet run"; exit 1; }
plot "fleet timeline" "$tmp/ftl.png" timeline "$tmp/fleet.h5"
plot replicas "$tmp/rep.png" replicas "$tmp/fleet.h5"
"$py" "$src/analysis/plot.py" replicas "$tmp/run.h5" -o "$tmp/x.png" > /dev/null 2> "$tmp/err"; rc=$?
check "replicas of a run without a fleet refused (exit $rc)" '[ $rc -ne 0 ] && grep -q "no /replicas" "$tmp/err"'
"$py" "$src/analysis/plot.py" curve "$tmp/run.h5" -o "$tmp/x.png" > /dev/null 2> "$tmp/err"; rc=$?
check "curve of a run refused (exit $rc)" '[ $rc -ne 0 ] && grep -q "not a sweep file" "$tmp/err"'
"$py" "$src/analysis/plot.py" curve "$tmp/sw.h5" --by serving.max_active -o "$tmp/x.png" > /dev/null 2> "$tmp/err"; rc=$?
check "an axis the sweep lacks named (exit $rc)" '[ $rc -ne 0 ] && grep -q "no axis \"serving.max_active\"" "$tmp/err"'
check "plot.py is executable" '[ -x "$src/analysis/plot.py" ]'
# --hline draws an SLO's limit.
plot "curve --hline" "$tmp/ch.png" curve "$tmp/sw.h5" --hline 5:SLO --hline 10
# pkvsim plan's --json: cost against load
"$pkvsim" plan "$src/experiments/plan/code_h200_h100.json" -q --json "$tmp/plan.json" > /dev/null ||
  { echo "FAIL plan"; exit 1; }
plot plan "$tmp/plan.png" plan "$tmp/plan.json"
# Paper-ready: log axes; a sweep point's label from its swept values; the figure list
# of --help is the index's; points that would be averaged over an unnamed axis refused.
plot "curve --logy" "$tmp/cl.png" curve "$tmp/sw.h5" --logx --logy
"$py" - "$src/analysis" "$tmp/sw.h5" > "$tmp/out" 2>&1 <<'PY'
import sys
sys.argv = [sys.argv[0]] + sys.argv[1:]
sys.path.insert(0, sys.argv[1])
import h5py, plot
ix = h5py.File(sys.argv[2])["sweep/index"]
figs = sorted(k for k in ix if "." not in k and k not in ("point", "status", "error"))
assert figs == sorted(plot.FIGURES), (figs, sorted(plot.FIGURES))
pol = [x.decode() for x in ix["route.policy"][:]]
rate = ix["workload.arrival.rate"][:]
lab = plot.run_label(sys.argv[2] + ":1")
want = f"policy = {pol[1]}; rate = {rate[1]:g}"
assert lab.replace(".0;", ";").replace(".0", "") == want.replace(".0", ""), (lab, want)
print("ok")
PY
check "figure list and sweep-point labels ($(tail -c 300 "$tmp/out"))" 'grep -q "^ok$" "$tmp/out"'
sed 's/"values": \[50, 3200\]}\]/"values": [50, 3200]}, {"path": "serving.max_active", "values": [4, 8]}]/' \
  "$tmp/sw.json" > "$tmp/sw3.json"
"$pkvsim" run -q --backend model "$tmp/sw3.json" -o "$tmp/sw3.h5" || { echo "FAIL sweep3 run"; exit 1; }
"$py" "$src/analysis/plot.py" threshold "$tmp/sw3.h5" --x workload.arrival.rate --ratio adaptive/ref_paged \
  -o "$tmp/x.png" > /dev/null 2> "$tmp/err"; rc=$?
check "threshold refuses averaging over serving.max_active (exit $rc)" \
  '[ $rc -ne 0 ] && grep -q "differ in serving.max_active" "$tmp/err"'
plot "threshold --by the third axis" "$tmp/t3.png" threshold "$tmp/sw3.h5" --x workload.arrival.rate \
  --ratio adaptive/ref_paged --by serving.max_active --logy
# A curve joins each line's points along one swept axis: two besides --by (the rate and
# serving.max_active, by policy) would zig-zag, and are refused, naming them.
"$py" "$src/analysis/plot.py" curve "$tmp/sw3.h5" -o "$tmp/x.png" > /dev/null 2> "$tmp/err"; rc=$?
check "a curve over two unnamed axes refused (exit $rc)" \
  '[ $rc -ne 0 ] && grep -q "differ in serving.max_active, workload.arrival.rate" "$tmp/err"'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
