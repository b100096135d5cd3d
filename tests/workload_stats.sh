#!/usr/bin/env bash
# `pkvsim workload` on the two real traces (experiments/traces/) reports the statistics that an
# independent computation (Python, from the raw files) gives: count, duration, rate,
# inter-arrival CV and length percentiles. Usage: workload_stats.sh PKVSIM TRACE_DIR
set -u
pkvsim=$1; shared=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/azure.json" <<JSON
{"workload": {"trace": {"path": "$shared/azure2023_code.csv"}}}
JSON
cat > "$tmp/mooncake.json" <<JSON
{"workload": {"trace": {"path": "$shared/mooncake2025_synthetic.jsonl"}, "max_context": 131072},
 "serving": {"kv_pages": 8192}}
JSON
"$pkvsim" workload "$tmp/azure.json" > "$tmp/azure.out" || { echo "FAIL: pkvsim workload azure"; exit 1; }
"$pkvsim" workload "$tmp/mooncake.json" > "$tmp/mooncake.out" || { echo "FAIL: pkvsim workload mooncake"; exit 1; }
python3 - "$shared" "$tmp" <<'PY'
import json, math, re, sys
shared, tmp = sys.argv[1], sys.argv[2]

def azure():
    rows = []
    with open(f"{shared}/azure2023_code.csv") as f:
        next(f)
        for line in f:
            ts, p, d = line.strip().split(",")
            date, clock = ts.split(" ")
            y, mo, da = map(int, date.split("-"))
            hh, mm, ss = clock.split(":")
            sec, frac = (ss.split(".") + ["0"])[:2]
            # days from civil (proleptic Gregorian), independent of the C code's formula
            import datetime
            days = (datetime.date(y, mo, da) - datetime.date(1970, 1, 1)).days
            t = days * 86400 + int(hh) * 3600 + int(mm) * 60 + int(sec) + int(frac) / 10 ** len(frac)
            rows.append((t, int(p), int(d)))
    return rows, 131072

def mooncake():
    rows = []
    with open(f"{shared}/mooncake2025_synthetic.jsonl") as f:
        for line in f:
            o = json.loads(line)
            rows.append((o["timestamp"] / 1000.0, o["input_length"], o["output_length"]))
    return rows, 131072

def clamp(p, d, mc):  # a request past the context is refused, its lengths kept as drawn
    return max(p, 1), max(d, 1)

def q(xs, f):  # linear interpolation at (n-1) f, the definition GSL uses
    xs = sorted(xs); h = (len(xs) - 1) * f; lo = math.floor(h)
    return xs[lo] + (h - lo) * (xs[min(lo + 1, len(xs) - 1)] - xs[lo])

def expected(rows, mc):
    t = [r[0] - rows[0][0] for r in rows]
    pd = [clamp(r[1], r[2], mc) for r in rows]
    n = len(rows); gaps = [t[i] - t[i - 1] for i in range(1, n)]
    m = sum(gaps) / len(gaps)
    sd = math.sqrt(sum((g - m) ** 2 for g in gaps) / (len(gaps) - 1))
    out = {"requests": n, "duration": t[-1] - t[0], "rate": (n - 1) / (t[-1] - t[0]), "cv": sd / m,
           "past": sum(1 for p, d in pd if p + d > mc)}
    for name, xs in (("prompt", [x[0] for x in pd]), ("decode", [x[1] for x in pd])):
        out[name] = [sum(xs) / n, q(xs, .5), q(xs, .9), q(xs, .99), min(xs), max(xs)]
    return out

def reported(path):
    text = open(path).read()
    num = r"([-0-9.eE+]+)"
    got = {"requests": int(re.search(r": (\d+) requests", text).group(1)),
           "duration": float(re.search(r"duration\s+" + num, text).group(1)),
           "rate": float(re.search(r"rate\s+" + num, text).group(1)),
           "cv": float(re.search(r"gap CV\s+" + num, text).group(1))}
    m = re.search(r"context\s+(\d+) requests past workload.max_context .*: refused", text)
    got["past"] = int(m.group(1)) if m else 0
    for name in ("prompt", "decode"):
        m = re.search(name + r"\s+mean " + num + r"\s+p50 " + num + r"\s+p90 " + num + r"\s+p99 " +
                      num + r"\s+min " + num + r"\s+max " + num, text)
        got[name] = [float(x) for x in m.groups()]
    return got

fails = passes = 0
def close(a, b, rel):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)

for name, (rows, mc) in (("azure", azure()), ("mooncake", mooncake())):
    e, g = expected(rows, mc), reported(f"{tmp}/{name}.out")
    checks = [("requests", e["requests"] == g["requests"]), ("past", e["past"] == g["past"])]
    for k in ("duration", "rate", "cv"):
        checks.append((k, close(e[k], g[k], 2e-5)))
    for k in ("prompt", "decode"):
        # printed with %.1f (mean) and %.0f (percentiles): compare at that rounding
        checks.append((k + " mean", abs(e[k][0] - g[k][0]) <= 0.051))
        checks += [(f"{k} {lab}", abs(e[k][i] - g[k][i]) <= 0.5 + 1e-9)
                   for i, lab in ((1, "p50"), (2, "p90"), (3, "p99"), (4, "min"), (5, "max"))]
    for what, ok in checks:
        if ok: passes += 1
        else:
            fails += 1
            print(f"FAIL {name} {what}: expected {e.get(what.split()[0])}, reported {g.get(what.split()[0])}")
print(f"{passes} passed, {fails} failed")
sys.exit(1 if fails else 0)
PY
