#!/usr/bin/env bash
# Every shipped experiment (experiments/*.json, experiments/policy, paper, thresholds,
# fleet, scheduler) runs on the model backend to the end: exit 0, every sweep point done;
# one that only the cuda backend can run says so (counted apart). A single run also
# writes --json and must count every request once (issue 48's invariant): its /requests
# rows are completed + failed (/summary's arrived; its finished is completed), and with
# an offered count (an open loop's workload) completed + failed + not_arrived is it.
# Usage: experiments.sh PKVSIM SOURCE_DIR [single|sweeps] (default: both; the sweeps,
# most of the time, are CI's, and the single runs the README test command's).
set -u
pkvsim=$1; src=$2; only=${3:-}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0; gpu=0
for f in "$src"/experiments/*.json "$src"/experiments/{policy,paper,thresholds,fleet,scheduler}/*.json; do
  if grep -q '"sweep"' "$f"; then [ "$only" = single ] && continue
  else [ "$only" = sweeps ] && continue; fi
  n=$(basename "$(dirname "$f")")_$(basename "$f" .json)
  js=(); grep -q '"sweep"' "$f" || js=(--json "$tmp/$n.json")
  if "$pkvsim" run -q --backend model "$f" -o "$tmp/$n.h5" "${js[@]}" > "$tmp/$n.log" 2>&1; then
    if [ ${#js[@]} -gt 0 ] && ! bad=$("$(dirname "$0")/with_h5py.sh" - "$tmp/$n.h5" "$tmp/$n.json" 2>&1 <<'PY'
import json, sys, h5py
with h5py.File(sys.argv[1]) as f:
    rows, s = len(f["requests"]["id"]), f["summary"].attrs
    offered, s_arrived, s_finished = int(s["offered"]), int(s["arrived"]), int(s["finished"])
d = json.load(open(sys.argv[2]))
arrived = d["completed"] + d["failed"]
if rows != arrived or (offered and arrived + d["not_arrived"] != offered):
    sys.exit(f"{rows} rows, completed {d['completed']} + failed {d['failed']} + not arrived "
             f"{d['not_arrived']}, offered {offered}")
if (s_arrived, s_finished) != (arrived, d["completed"]):
    sys.exit(f"/summary arrived {s_arrived}, finished {s_finished}; --json completed "
             f"{d['completed']} + failed {d['failed']}")
PY
    ); then
      fail=$((fail + 1)); echo "FAIL $f: requests not counted once: $bad"; continue
    fi
    pass=$((pass + 1))
  elif grep -q "only the cuda backend" "$tmp/$n.log"; then
    gpu=$((gpu + 1)); echo "needs the cuda backend: $f"
  else
    fail=$((fail + 1)); echo "FAIL $f: $(tail -2 "$tmp/$n.log")"
  fi
done
# run.record "summary" plans only the routes adaptive consults (the split routes not where
# its gate is closed: pkv_policy_needed); its answers are those of the full record above.
if [ "$only" != sweeps ]; then
  for n in bimodal_b4 uniform_b8; do
    sed -e "s#\"\\.\\./calibration/#\"$(cd "$src" && pwd)/experiments/calibration/#" \
      -e 's#"run": {#"run": {"record": "summary", #' "$src/experiments/policy/$n.json" > "$tmp/lean_$n.json"
    if ! "$pkvsim" run -q --backend model "$tmp/lean_$n.json" -o "$tmp/lean_$n.h5" \
      --json "$tmp/lean_$n.out.json" > "$tmp/lean_$n.log" 2>&1 ||
      ! python3 - "$tmp/policy_$n.json" "$tmp/lean_$n.out.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
diff = sorted(k for k in a.keys() | b.keys() if k != "date" and a.get(k) != b.get(k))
sys.exit(f"differs in {diff}" if diff else 0)
PY
    then
      fail=$((fail + 1)); echo "FAIL policy/$n.json with run.record summary: $(tail -2 "$tmp/lean_$n.log")"
    fi
  done
fi
echo "$pass passed, $fail failed, $gpu for the cuda backend only"
[ $fail -eq 0 ]
