#!/usr/bin/env python3
"""Seeded mutation test of pkvsim's input handling: mutated experiment files and
mutated traces must give exit code 0 or 1 (never a crash or a sanitizer report) and
leave no temporary output file. Usage: fuzz_inputs.py PKVSIM SOURCE_DIR [N]"""
import json, os, random, subprocess, sys, tempfile

pkvsim, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 150
rng = random.Random(20261129)
tmp = tempfile.mkdtemp()
cal = f"{src}/experiments/calibration/default.json"
base = {
    "model": {"hq": 8, "hkv": 2, "head_dim": 64, "page_size": 16},
    "workload": {"arrival": {"process": "poisson", "rate": 200},
                 "prompt": {"dist": "uniform", "min": 10, "max": 3000},
                 "decode": {"dist": "fixed", "value": 20}, "num_requests": 30,
                 "max_context": 4096},
    "serving": {"max_active": 4, "kv_pages": 2000},
    "route": {"policy": "adaptive", "calibration": cal},
    "run": {"output": f"{tmp}/out.h5"}}
WEIRD = [None, True, False, 0, -1, 1e308, -1e308, 1e-320, 2**63, "", "x" * 300, [], {}, [1, 2],
         {"a": 1}, 0.5, 3, 7, "poisson", "closed", "mmpp", "piecewise", "zipf", "empirical",
         "cycle", "lognormal", "bimodal", "generator", "oracle", "cpu", "model", "skip"]
KEYS = ["rate", "cv", "concurrency", "value", "min", "max", "values", "points", "period_s",
        "rate_on", "mean_on_s", "s", "median", "sigma", "p_long", "trace", "path", "columns",
        "window_s", "first_n", "page_tables", "hole_fraction", "bucket_len", "mode", "backend",
        "max_steps", "max_time_s", "check_every", "preset", "mlp_intermediate", "process",
        "dist", "overrides", "beta_gbps", "c_min", "allow_other_gpu", "clock", "admission"]

def paths(o, prefix=()):
    if isinstance(o, dict):
        for k, v in o.items():
            yield prefix + (k,)
            yield from paths(v, prefix + (k,))

PLAUSIBLE = [1, 2, 3, 8, 16, 31, 33, 100, 1000, 4096, 0.1, 0.5, 0.9, 5.0, 50.0]

def mutate(doc):
    d = json.loads(json.dumps(doc))
    gentle = rng.random() < 0.6  # mostly plausible values: reach the simulation itself
    for _ in range(rng.randint(1, 2 if gentle else 4)):
        ps = list(paths(d))
        p = rng.choice(ps)
        parent = d
        for k in p[:-1]:
            parent = parent[k]
        op = rng.random()
        if gentle and isinstance(parent.get(p[-1]) if isinstance(parent, dict) else None,
                                 (int, float)):
            parent[p[-1]] = rng.choice(PLAUSIBLE)
        elif op < 0.45:
            parent[p[-1]] = rng.choice(WEIRD)
        elif op < 0.6:
            del parent[p[-1]]
        elif isinstance(parent, dict):
            parent[rng.choice(KEYS)] = rng.choice(WEIRD)
    return d

def trace_text():
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    t = 0
    for i in range(rng.randint(0, 20)):
        t += rng.random()
        lines.append(f"2023-11-16 18:{int(t) // 60 % 60:02d}:{int(t) % 60:02d}.{rng.randint(0, 9999999):07d},"
                     f"{rng.randint(-5, 5000)},{rng.randint(-2, 300)}")
    text = "\n".join(lines)
    for _ in range(rng.randint(0, 3)):  # byte-level damage
        if not text:
            break
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(["", ",", "\n", "\x00", "9" * 30, "\"", "-", " "]) + text[i + 1:]
    return text

fails = 0
for i in range(n):
    if i % 3 == 2:  # a mutated trace replay
        with open(f"{tmp}/t.csv", "w") as f:
            f.write(trace_text())
        doc = {"workload": {"trace": {"path": f"{tmp}/t.csv",
                                      "on_bad_row": rng.choice(["stop", "skip"])}},
               "route": {"calibration": cal}, "run": {"output": f"{tmp}/out.h5"}}
        if rng.random() < 0.5:
            doc = mutate(doc)
    else:
        doc = mutate(base)
    text = json.dumps(doc)
    if rng.random() < 0.1:  # truncated file
        text = text[:rng.randrange(len(text) + 1)]
    with open(f"{tmp}/e.json", "w") as f:
        f.write(text)
    for args in (["run", "-q", f"{tmp}/e.json"], ["workload", f"{tmp}/e.json"]):
        try:
            # in the scratch folder: a mutated run.output may name any relative file
            r = subprocess.run([pkvsim] + args, capture_output=True, text=True, timeout=60,
                               cwd=tmp)
        except subprocess.TimeoutExpired:
            print(f"FAIL case {i} {args[0]}: timed out on {text[:300]}")
            fails += 1
            continue
        leftovers = [x for x in os.listdir(tmp) if ".tmp." in x]
        for x in os.listdir(tmp):  # outputs under mutated names: not needed
            if x not in ("e.json", "t.csv") and ".tmp." not in x:
                try:
                    os.remove(os.path.join(tmp, x))
                except IsADirectoryError:
                    pass
        bad = (r.returncode not in (0, 1) or "Sanitizer" in r.stderr or "runtime error" in r.stderr
               or leftovers)
        if r.returncode == 1 and "pkvsim" not in r.stderr:
            bad = True  # an error must say something
        if bad:
            fails += 1
            print(f"FAIL case {i} {args[0]}: exit {r.returncode}, leftovers {leftovers}\n"
                  f"  input: {text[:400]}\n  stderr: {r.stderr[-600:]}")
        for x in leftovers:
            os.remove(os.path.join(tmp, x))
print(f"{2 * n - fails} passed, {fails} failed")
sys.exit(1 if fails else 0)
