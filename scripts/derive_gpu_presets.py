#!/usr/bin/env python3
"""Derive calibrations for GPUs pkvsim has not measured from the H200's measured one.

Each derived file is the measured H200 calibration for a served model (experiments/
calibration/h200.json: its top level with its served_model section) with its rates scaled by the other GPU's datasheet figures over
the H200's: read rates (beta, the GEMMs' weight stream, each route's peak and merge
rates) by memory bandwidth, a CTA's read rate by bandwidth per SM, GEMM and prefill
rates (and the prefill's per-token cost) by dense FP16 tensor throughput, the all-reduce's
bandwidth by the GPU-to-GPU link (NVLink, or PCIe where there is none), host-link
swaps by the PCIe generation (a constant measured on that GPU, `measured`, in place of
its ratio, or one published for that GPU, `published_constants`); fixed costs (launches,
host work) and the FP8 KV CTA's
rate (kv_fp8_cta_gbps: bound by instruction issue, not by memory) stay the H200's. So a
derived GPU keeps the H200's measured efficiency against its own datasheet: a guess,
marked `derived` with its sources, until `pkvsim calibrate` on that GPU replaces it. It
keeps the H200 file's layout: what the served_model section holds there is its own
served_model section (a study-layer run on a derived GPU is an error, not a guess).

Usage: derive_gpu_presets.py [OUT_DIR]   (default: experiments/calibration beside this
script's repository; the test checks the shipped files are this script's output)."""
import copy
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BASE = "h200.json"
SECTION = "served_model"

