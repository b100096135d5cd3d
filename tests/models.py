#!/usr/bin/env python3
"""The served models: every preset resolves to its published config's shape; a shape
the GPU kernels do not run is refused on the cuda backend with a message and no
output; a bad preset is an error naming model.preset; and the model backend's
predictions of a full model's steps and prefills are reproduced here from the
calibration's constants by an independent computation. Usage: models.py PKVSIM SRC"""
import json
import math
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

pkvsim, src = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp()
fails = []

# The published configs (config.json of each model on Hugging Face, as the presets cite).
PUBLISHED = {
    "llama-3.1-8b": dict(layers=32, hidden=4096, hq=32, hkv=8, head_dim=128,
                         intermediate=14336, vocab=128256, rope_theta=500000, norm_eps=1e-5,
                         max_model_len=131072),
    "llama-3.1-70b": dict(layers=80, hidden=8192, hq=64, hkv=8, head_dim=128,
                          intermediate=28672, vocab=128256, rope_theta=500000, norm_eps=1e-5,
                          tensor_parallel=8, max_model_len=131072),
    "mistral-7b": dict(layers=32, hidden=4096, hq=32, hkv=8, head_dim=128, intermediate=14336,
                       vocab=32768, rope_theta=1e6, norm_eps=1e-5, max_model_len=32768),
    "qwen2.5-7b": dict(layers=28, hidden=3584, hq=28, hkv=4, head_dim=128, intermediate=18944,
                       vocab=152064, rope_theta=1e6, norm_eps=1e-6),
    "qwen3-8b": dict(layers=36, hidden=4096, hq=32, hkv=8, head_dim=128, intermediate=12288,
                     vocab=151936, rope_theta=1e6, norm_eps=1e-6, max_model_len=40960),
    "llama-3.2-1b": dict(layers=16, hidden=2048, hq=32, hkv=8, head_dim=64, intermediate=8192,
                         vocab=128256, rope_theta=500000, norm_eps=1e-5, max_model_len=131072),
    "gemma-2-9b": dict(layers=42, hidden=3584, hq=16, hkv=8, head_dim=256, intermediate=14336,
                       vocab=256000, rope_theta=10000, norm_eps=1e-6, max_model_len=8192),
    "mixtral-8x7b": dict(layers=32, hidden=4096, hq=32, hkv=8, head_dim=128, experts=8,
                         experts_per_token=2, expert_intermediate=14336, vocab=32000,
                         rope_theta=1e6, norm_eps=1e-5, max_model_len=32768),
    "qwen3-30b-a3b": dict(layers=48, hidden=2048, hq=32, hkv=4, head_dim=128, experts=128,
                          experts_per_token=8, expert_intermediate=768, vocab=151936,
                          rope_theta=1e6, norm_eps=1e-6, max_model_len=40960),
    "study-layer": dict(layers=1, hidden=0, hq=32, hkv=8, head_dim=128, page_size=16),
}
WORKLOAD = {"arrival": {"process": "poisson", "rate": 4}, "num_requests": 40,
            "prompt": {"dist": "uniform", "min": 16, "max": 3000},
            "decode": {"dist": "uniform", "min": 1, "max": 64}}


def experiment(name, model, **run):
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump({"model": model, "workload": WORKLOAD,
                   "serving": {"max_active": 16, "kv_pages": 8192},
                   "run": dict({"backend": "model"}, **run)}, f)
    return path


def pkv(*args):
    return subprocess.run([pkvsim, *args], capture_output=True, text=True)


for name, want in PUBLISHED.items():
    r = pkv("run", "-n", experiment("p_" + name, name))
    if r.returncode:
        fails.append(f"preset {name}: {r.stderr.strip()}")
        continue
    got = json.loads(r.stdout)["model"]
    for k, v in want.items():
        if got.get(k) != v:
            fails.append(f"preset {name}: {k} is {got.get(k)}, the published config says {v}")
    if not got.get("source", "").startswith(("https://", "The PersistentKV")):
        fails.append(f"preset {name}: no source cited")
