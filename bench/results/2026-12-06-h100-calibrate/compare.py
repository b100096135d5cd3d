#!/usr/bin/env python3
"""The derived H100 preset's constants against the H100's measured calibration, and the
H100's isolated-kernel route models against the H200's (both `pkvsim calibrate --groups 4`).
Usage: compare.py DERIVED.json H100-MEASURED.json H200-MEASURED.json"""
import json, sys

der, h100, h200 = (json.load(open(p)) for p in sys.argv[1:4])
served = dict(der, **der["served_model"])
print("| constant | derived | measured (H100) | derived / measured |\n|---|---|---|---|")
for k in ("beta_gbps", "gemm_gbps", "gemm_tflops", "gemm_us", "prefill_attn_tflops", "swap_gbps"):
    print(f"| {k} | {served[k]:.4g} | {h100[k]:.4g} | {served[k] / h100[k]:.3f} |")
for w in sorted(h100["gemm_tflops_at"], key=int):
    a, b = served["gemm_tflops_at"][w], h100["gemm_tflops_at"][w]
    print(f"| gemm_tflops_at {w} rows | {a:.4g} | {b:.4g} | {a / b:.3f} |")
print("\n| route (isolated kernels, G=4) | a CTA's rate H100 / H200 | peak H100 / H200 |\n|---|---|---|")
for r, m in h100["route_model"].items():
    o = h200["route_model"][r]
    print(f"| {r} | {m['cta_gbps']:.1f} / {o['cta_gbps']:.1f} = {m['cta_gbps'] / o['cta_gbps']:.3f} "
          f"| {m['peak_gbps']:.0f} / {o['peak_gbps']:.0f} = {m['peak_gbps'] / o['peak_gbps']:.3f} |")
print(f"| FP8 KV (kv_fp8_cta_gbps) | {h100['kv_fp8_cta_gbps']:.2f} / {h200['kv_fp8_cta_gbps']:.2f} = "
      f"{h100['kv_fp8_cta_gbps'] / h200['kv_fp8_cta_gbps']:.3f} | |")
print(f"| read stream (beta_gbps) | | {h100['beta_gbps']:.0f} / {h200['beta_gbps']:.0f} = "
      f"{h100['beta_gbps'] / h200['beta_gbps']:.3f} |")
print(f"\nthe derived preset scales a CTA's rate by {der['derived']['scaled']['cta_bandwidth']} "
      f"and read rates by {der['derived']['scaled']['bandwidth']}")
