#!/bin/bash
# cmp.sh CAL: model backend with CAL on every workload against the cuda run
cal=$(realpath "$1")
cd /tmp/sat/sat
for x in latency_b8 burst200_c512 poisson40_c512 burst1000_c2048 burst1000_pf; do
  /work/main/build/pkvsim run $x.json --backend model -c $cal -q -o /tmp/sat/m_$x.h5 --json /tmp/sat/m_$x.json 2>/dev/null || echo fail $x
  python3 - $x <<'PY'
import json,sys
x=sys.argv[1]
c=json.load(open(f"{x}.cuda.json")); m=json.load(open(f"/tmp/sat/m_{x}.json"))
ks=[("request_throughput","tput"),("median_ttft_ms","ttft50"),("p99_ttft_ms","ttft99"),("median_tpot_ms","tpot50"),("p99_tpot_ms","tpot99"),("mean_e2el_ms","e2e")]
print("%-16s"%x+"  ".join("%s %+5.1f%%"%(n,100*(m[k]/c[k]-1)) for k,n in ks))
PY
done
