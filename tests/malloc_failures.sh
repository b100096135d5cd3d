#!/usr/bin/env bash
# Allocation failures (issue 15, class 9; issue 33, item 6): a small model-backend run
# with its N-th allocation failing, for every STEP-th allocation point of the run (STEP from the
# environment, default 3; 1 tries them all), two at a time. Each must end in a clean
# error (exit 1, a "pkvsim:" message, no temporary file) or survive (exit 0 and an
# output that `pkvsim report` reads). Allocations made inside libhdf5 and libgsl are
# left out: their own allocation failures crash inside them (Debian's HDF5 1.10 and
# GSL; tests/README.md names them); so are those before main (the libraries' static
# initializers). SKIP_LIB="" from the environment puts them back in (a probe of their
# crashes, not a test that passes).
# Usage: malloc_failures.sh PKVSIM SOURCE_DIR
set -u
pkvsim=${1:?usage: malloc_failures.sh PKVSIM SOURCE_DIR}; src=${2:?}
step=${STEP:-3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -O1 -shared -fPIC -o "$tmp/failmalloc.so" "$src/bench/failmalloc.c" -ldl || exit 1
cat > "$tmp/small.json" <<JSON
{"workload": {"arrival": {"process": "poisson", "rate": 50}, "prompt": {"dist": "fixed", "value": 1000},
  "decode": {"dist": "fixed", "value": 5}, "num_requests": 4},
 "route": {"calibration": "$src/experiments/calibration/default.json"}}
JSON
# The same for a two-point sweep (every SWEEP_STEP-th point, default 80: its setup,
# its points' runs, its assembly) and for `workload` (every STEP-th).
python3 - "$tmp/small.json" "$tmp/sweep.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
e["sweep"] = {"axes": [{"path": "serving.max_active", "values": [2, 4]}]}
json.dump(e, open(sys.argv[2], "w"))
PY
export SKIP_LIB=${SKIP_LIB-libhdf5:libgsl} LD_PRELOAD="$tmp/failmalloc.so"
# cmd NAME DIR: the command line of case NAME writing into DIR
cmd() {
  case $1 in
    run) echo "$pkvsim run -q $tmp/small.json --backend model -o $2/o.h5" ;;
    sweep) echo "$pkvsim run -q $tmp/sweep.json --backend model -o $2/o.h5" ;;
    workload) echo "$pkvsim workload $tmp/small.json" ;;
  esac
}
one() { # one NAME N: allocation N failing; prints "NAME N clean|survived|bad detail"
  local name=$1 i=$2 d="$tmp/r$1$2"; mkdir -p "$d"
  FAIL_AT=$i timeout 60 $(cmd "$name" "$d") > "$d/out" 2>&1; local rc=$? left
  left=$(ls -d "$d"/*tmp* 2>/dev/null | wc -l) # a sweep's point folder stays (resume)
  if [ $rc -eq 1 ] && [ "$left" -eq 0 ] && grep -q "^pkvsim" "$d/out"; then echo "$name $i clean"
  # a sweep's point that failed: said, recorded, the rest assembled (exit 3)
  elif [ $rc -eq 3 ] && [ "$left" -eq 0 ] && grep -q "point [0-9]* failed" "$d/out" &&
       env -u LD_PRELOAD "$pkvsim" report "$d/o.h5" > /dev/null 2>&1; then echo "$name $i clean"
  elif [ $rc -eq 0 ] && [ "$left" -eq 0 ] && { [ "$name" = workload ] ||
       env -u LD_PRELOAD "$pkvsim" report "$d/o.h5" > /dev/null 2>&1; }; then echo "$name $i survived"
  else echo "$name $i bad: exit $rc, $left temporary files: $(grep -v GnuTLS "$d/out" | tail -1)"; fi
  rm -rf "$d"
}
export -f one cmd; export tmp pkvsim
echo "| command | allocations in main${SKIP_LIB:+, outside $SKIP_LIB} | points tried | clean error | survived | other |"
echo "|---|---|---|---|---|---|"
: > "$tmp/res"
for name in run sweep workload; do
  mkdir -p "$tmp/c"; rm -rf "$tmp/c"/*
  COUNT_FILE="$tmp/count" $(cmd $name "$tmp/c") > /dev/null 2>&1 ||
    { echo "$name fails without an injected failure"; exit 1; }
  total=$(cat "$tmp/count")
  st=$step; [ $name = sweep ] && st=${SWEEP_STEP:-80}
  seq 1 "$st" "$total" | xargs -P 2 -I{} bash -c "one $name {}" > "$tmp/res.$name" 2>/dev/null
  clean=$(grep -c " clean$" "$tmp/res.$name"); survived=$(grep -c " survived$" "$tmp/res.$name")
  bad=$(grep -c " bad:" "$tmp/res.$name")
  echo "| $name | $total | $((clean + survived + bad)) | $clean | $survived | $bad |"
  cat "$tmp/res.$name" >> "$tmp/res"
done
grep " bad:" "$tmp/res" | sort -k2 -n | head -20
clean=$(grep -c " clean$" "$tmp/res"); survived=$(grep -c " survived$" "$tmp/res")
bad=$(grep -c " bad:" "$tmp/res")
[ "$bad" -eq 0 ] && [ $((clean + survived)) -gt 0 ]
