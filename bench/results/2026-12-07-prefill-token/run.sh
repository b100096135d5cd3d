#!/usr/bin/env bash
# gpu.prefill_token_us fitted only where the profile gives it above 0 (fifty-first session,
# 2026-12-07) and the derived A100's published read stream, from the repository root with a
# CPU build in build-dev.
set -euo pipefail
out=bench/results/2026-12-07-prefill-token
v06=$(grep -l '"engine": "vllm@0.6' experiments/validation/*.json)
# vLLM 0.6's sources held out in turn (35 s)
build-dev/pkvsim validate --by-source --iterations 25 $v06 > $out/subset_vllm06.txt
# held out by source, the whole corpus (about 7 minutes; each fold's constants on stderr);
# experiments/planning/held_out.json is its --json
build-dev/pkvsim validate --by-source --iterations 25 --json $out/validate_by_source.json \
  > $out/validate_by_source.txt 2> $out/validate_by_source_folds.txt