# No model section is the study layer, exactly.
none = os.path.join(tmp, "none.json")
with open(none, "w") as f:
    json.dump({"workload": WORKLOAD, "run": {"backend": "model"}}, f)
a = json.loads(pkv("run", "-n", none).stdout)["model"]
b = json.loads(pkv("run", "-n", experiment("study", "study-layer")).stdout)["model"]
if {k: v for k, v in a.items() if k != "source"} != {k: v for k, v in b.items() if k != "source"}:
    fails.append(f"no model section resolves to {a}, not the study-layer preset {b}")

# Unsupported on the GPU (16 query heads per KV head): refused with the shapes named,
# before any output. qwen2.5-7b's 7 run there (test_kernels_gpu checks groups 1 to 8).
out = os.path.join(tmp, "g16.h5")
r = pkv("run", "-q", "-b", "cuda", "-o", out,
        experiment("g16", {"preset": "llama-3.1-8b", "hq": 32, "hkv": 2}))
if r.returncode == 0 or "1 to 8 query heads per KV head" not in r.stderr or os.path.exists(out):
    fails.append(f"16 query heads per KV head on cuda: rc {r.returncode}, {r.stderr.strip()!r}")
r = pkv("run", "-n", experiment("bad", "no-such-model"))
if r.returncode == 0 or "model.preset" not in r.stderr:
    fails.append(f"an unknown preset: rc {r.returncode}, {r.stderr.strip()!r}")
r = pkv("run", "-n", experiment("cpu", "llama-3.1-8b", backend="cpu"))
if r.returncode:
    fails.append(f"dry run with the cpu backend: {r.stderr.strip()}")
r = pkv("run", "-q", "-o", os.path.join(tmp, "c.h5"), experiment("cpu", "llama-3.1-8b",
                                                                    backend="cpu"))
# A full model runs on the cpu backend in host memory: an 8B one is refused, naming
# the bytes, and leaves no file.
if (r.returncode == 0 or "meant for small ones" not in r.stderr or "MiB" not in r.stderr
        or os.path.exists(os.path.join(tmp, "c.h5"))):
    fails.append(f"llama on the cpu backend: rc {r.returncode}, {r.stderr.strip()!r}")

# The model backend's predictions, recomputed.
cal = json.load(open(os.path.join(src, "experiments/calibration/default.json")))
C = dict(beta_gbps=4500, gemm_tflops=700, gemm_gbps=4000, gemm_us=4, small_kernel_us=3,
         allreduce_gbps=400, allreduce_us=10)
C.update({k: v for k, v in cal.items() if k in C})
# The GEMM rate at a width: gemm_tflops_at's, in log rows between its widths, held beyond.
RATES = {"128": 300.0, "1024": 850.0, "4096": 820.0}
cal_path = os.path.join(tmp, "rates.json")
json.dump(dict(cal, gemm_tflops_at=RATES), open(cal_path, "w"))


def tflops(rows):
    x = [float(k) for k in RATES]
    y = list(RATES.values())
    if rows <= x[0]:
        return y[0]
    for i in range(1, len(x)):
        if rows <= x[i]:
            f = math.log(rows / x[i - 1]) / math.log(x[i] / x[i - 1])
            return y[i - 1] + f * (y[i] - y[i - 1])
    return y[-1]


