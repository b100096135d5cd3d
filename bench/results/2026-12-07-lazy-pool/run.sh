#!/bin/bash
# The KV pool set up untouched (da9456f) against the build before it (aadf61c), each three times:
# wall seconds and peak RSS of fit --engine on the engines test's 12 synthetic files (150
# iterations), a 1,000-replica fleet run (fl1000.json), pkvsim validate, and bench fleet.
# Usage: run.sh OLD_PKVSIM NEW_PKVSIM > table.md
cd "$(dirname "$0")"
old=$1 new=$2
echo "| case | build | run 1 (s, peak MB) | run 2 | run 3 |"
echo "|---|---|---|---|---|"
row() { # name, command after the binary
  for b in old new; do
    p=${!b}; line="| $1 | $b |"
    for i in 1 2 3; do
      /usr/bin/time -f "%e %M" -o t.txt $p "${@:2}" > /dev/null 2>&1
      read s kb < t.txt; line="$line $s, $((kb / 1024)) |"
    done
    echo "$line"
  done
}
row "fit --engine, 12 synthetic files, 150 iterations" fit --engine syn/start.json -o /tmp/lazy-fit.json --iterations 150 syn/syn_*.json
row "run, 1,000 replicas of 8 rows, 100,000 requests" run -q fl1000.json -o /tmp/lazy-fl.h5
row "validate (153 figures)" validate -q ../../../experiments/validation
rm -f t.txt /tmp/lazy-fit.json /tmp/lazy-fl.h5
