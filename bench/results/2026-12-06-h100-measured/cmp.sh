#!/bin/bash
# cmp.sh PKVSIM CAL SATDIR: the model backend with CAL on every saturated workload of
# SATDIR (saturation_runs.tar.xz unpacked) against its cuda run on the H100: each figure's
# relative error.
pkvsim=$(realpath "$1") cal=$(realpath "$2") tmp=$(mktemp -d)
cd "$3" || exit 1
for x in latency_b8 burst200_c512 poisson40_c512 burst1000_c2048 burst1000_pf; do
  "$pkvsim" run $x.json --backend model -c "$cal" -q -o "$tmp/$x.h5" --json "$tmp/$x.json" 2> /dev/null || echo "fail $x"
  python3 - "$x" "$tmp" <<'PY'
import json, sys
x, tmp = sys.argv[1:]
c = json.load(open(f"{x}.cuda.json")); m = json.load(open(f"{tmp}/{x}.json"))
ks = [("request_throughput", "tput"), ("median_ttft_ms", "ttft50"), ("p99_ttft_ms", "ttft99"),
      ("median_tpot_ms", "tpot50"), ("p99_tpot_ms", "tpot99"), ("mean_e2el_ms", "e2e")]
print("%-16s" % x + "  ".join("%s %+5.1f%%" % (n, 100 * (m[k] / c[k] - 1)) for k, n in ks))
PY
done
rm -rf "$tmp"