# Datasheet figures: memory bandwidth (GB/s), dense FP16 tensor TFLOP/s (no sparsity),
# SMs, memory (GB), host link (PCIe GB/s each way). Sources in each entry.
H200 = {"bw": 4800, "tflops": 989.4, "sms": 132, "pcie": 64, "memory_gb": 141, "link": 900}
GPUS = {
    "h100-sxm": {
        "gpu_name": "NVIDIA H100 80GB HBM3", "bw": 3350, "tflops": 989.4, "sms": 132,
        "memory_gb": 80, "pcie": 64, "link": 900,
        "sources": ["NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: 3.35 TB/s HBM3, "
                    "FP16 tensor 1,979 TFLOPS with sparsity, half without, 80 GB, NVLink "
                    "900 GB/s)",
                    "NVIDIA Hopper architecture whitepaper (H100 SXM5: 132 SMs)"],
        # Published measurements of the GPU, against the derived constant each checks.
        "published": [
            {"what": "dense BF16 matmul, the best of a shape sweep (torch 2.7.0, CUDA 12.6)",
             "value": 794.5, "unit": "TFLOP/s",
             "source": "stas00/ml-engineering, compute/accelerator/README.md, 'Maximum Achievable "
                       "Matmul FLOPS' (H100 SXM; the table gives the H200 the same)",
             "against": "gemm_tflops kept at the H200's (x1.0): the same die, as the table says"},
            {"what": "cuBLAS BF16 GEMM at 8192 x 8192 x 8192", "value": 797.8, "unit": "TFLOP/s",
             "source": "pranjalssh/fast.cu README ('Run on H100 SXM'; a rerun on CUDA 12.4 got "
                       "518.6, its issue 13)",
             "against": "gemm_tflops"},
            {"what": "device-to-device copy (CUDA 12.6)", "value": 2903, "unit": "GB/s",
             "source": "aigatech/vpbenchmarking README (H100 SXM5, 86.7% of 3.35 TB/s)",
             "against": "the read stream (route_model peak_gbps, beta): a copy reads and writes, "
                        "a decode step only reads; the derived 3,045 GB/s is 4.9% above it"},
            {"what": "FlashAttention-3 paged decode, batch 16, 32 heads, head 128, 4,000 tokens",
             "value": 1849, "unit": "GB/s",
             "source": "Dao-AILab/flash-attention issue 1572 (H100)",
             "against": "a kernel at a small batch, not the stream: below every route's peak"}],
        # Measured on this GPU: a constant the datasheet ratio would otherwise guess.
        "measured": {
            "cta_bandwidth": 0.978,
            "what": "a CTA's read rate over the H200's, pkvsim calibrate --groups 4 on each GPU "
                    "(isolated kernels): ref_paged 0.988, pkv_bucket 0.984, pkv_workqueue 0.964, "
                    "FP8 KV 0.977, their mean (FlashInfer's CUDA-core path 0.85; the two routes "
                    "whose H200 fit put their time in the peak left out); the same SM at the same "
                    "clocks streams what the H200's does, where the bandwidth per SM (x0.698) said "
                    "30% less",
            "source": "bench/results/2026-12-06-h100-calibrate/compare.md (H100 2026-12-06, H200 "
                      "2026-12-05); the served model's steps on an H100 agree (bench/RESULTS.md, "
                      "the derived H100 preset against the cuda backend: step MAPE 6.5% derived, "
                      "1.9% with a CTA's rate x1.0)"}},
    "a100-80gb": {
        "gpu_name": "NVIDIA A100-SXM4-80GB", "bw": 2039, "tflops": 312, "sms": 108,
        "memory_gb": 80, "pcie": 32, "link": 600,
        "sources": ["NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM: 2,039 GB/s HBM2e, "
                    "FP16 tensor 312 TFLOPS dense, PCIe Gen4, NVLink 600 GB/s)",
                    "NVIDIA Ampere architecture whitepaper (A100: 108 SMs)"],
        "published": [
            {"what": "dense BF16 matmul, the best of a shape sweep", "value": 271.2, "unit": "TFLOP/s",
             "source": "stas00/ml-engineering, compute/accelerator/README.md, 'Maximum Achievable "
                       "Matmul FLOPS' (A100 SXM, 86.9% of 312)",
             "against": "gemm_tflops, derived 279.9: 3.2% above it"}],
        # A read stream published for this GPU: the read rates scale by it over the H200's
        # measured stream (beta) in place of the datasheet bandwidths' ratio.
        "published_read_gbps": {
            "value": 1800,
            "what": "a read kernel's stream on an A100 80GB SXM, 88% of its 2,039 GB/s (Nsight "
                    "Compute's DRAM throughput), where the H200's measured read stream is 91% of "
                    "its 4,800: HBM2e reached less of its datasheet than HBM3e (the datasheet "
                    "ratio gave 1,853 GB/s, 2.9% above it)",
            "source": "NVIDIA Developer Forum, 'Trouble to Reach Peak Bandwidth of A100' (A100 80GB SXM)"},
        # Published on this GPU: a constant taken as published in place of the H200's.
        "published_constants": {
            "allreduce_us": {
                "value": 14.1,
                "what": "one all-reduce's fixed time at 8 GPUs: vLLM's custom all-reduce at 2 KB "
                        "and 16 KB, 14.0 and 14.2 us (TP 4: 13.5 and 12.1; the bandwidth between 2 "
                        "and 4 MB at TP 4, 199 GB/s by the model's 2 (T - 1) / T x B, agrees with "
                        "the derived 204.7); the same harness on an H100 (sglang PR 2904) gives 9.3-"
                        "10.1 us at TP 8, where the H100's and H200's calibrations take 9.8",
                "source": "sgl-project/sglang PR 2688 (2024-12-31, its test_trt_reduce.py on A100 "
                          "GPUs, eager launches, 5000 calls timed); PR 2904 for the H100"}}},
    "l40s": {
        "gpu_name": "NVIDIA L40S", "bw": 864, "tflops": 362, "sms": 142, "memory_gb": 48,
        "pcie": 32, "link": 64,
        "sources": ["NVIDIA L40S datasheet (864 GB/s GDDR6, FP16 tensor 362 TFLOPS dense "
                    "(733 with sparsity), 48 GB, PCIe Gen4 x16 64 GB/s both ways, no NVLink: "
                    "its all-reduces cross PCIe)",
                    "NVIDIA Ada Lovelace architecture whitepaper (AD102 as in L40S: 142 SMs)"]},
    "b200": {
        "gpu_name": "NVIDIA B200", "bw": 7700, "tflops": 2250, "sms": 148, "memory_gb": 180,
        "pcie": 64, "link": 1800,
        "sources": ["NVIDIA HGX B200 specifications (per GPU: 180 GB HBM3e at 7.7 TB/s, "
                    "FP16/BF16 tensor 4.5 PFLOPS with sparsity, half without, NVLink 1.8 TB/s)",
                    "148 SMs as commonly reported (not in the datasheet)"]},
}
ROUTE_BW = ("peak_gbps", "merge_gbps")  # whole-GPU read rates
GEMM_TF = ("gemm_tflops", "prefill_attn_tflops")


