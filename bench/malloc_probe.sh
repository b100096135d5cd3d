#!/usr/bin/env bash
# Allocation-failure probe (issue 15, class 9): a small model-backend run with the N-th
# allocation failing, for N every STEP-th allocation point of the run; prints how each
# ended (a clean error: exit 1, no temporary file; survived: exit 0; HDF5 exiting the
# process itself with -1; a crash: a signal)
# and the crashes' points. Usage: bench/malloc_probe.sh PKVSIM [STEP] (default 53).
set -u
pkvsim=${1:?usage: malloc_probe.sh PKVSIM [STEP]}; step=${2:-53}
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -O1 -shared -fPIC -o "$tmp/failmalloc.so" "$src/bench/failmalloc.c" -ldl || exit 1
cat > "$tmp/small.json" <<JSON
{"workload": {"arrival": {"process": "poisson", "rate": 50}, "prompt": {"dist": "fixed", "value": 1000},
  "decode": {"dist": "fixed", "value": 5}, "num_requests": 4},
 "route": {"calibration": "$src/experiments/calibration/default.json"}}
JSON
COUNT_FILE="$tmp/count" LD_PRELOAD="$tmp/failmalloc.so" "$pkvsim" run -q "$tmp/small.json" \
  --backend model -o "$tmp/o.h5" || { echo "the run fails without an injected failure"; exit 1; }
total=$(cat "$tmp/count")
clean=0; survived=0; crash=0; lib_exit=0; other=0; points=0
for ((i = 1; i <= total; i += step)); do
  points=$((points + 1)); rm -f "$tmp"/o.h5*
  FAIL_AT=$i LD_PRELOAD="$tmp/failmalloc.so" timeout 30 "$pkvsim" run -q "$tmp/small.json" \
    --backend model -o "$tmp/o.h5" > "$tmp/out" 2>&1; rc=$?
  left=$(ls "$tmp"/o.h5.tmp* 2>/dev/null | wc -l)
  if [ $rc -eq 255 ] && [ $left -eq 0 ]; then lib_exit=$((lib_exit + 1)) # exit(-1) inside HDF5
  elif [ $rc -ge 124 ]; then crash=$((crash + 1)); echo "crash at allocation $i: exit $rc"
  elif [ $rc -eq 1 ] && [ $left -eq 0 ]; then clean=$((clean + 1))
  elif [ $rc -eq 0 ]; then survived=$((survived + 1))
  else other=$((other + 1)); echo "allocation $i: exit $rc, $left temporary files: $(tail -1 "$tmp/out")"; fi
done 2>/dev/null
echo "| allocations in the run | points tried | clean error | survived | exit(-1) inside HDF5, nothing left | crashed | other |"
echo "|---|---|---|---|---|---|---|"
echo "| $total | $points | $clean | $survived | $lib_exit | $crash | $other |"
