"""The one-day fleet experiment of bench/RESULTS.md ("The fleet"): HOURS of a diurnal
day's rate shape at PEAK requests/s a replica for REPLICAS replicas, written to OUT.
Usage: make_day.py HOURS REPLICAS PEAK OUT (24 1000 10 day.json; then add
fleet.view_refresh_ms 50 and fleet.router_latency_ms 1)."""
import json, os, sys
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
hours=float(sys.argv[1]); reps=int(sys.argv[2]); peak=float(sys.argv[3]); out=sys.argv[4]
T=hours*3600
# a day's shape: trough at 04:00 (30% of peak), peak 12:00-18:00, compressed to T seconds
pts=[[0,0.45],[4,0.3],[9,0.8],[12,1.0],[18,1.0],[22,0.6],[24,0.45]]
tr={"path":os.path.join(ROOT, "experiments/traces/azure2023_code.csv"),"columns":"azure"}
d={"name":"fleet_day","model":"llama-3.1-8b",
 "workload":{"arrival":{"process":"piecewise","points":[[h/24*T, f*peak*reps] for h,f in pts]},
   "prompt":{"dist":"empirical","trace":tr,"field":"prompt"},
   "decode":{"dist":"empirical","trace":tr,"field":"decode"},
   "num_requests":2000000000,"max_context":9500},
 "serving":{"max_active":64,"kv_pages":50000,"scheduler":"chunked","token_budget":2048},
 "route":{"policy":"adaptive","calibration":os.path.join(ROOT, "experiments/calibration/h200-fit.json")},
 "fleet":{"replicas":reps,"router":"least_requests"},
 "run":{"backend":"model","record":"summary","max_time_s":T}}
json.dump(d,open(out,'w'),indent=1)
