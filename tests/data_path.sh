#!/usr/bin/env bash
# data_path.sh PKVSIM: an installed pkvsim finds its presets and calibrations beside
# itself (../share/pkvsim) or under $PKVSIM_DATA, not only in its source tree.
set -u
pkvsim=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 n=0
check() { n=$((n + 1)); if eval "$2"; then :; else echo "FAIL $1"; fails=$((fails + 1)); fi; }
mkdir -p "$tmp/bin" "$tmp/share/pkvsim/experiments/models" "$tmp/share/pkvsim/experiments/calibration" "$tmp/data/experiments/models"
cp "$pkvsim" "$tmp/bin/pkvsim"
# presets that exist only where they were installed
echo '{"layers": 2, "hidden": 256, "hq": 4, "hkv": 2, "head_dim": 64, "intermediate": 512, "vocab": 1000}' \
  > "$tmp/share/pkvsim/experiments/models/installed-only.json"
echo '{"layers": 3, "hidden": 256, "hq": 4, "hkv": 2, "head_dim": 64, "intermediate": 512, "vocab": 1000}' \
  > "$tmp/data/experiments/models/env-only.json"
src=$(cd "$(dirname "$0")/.." && pwd)
for f in gpus.json h200.json; do
  cp "$src/experiments/calibration/$f" "$tmp/share/pkvsim/experiments/calibration/$f"
done
exp() {
  cat > "$tmp/e.json" <<JSON
{"name": "p", "model": "$1", "workload": {"arrival": {"process": "poisson", "rate": 50},
 "prompt": {"dist": "uniform", "min": 10, "max": 50}, "decode": {"dist": "uniform", "min": 2, "max": 5},
 "num_requests": 4, "max_context": 256}, "serving": {"max_active": 2, "kv_pages": 64},
 "run": {"backend": "model", "output": "$tmp/o.h5"}}
JSON
}
exp installed-only
"$tmp/bin/pkvsim" run -q "$tmp/e.json" > "$tmp/out" 2>&1; rc=$?
check "a preset beside the installed program (exit $rc: $(head -c 300 "$tmp/out"))" '[ $rc -eq 0 ]'
check "the calibration beside it is route.gpu's (gpus.json beside it)" \
  'strings "$tmp/o.h5" | grep -q "share/pkvsim/experiments/calibration/h200.json"'
exp env-only
PKVSIM_DATA="$tmp/data" "$tmp/bin/pkvsim" run -q "$tmp/e.json" > "$tmp/out" 2>&1; rc=$?
check "a preset under \$PKVSIM_DATA (exit $rc: $(head -c 300 "$tmp/out"))" '[ $rc -eq 0 ]'
"$tmp/bin/pkvsim" run -q "$tmp/e.json" > "$tmp/out" 2>&1; rc=$?
check "a preset found nowhere is refused, naming it (exit $rc)" \
  '[ $rc -ne 0 ] && grep -q "env-only" "$tmp/out"'
echo "$((n - fails)) passed, $fails failed"
[ $fails -eq 0 ]
