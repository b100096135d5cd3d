#!/usr/bin/env bash
# analysis/plot_run.py draws a PNG of a run, and refuses a file that is not a pkvsim
# output with a message. Usage: plot.sh PKVSIM SOURCE_DIR
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
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
