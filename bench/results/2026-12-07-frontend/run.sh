#!/usr/bin/env bash
# The server's front-end (request.frontend_us, frontend_holds) and vllm@0.6.0 refitted
# (forty-ninth session, 2026-12-07), from the repository root with a CPU build in build-dev.
set -euo pipefail
out=bench/results/2026-12-07-frontend
v06=$(grep -l '"engine": "vllm@0.6' experiments/validation/*.json)
# the shipped profile refitted on its role-"fit" files (the others held out)
build-dev/pkvsim fit --engine experiments/engines/vllm@0.6.0.json $v06 --iterations 60 \
  -o /tmp/vllm060_fit.json > $out/fit_vllm060.txt 2>&1
# held out by source, the whole corpus (about 7 minutes; each fold's constants on stderr)
build-dev/pkvsim validate --by-source --iterations 25 --json $out/validate_by_source.json \
  > $out/validate_by_source.txt 2> $out/validate_by_source_folds.txt
# the A100's all-reduce as published (scripts/derive_gpu_presets.py), SGLang 0.4's folds alone
build-dev/pkvsim validate --by-source --iterations 25 \
  $(grep -l '"engine": "sglang@0.[45]' experiments/validation/*.json) \
  > $out/subset_sglang04_a100_allreduce14.txt
# the H100 files with pkvsim's own loop on the cuda and model backends: h100_own_loop/own.sh
# on the GPU machine (its .gpu/ is this folder's exp/ and a bundle of build-fi's pkvsim)
