#!/usr/bin/env bash
# pkvsim report: per-group mean and sample sd over seeds, and ratios to the baseline,
# equal an independent computation (Python, from h5dump of each file's /summary); a
# file that is not a pkvsim output is a clear error. Usage: report.sh PKVSIM SOURCE_DIR
set -u
pkvsim=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/e.json" <<JSON
{"name": "rep", "workload": {"arrival": {"process": "poisson", "rate": 150},
  "prompt": {"dist": "uniform", "min": 500, "max": 30000}, "decode": {"dist": "uniform", "min": 8, "max": 64},
  "num_requests": 60, "max_context": 40000},
 "serving": {"max_active": 8, "kv_pages": 30000},
 "route": {"calibration": "$src/experiments/calibration/default.json"}}
JSON
for pol in ref_paged pkv_workqueue; do for s in 1 2 3; do
  "$pkvsim" run -q "$tmp/e.json" --route $pol --seed $s -o "$tmp/$pol-$s.h5" || { echo "FAIL run"; exit 1; }
done; done
"$pkvsim" report "$tmp"/*.h5 --csv "$tmp/r.csv" --json "$tmp/r.json" > "$tmp/table.md" || { echo "FAIL report"; exit 1; }
attr() { h5dump -a "/summary/$2" "$1" | grep -o '(0): [-0-9.e+]*' | cut -d' ' -f2; }
for f in "$tmp"/*-?.h5; do
  echo "$(basename "$f") $(attr "$f" decode_tok_s) $(attr "$f" ttft_p99) $(attr "$f" request_goodput)"
done > "$tmp/values.txt"
python3 - "$tmp" <<'PY'
import csv, statistics, sys
tmp = sys.argv[1]
vals, by_seed, ttft, good = {}, {}, {}, {}
for line in open(f"{tmp}/values.txt"):
    name, v, t99, g = line.split()
    pol, seed = name[:-3].rsplit("-", 1)
    vals.setdefault(pol, []).append(float(v))
    ttft.setdefault(pol, []).append(float(t99))
    good.setdefault(pol, []).append(float(g))
    by_seed[(pol, seed)] = float(v)
rows = {r["policy"]: r for r in csv.DictReader(open(f"{tmp}/r.csv"))}
passes = fails = 0
def check(what, ok):
    global passes, fails
    if ok: passes += 1
    else: fails += 1; print("FAIL", what)
for pol, xs in vals.items():
    r = rows[pol]
    m, sd = statistics.mean(xs), statistics.stdev(xs)
    check(f"{pol} runs", int(r["runs"]) == 3)
    check(f"{pol} mean {r['decode_tok_s_mean']} vs {m}", abs(float(r["decode_tok_s_mean"]) - m) <= 1e-6 * m)
    check(f"{pol} sd {r['decode_tok_s_sd']} vs {sd}", abs(float(r["decode_tok_s_sd"]) - sd) <= 1e-5 * sd)
ratio = statistics.mean(vals["pkv_workqueue"]) / statistics.mean(vals["ref_paged"])
check("ratio", abs(float(rows["pkv_workqueue"]["ratio_vs_baseline"]) - ratio) <= 1e-6 * ratio)
check("baseline ratio 1", abs(float(rows["ref_paged"]["ratio_vs_baseline"]) - 1) < 1e-12)
# Paired by seed, with a 95% t interval (t(0.975, 2) = 4.302652729911275).
pairs = [by_seed[("pkv_workqueue", s)] / by_seed[("ref_paged", s)] for s in ("1", "2", "3")]
pm, half = statistics.mean(pairs), 4.302652729911275 * statistics.stdev(pairs) / 3 ** 0.5
r = rows["pkv_workqueue"]
check(f"paired ratio {r['paired_ratio']} vs {pm}", abs(float(r["paired_ratio"]) - pm) <= 1e-6 * pm)
check(f"paired CI {r['paired_ci_lo']}..{r['paired_ci_hi']} vs {pm - half}..{pm + half}",
      abs(float(r["paired_ci_lo"]) - (pm - half)) <= 1e-5 * pm and
      abs(float(r["paired_ci_hi"]) - (pm + half)) <= 1e-5 * pm and int(r["pairs"]) == 3)
# Goodput and the TTFT p99 ratio to the baseline, from the files' own figures.
gm = statistics.mean(good["pkv_workqueue"])
check(f"goodput {r['request_goodput_mean']} vs {gm}",
      abs(float(r["request_goodput_mean"]) - gm) <= 1e-5 * gm)  # h5dump prints 7 digits
tr = statistics.mean(ttft["pkv_workqueue"]) / statistics.mean(ttft["ref_paged"])
check(f"TTFT p99 ratio {r['ttft_p99_ratio']} vs {tr}", abs(float(r["ttft_p99_ratio"]) - tr) <= 1e-5 * tr)
check("table rows", sum(1 for l in open(f"{tmp}/table.md") if l.startswith("| rep")) == 2)
# --json: the same groups and figures as the CSV.
import json
doc = json.load(open(f"{tmp}/r.json"))
jg = {g["policy"]: g for g in doc["groups"]}
check("json groups", set(jg) == set(rows) and doc["baseline"] == "ref_paged")
check("json mean", abs(jg["pkv_workqueue"]["values"]["decode_tok_s"]["mean"] -
                       float(rows["pkv_workqueue"]["decode_tok_s_mean"])) <= 1e-6 * m)
check("json paired", abs(jg["pkv_workqueue"]["paired_by_seed"]["ratio"] - pm) <= 1e-6 * pm)
print(f"{passes} passed, {fails} failed")
sys.exit(1 if fails else 0)
PY
rc=$?
# Runs of one name at three rates are three groups (never merged by name), in numeric
# order of the rate; a sweep file's points are runs too.
mkdir -p "$tmp/rates"
for r in 100 20 5; do
  sed "s/\"rate\": 150/\"rate\": $r/" "$tmp/e.json" > "$tmp/rates/e.json"
  "$pkvsim" run -q "$tmp/rates/e.json" -o "$tmp/rates/r$r.h5" || { echo "FAIL run"; exit 1; }
done
# --counters: the structural counters per step (Table 4): ref_paged launches one kernel
# and merges nothing; the workqueue splits the long rows, so it merges.
"$pkvsim" report "$tmp"/*-?.h5 --counters > "$tmp/counters.md" || { echo "FAIL report --counters"; exit 1; }
ref=$(grep '^| rep .* ref_paged ' "$tmp/counters.md" | tail -1 | awk -F'|' '{print $6 $7 $10}' | tr -s ' ')
wq=$(grep '^| rep .* pkv_workqueue ' "$tmp/counters.md" | tail -1 | awk -F'|' '{print $10}' | tr -d ' ')
if [ "$ref" != " 1 ± 0 0 ± 0 0 ± 0 " ] || ! awk -v m="${wq%%±*}" 'BEGIN { exit !(m > 0) }'; then
  echo "FAIL counters: ref_paged '$ref' (launches, merge launches, merge MB), pkv_workqueue merge MB '$wq'"
  cat "$tmp/counters.md"; rc=1
fi
"$pkvsim" report "$tmp"/rates/r*.h5 > "$tmp/rates.md" || { echo "FAIL report rates"; exit 1; }
got=$(grep '^| rep' "$tmp/rates.md" | cut -d'|' -f3 | tr -d ' ' | tr '\n' ,)
if [ "$got" != "5,20,100," ] || ! grep -q "workload.arrival.rate" "$tmp/rates.md"; then
  echo "FAIL grouping by configuration: rates column $got"; cat "$tmp/rates.md"; exit 1
fi
# A trace replayed at 1x and 4x (trace.rate_scale): two groups, never one averaged as
# if the loads were seeds; the resolved configuration holds the setting.
mkdir -p "$tmp/trace"
for k in 1 4; do
  cat > "$tmp/trace/t$k.json" <<JSON
{"name": "rep-trace", "workload": {"trace": {"path": "$src/experiments/traces/azure2023_code_first200.csv",
  "columns": "azure", "rate_scale": $k}}, "serving": {"max_active": 8, "kv_pages": 60000},
 "route": {"calibration": "$src/experiments/calibration/default.json"}}
JSON
  "$pkvsim" run -q "$tmp/trace/t$k.json" -o "$tmp/trace/t$k.h5" || { echo "FAIL trace run"; exit 1; }
done
"$pkvsim" report "$tmp"/trace/t*.h5 > "$tmp/trace.md" || { echo "FAIL report trace"; exit 1; }
got=$(grep '^| rep-trace' "$tmp/trace.md" | cut -d'|' -f3 | tr -d ' ' | tr '\n' ,)
if [ "$got" != "1,4," ] || ! grep -q "workload.trace.rate_scale" "$tmp/trace.md"; then
  echo "FAIL a rate_scale pair: rate_scale column '$got'"; cat "$tmp/trace.md"; exit 1
fi
# --best: the open-loop throughput grows with the rate, so the best point is the fastest
# rate's; its TPOT p50 the lowest one's of the three.
"$pkvsim" report "$tmp"/rates/r*.h5 --best decode_tok_s > "$tmp/best.md" || { echo "FAIL --best"; exit 1; }
best=$(sed -n '/^Best group/,$p' "$tmp/best.md" | grep '^| rep' | cut -d'|' -f3 | tr -d ' ')
if [ "$best" != "100" ]; then echo "FAIL --best decode_tok_s: rate '$best'"; cat "$tmp/best.md"; exit 1; fi
if "$pkvsim" report "$tmp"/rates/r*.h5 --best tok 2> "$tmp/err" >/dev/null || ! grep -q "not a reported figure" "$tmp/err"; then
  echo "FAIL --best of an unknown figure: $(cat "$tmp/err")"; exit 1
fi
# --routes (Table 2): on the cpu backend, which measures wall and device time and checks
# every step, each fixed route's group ran only its route, its largest error is the
# largest of its files' /steps/max_err, and the wall ratio paired by seed is the mean of
# the files' own ratios.
mkdir -p "$tmp/cpu"
cat > "$tmp/cpu/c.json" <<JSON
{"name": "repc", "workload": {"arrival": {"process": "closed", "concurrency": 2},
  "prompt": {"dist": "uniform", "min": 100, "max": 600}, "decode": {"dist": "fixed", "value": 4},
  "num_requests": 4},
 "serving": {"max_active": 2, "kv_pages": 160},
 "run": {"check_every": 1, "backend": "cpu"},
 "route": {"calibration": "$src/experiments/calibration/default.json"}}
JSON
for pol in ref_paged pkv_workqueue; do for s in 1 2; do
  "$pkvsim" run -q "$tmp/cpu/c.json" --route $pol --seed $s -o "$tmp/cpu/$pol-$s.h5" || { echo "FAIL cpu run"; exit 1; }
done; done
"$pkvsim" report "$tmp"/cpu/*.h5 --routes --json "$tmp/cpu/r.json" > "$tmp/cpu/routes.md" || { echo "FAIL report --routes"; exit 1; }
for f in "$tmp"/cpu/*.h5; do
  errs=$(h5dump -d /steps/max_err "$f" | sed -n '/DATA {/,/}/p' | sed 's/([0-9]*)://g' | grep -o '[0-9][-0-9.e+]*' | grep -v '^0$' | tr '\n' ' ')
  echo "$(basename "$f" .h5) $(attr "$f" decode_tok_s_wall) $errs"
done > "$tmp/cpu/values.txt"
python3 - "$tmp/cpu" <<'PY' || rc=1
import json, statistics, sys
d = sys.argv[1]
wall, errs = {}, {}
for line in open(f"{d}/values.txt"):
    name, w, *e = line.split()
    pol, seed = name.rsplit("-", 1)
    wall[(pol, seed)] = float(w)
    errs.setdefault(pol, []).extend(float(x) for x in e)
groups = {g["policy"]: g for g in json.load(open(f"{d}/r.json"))["groups"]}
fails = 0
for pol in ("ref_paged", "pkv_workqueue"):
    g = groups[pol]
    share = {r: s for r, s in g["steps_by_route"].items() if s}
    if share != {pol: 1}: fails += 1; print("FAIL steps by route", pol, share)
    if not errs[pol] or abs(g["max_abs_err"] - max(errs[pol])) > 1e-5 * max(errs[pol]):
        fails += 1; print("FAIL max err", pol, g["max_abs_err"], max(errs[pol] or [0]))
pm = statistics.mean(wall[("pkv_workqueue", s)] / wall[("ref_paged", s)] for s in ("1", "2"))
got = groups["pkv_workqueue"]["paired_by_seed_wall"]
if abs(got["ratio"] - pm) > 1e-5 * pm or got["pairs"] != 2: fails += 1; print("FAIL paired wall", got, pm)
print(f"--routes: {fails} failed")
sys.exit(1 if fails else 0)
PY
grep -q '^| repc .* pkv_workqueue .* pkv_workqueue 100.0% |$' "$tmp/cpu/routes.md" || { echo "FAIL --routes table"; cat "$tmp/cpu/routes.md"; rc=1; }
# The same calibration file in two folders is one configuration (grouped by its name
# and content, not its path).
mkdir -p "$tmp/ca" "$tmp/cb"
cp "$src/experiments/calibration/default.json" "$tmp/ca/c.json"
cp "$src/experiments/calibration/default.json" "$tmp/cb/c.json"
for d in ca cb; do
  sed "s#\"calibration\": \"[^\"]*\"#\"calibration\": \"$tmp/$d/c.json\"#" "$tmp/e.json" > "$tmp/$d/e.json"
  "$pkvsim" run -q "$tmp/$d/e.json" --seed 1 -o "$tmp/$d/r.h5" || { echo "FAIL run $d"; exit 1; }
done
"$pkvsim" report "$tmp"/ca/r.h5 "$tmp"/cb/r.h5 > "$tmp/cal.md" || { echo "FAIL report calibration"; exit 1; }
if [ "$(grep -c '^| rep ' "$tmp/cal.md")" != 1 ] || ! grep -q '^| rep .* | 2 |' "$tmp/cal.md"; then
  echo "FAIL one calibration in two folders: not one group of 2 runs"; cat "$tmp/cal.md"; rc=1
fi
# Predicted figures carry their calibration's per-step error (h200.json's study-layer
# section: the fit's held-out error per route), and a ratio inside the two groups' errors
# says so.
mkdir -p "$tmp/me"
for pol in ref_paged pkv_workqueue; do
  "$pkvsim" run -q "$tmp/e.json" --route $pol --seed 1 -c "$src/experiments/calibration/h200.json" \
    -o "$tmp/me/$pol.h5" || { echo "FAIL run model error"; exit 1; }
done
"$pkvsim" report "$tmp"/me/*.h5 --json "$tmp/me/r.json" > "$tmp/me/t.md" || { echo "FAIL report model error"; exit 1; }
python3 - "$tmp/me/r.json" "$src/experiments/calibration/h200.json" <<'PY' || rc=1
import json, sys
r, cal = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["study_layer"]
g = {x["policy"]: x for x in r["groups"]}
fails = 0
for pol in ("ref_paged", "pkv_workqueue"):
    want = cal["fit"]["routes"][pol]["held_out_mape"]
    if abs(g[pol]["model_error"] - want) > 1e-9:
        fails += 1; print("FAIL model error", pol, g[pol]["model_error"], want)
ratio = g["pkv_workqueue"]["ratio_vs_baseline"]
both = sum(cal["fit"]["routes"][p]["held_out_mape"] for p in ("ref_paged", "pkv_workqueue"))
if g["pkv_workqueue"]["inside_model_error"] != (abs(ratio - 1) < both):
    fails += 1; print("FAIL inside flag", ratio, both, g["pkv_workqueue"]["inside_model_error"])
sys.exit(1 if fails else 0)
PY
# A sweep over fleet.pools (whole lists of pools: commas, quotes and braces in the
# values) gives CSV that Python's csv reads, a row per point of as many fields as the
# header, with the swept key a column.
mkdir -p "$tmp/pools"
cat > "$tmp/pools/p.json" <<JSON
{"name": "rep-pools", "model": {"layers": 2, "hidden": 512, "hq": 8, "hkv": 2, "head_dim": 128,
  "intermediate": 1024, "vocab": 1000},
 "workload": {"arrival": {"process": "poisson", "rate": 50}, "num_requests": 30,
  "prompt": {"dist": "fixed", "value": 64}, "decode": {"dist": "fixed", "value": 8}},
 "serving": {"max_active": 8, "kv_pages": 2000},
 "route": {"calibration": "$src/experiments/calibration/default.json"}, "run": {"backend": "model"},
 "sweep": {"axes": [{"path": "fleet.pools", "values": [
   [{"name": "a", "replicas": 2}],
   [{"name": "p", "replicas": 1, "role": "prefill"}, {"name": "d", "replicas": 1, "role": "decode"}]]}]}}
JSON
"$pkvsim" run -q "$tmp/pools/p.json" -o "$tmp/pools/p.h5" || { echo "FAIL pools sweep"; exit 1; }
"$pkvsim" report "$tmp/pools/p.h5" --csv "$tmp/pools/p.csv" > /dev/null || { echo "FAIL report pools"; exit 1; }
if ! python3 - "$tmp/pools/p.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
head, body = rows[0], rows[1:]
ok = len(body) == 2 and all(len(r) == len(head) for r in body) and "fleet.pools" in head
sys.exit(0 if ok else f"{len(body)} rows, widths {[len(r) for r in body]} for {len(head)} columns, "
                      f"fleet.pools a column: {'fleet.pools' in head}")
PY
then echo "FAIL report --csv of a pools sweep"; rc=1; fi
# Its table names each point's pools (name, replicas, role, calibration), not their JSON.
"$pkvsim" report "$tmp/pools/p.h5" > "$tmp/pools/p.md"
if ! grep -q '^| rep-pools | p 1 prefill default + d 1 decode default |' "$tmp/pools/p.md" ||
   grep -q '{' "$tmp/pools/p.md"; then
  echo "FAIL report of a pools sweep: $(grep '^| rep-pools' "$tmp/pools/p.md" | cut -c1-200)"; rc=1
fi
# A pool's key as an axis (fleet.pools[N].KEY): each point sets that pool's, and a pool
# the experiment lacks fails its points naming the path.
sed -e 's/"sweep": {"axes": \[{"path": "fleet.pools", "values": \[/"fleet": {"pools": [{"name": "p", "replicas": 1, "role": "prefill"}, {"name": "d", "replicas": 1, "role": "decode"}]}, "sweep": {"axes": [{"path": "fleet.pools[1].replicas", "values": [1, 3]}, {"path": "fleet.pools[0].serving.max_active", "values": [4]}]}} /' \
  -e '/^   \[{"name": "a"/,$d' "$tmp/pools/p.json" > "$tmp/pools/q.json"
"$pkvsim" run -q "$tmp/pools/q.json" -o "$tmp/pools/q.h5" || { echo "FAIL pool-key sweep: $(cat "$tmp/pools/q.json")"; exit 1; }
"$pkvsim" report "$tmp/pools/q.h5" > "$tmp/pools/q.md"
if ! grep -q '| d | decode | 3 |' "$tmp/pools/q.md" || ! grep -q '| d | decode | 1 |' "$tmp/pools/q.md"; then
  echo "FAIL a pool's replicas as an axis: $(grep '| d | decode' "$tmp/pools/q.md" | cut -c1-160)"; rc=1
fi
sed -i 's/pools\[1\].replicas/pools[2].replicas/' "$tmp/pools/q.json"
"$pkvsim" run -q "$tmp/pools/q.json" -o "$tmp/pools/q2.h5" 2> "$tmp/err"
if ! grep -q 'fleet.pools\[2\].replicas: the experiment.s "pools" has 2 items: no item 2' "$tmp/err"; then
  echo "FAIL a missing pool as an axis: $(cat "$tmp/err")"; rc=1
fi
echo "not hdf5" > "$tmp/bad.h5"
if "$pkvsim" report "$tmp/bad.h5" 2> "$tmp/err" >/dev/null || ! grep -q "bad.h5: not a readable HDF5 file" "$tmp/err"; then
  echo "FAIL bad file: $(cat "$tmp/err")"; exit 1
fi
exit $rc
