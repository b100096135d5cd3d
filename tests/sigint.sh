#!/usr/bin/env bash
# A real SIGINT during a long run: pkvsim finishes the step, writes a valid HDF5 file
# marked interrupted (and no temporary file), and exits with 130.
# Usage: sigint.sh PKVSIM SOURCE_DIR
set -u
pkvsim=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/long.json" <<JSON
{"workload": {"arrival": {"process": "closed", "concurrency": 8},
  "prompt": {"dist": "fixed", "value": 2048}, "decode": {"dist": "fixed", "value": 4000000},
  "max_context": 4002048},
 "serving": {"max_active": 8, "kv_pages": 2100000},
 "route": {"calibration": "$src/experiments/calibration/default.json"},
 "run": {"max_steps": 2000000000, "output": "$tmp/out.h5"}}
JSON
"$pkvsim" run -q "$tmp/long.json" & pid=$!
sleep 1.5
kill -INT $pid
wait $pid; rc=$?
pass=0; fail=0
check() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $1"; fi; }
check "exit code 130 (got $rc)" '[ $rc -eq 130 ]'
check "output file written" '[ -f "$tmp/out.h5" ]'
check "no temporary file left" '! ls "$tmp"/out.h5.tmp.* >/dev/null 2>&1'
check "file marked interrupted" 'h5dump -a /provenance/interrupted "$tmp/out.h5" 2>/dev/null | grep -q "(0): 1"'
check "steps recorded" '[ "$(h5dump -H -d /steps/index "$tmp/out.h5" | grep -o "DATASPACE  SIMPLE { ( [0-9]*" | grep -o "[0-9]*$")" -gt 1000 ]'
# A fleet hears a signal too (its loop polls the stop flag, besides its replicas):
# SIGTERM, exit 143, a valid file marked interrupted.
cat > "$tmp/fleet.json" <<JSON
{"workload": {"arrival": {"process": "poisson", "rate": 50},
  "prompt": {"dist": "fixed", "value": 64}, "decode": {"dist": "fixed", "value": 200000},
  "num_requests": 1000000, "max_context": 200064},
 "serving": {"max_active": 8, "kv_pages": 110000},
 "fleet": {"replicas": 2, "router": "least_requests", "view_refresh_ms": 20},
 "route": {"calibration": "$src/experiments/calibration/default.json"},
 "run": {"output": "$tmp/fleet.h5"}}
JSON
"$pkvsim" run -q "$tmp/fleet.json" & pid=$!
sleep 1.5
kill -TERM $pid
wait $pid; rc=$?
check "fleet: exit code 143 on SIGTERM (got $rc)" '[ $rc -eq 143 ]'
check "fleet: no temporary file left" '! ls "$tmp"/fleet.h5.tmp.* >/dev/null 2>&1'
check "fleet: file marked interrupted" 'h5dump -a /provenance/interrupted "$tmp/fleet.h5" 2>/dev/null | grep -q "(0): 1"'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