for name in ("llama-3.1-8b", "llama-3.1-70b", "mistral-7b"):
    m = PUBLISHED[name]
    tp = m.get("tensor_parallel", 1)
    h, d, L = m["hidden"], m["head_dim"], m["layers"]
    gemms = [(h, (m["hq"] + 2 * m["hkv"]) // tp * d), (m["hq"] // tp * d, h),
             (h, 2 * m["intermediate"] // tp), (m["intermediate"] // tp, h)]
    head = (h, m["vocab"] // tp)

    def gemm(rows, k, n):
        return max(2 * rows * k * n / (tflops(rows) * 1e12),
                   2 * (k * n + rows * k + rows * n) / (C["gemm_gbps"] * 1e9)) + C["gemm_us"] * 1e-6

    def dense(tokens, heads):
        t = L * sum(gemm(tokens, k, n) for k, n in gemms) + gemm(heads, *head)
        row = 2 * h * tokens
        small = 4 if tokens > 64 else 2  # the norms fold into RoPE and SiLU up to 64 rows
        t += L * (small * C["small_kernel_us"] * 1e-6 + 4 * row / (C["beta_gbps"] * 1e9))
        t += 4 * C["small_kernel_us"] * 1e-6 + 3 * row / (C["beta_gbps"] * 1e9)
        if tp > 1:
            t += 2 * L * (C["allreduce_us"] * 1e-6 +
                          2 * (tp - 1) / tp * row / (C["allreduce_gbps"] * 1e9))
        return t

    out = os.path.join(tmp, name + ".h5")
    r = pkv("run", "-q", "-c", cal_path, "-o", out, experiment("m_" + name, name))
    if r.returncode:
        fails.append(f"{name} on the model backend: {r.stderr.strip()}")
        continue
    with h5py.File(out) as f:
        s, p, q = f["steps"], f["prefills"], f["requests"]
        rows = s["rows"][:]
        want = np.array([dense(n, n) for n in rows])
        err = np.max(np.abs(s["t_dense_predicted"][:] / want - 1))
        if err > 1e-9:
            fails.append(f"{name}: t_dense_predicted off the recomputation by {err:.2e}")
        # A step's whole prediction: layers x the route's attention + the dense part.
        att = (s["t_predicted"][:] - s["t_dense_predicted"][:]) / L
        if np.any(att <= 0) or np.any(att > 1e-3):
            fails.append(f"{name}: per-layer attention predictions outside (0, 1 ms]")
        toks, reqs = p["tokens"][:], p["requests"][:]
        hq = m["hq"] / tp
        # prompts of each batch are not in /prefills: check single-prompt batches
        one = reqs == 1
        # The prefill attention: causal FLOPs at gemm_tflops, each score's bytes at beta.
        want_p = np.array([dense(t, 1) + L * hq * t * (t + 1) / 2 *
                           (4 * d / (C["gemm_tflops"] * 1e12) +
                            (12 if t <= 8192 else 20) / (C["beta_gbps"] * 1e9))
                           for t in toks[one]])
        err = np.max(np.abs(p["t_predicted"][:][one] / want_p - 1)) if one.any() else 0
        if not one.any() or err > 1e-9:
            fails.append(f"{name}: prefill predictions off the recomputation by {err}")
        if not np.allclose(p["t_advance"][:], p["t_predicted"][:]):
            fails.append(f"{name}: a prefill did not advance the clock by its prediction")
        sm = f["summary"].attrs
        fig = json.loads(f["config/resolved"][()])["model"]["figures"]
        if (sm["prefills"] != len(toks) or sm["prefill_tokens"] != toks.sum() or
                sm["model_weight_bytes"] != fig["weight_bytes"] or
                abs(sm["prefill_time_s"] / p["t_advance"][:].sum() - 1) > 1e-9):
            fails.append(f"{name}: /summary's prefill and model figures disagree with the file")
        # vLLM's convention: the prefill samples the first token.
        done = q["state"][:] == 3
        if np.any(q["generated"][:][done] != q["decode_len"][:][done]):
            fails.append(f"{name}: finished requests did not generate decode_len tokens")
        print(f"{name}: {len(rows)} steps, mean {1e3 * s['t_predicted'][:].mean():.2f} ms, "
              f"{len(toks)} prefills")

for f in fails:
    print("FAIL", f)
sys.exit(1 if fails else 0)