def derive(base, name, g):
    read = g.get("published_read_gbps")
    bw = read["value"] / base["beta_gbps"] if read else g["bw"] / H200["bw"]
    tf = g["tflops"] / H200["tflops"]
    per_sm = g.get("measured", {}).get("cta_bandwidth", bw * H200["sms"] / g["sms"])
    c = copy.deepcopy(base)
    for k in ("note", "fit", "driver"):
        c.pop(k, None)
    c["gpu_name"], c["sm_count"], c["placeholder"] = g["gpu_name"], g["sms"], False
    c["beta_gbps"] = base["beta_gbps"] * bw
    c["gemm_gbps"] = base["gemm_gbps"] * bw
    for k in GEMM_TF:
        c[k] = base[k] * tf
    c["gemm_tflops_at"] = {w: round(v * tf, 3) for w, v in base["gemm_tflops_at"].items()}
    c["prefill_token_us"] = base["prefill_token_us"] / tf
    c["prefill_score_ps"] = base["prefill_score_ps"] / tf
    c["swap_gbps"] = base["swap_gbps"] * g["pcie"] / H200["pcie"]
    c["allreduce_gbps"] = round(base["allreduce_gbps"] * g["link"] / H200["link"], 3)
    # the H200's 141 GB datasheet memory reads as 140.4 GiB on the device: the same ratio
    c["memory_gib"] = round(g["memory_gb"] * base["memory_gib"] / H200["memory_gb"], 1)
    for m in c["route_model"].values():
        for k in ROUTE_BW:
            m[k] *= bw
        m["cta_gbps"] *= per_sm
    c["derived"] = {
        "from": BASE,
        "datasheet": {"memory_gbps": g["bw"], "fp16_dense_tflops": g["tflops"], "sm_count": g["sms"],
                      "memory_gb": g["memory_gb"], "pcie_gbps": g["pcie"], "link_gbps": g["link"]},
        "h200_datasheet": {"memory_gbps": H200["bw"], "fp16_dense_tflops": H200["tflops"],
                           "sm_count": H200["sms"], "pcie_gbps": H200["pcie"],
                           "link_gbps": H200["link"]},
        "scaled": {"bandwidth": round(bw, 6), "tflops": round(tf, 6), "cta_bandwidth": round(per_sm, 6)},
        "sources": g["sources"],
        "published": g.get("published", []),
    }
    if "measured" in g:
        c["derived"]["measured"] = g["measured"]
    if read:
        c["derived"]["published_read_gbps"] = read
    published = g.get("published_constants", {})
    for k, v in published.items():
        c[k] = v["value"]
    if published:
        c["derived"]["published_constants"] = published
    reads = (f"a published read stream of {read['value']} over the H200's measured {base['beta_gbps']:.0f} GB/s, "
             "derived.published_read_gbps" if read else f"memory bandwidth {g['bw']} over 4800 GB/s")
    c["note"] = (f"DERIVED, not measured: {BASE}'s {SECTION} (the H200's measured calibration for a full model) "
                 f"with read rates x{bw:.3f} ({reads}), a CTA's read "
                 f"rate x{per_sm:.3f} ({'measured' if 'measured' in g else 'bandwidth per SM'}), GEMM and prefill rates x{tf:.3f} (dense FP16 "
                 f"{g['tflops']} over 989.4 TFLOP/s), the all-reduce's bandwidth x{g['link'] / H200['link']:.3f} "
                 f"(the GPU-to-GPU link, {g['link']} over 900 GB/s), fixed costs the H200's"
                 + "".join(f", but {k} {v['value']} as published for this GPU (derived.published_constants)"
                           for k, v in published.items()) + "; by "
                 f"scripts/derive_gpu_presets.py. Replace it with `pkvsim calibrate` on a {g['gpu_name']} "
                 "and record the derived file's error against the measured one.")
    return c


def flat(base):
    """The H200 file as a served model's run applies it: its top level, its section's keys in place."""
    c = {k: v for k, v in base.items() if k not in ("study_layer", SECTION)}
    c.update(base[SECTION])
    return c


def sectioned(c, keys):
    """A derived calibration laid out as the H200 file is: the section's keys in the section."""
    out = {k: v for k, v in c.items() if k not in keys}
    out[SECTION] = {k: c[k] for k in c if k in keys}
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "experiments", "calibration")
    with open(os.path.join(ROOT, "experiments", "calibration", BASE)) as f:
        base = json.load(f)
    keys = set(base[SECTION]) - {"note", "date", "fit"}
    for name, g in GPUS.items():
        path = os.path.join(out, f"{name}-derived.json")
        with open(path, "w") as f:
            json.dump(sectioned(derive(flat(base), name, g), keys), f, indent=1)
            f.write("\n")
        print(path)


if __name__ == "__main__":
    main()
