#!/usr/bin/env bash
# vLLM V0's async output processing (request.async_output) and vllm@0.6.0 refitted with it
# (fiftieth session, 2026-12-07), from the repository root with a CPU build in build-dev.
set -euo pipefail
out=bench/results/2026-12-07-async-output
v06=$(grep -l '"engine": "vllm@0.6' experiments/validation/*.json)
# the shipped profile refitted on its role-"fit" files (the others held out)
build-dev/pkvsim fit --engine experiments/engines/vllm@0.6.0.json experiments/validation/*.json \
  --iterations 60 -o /tmp/vllm060_fit.json > $out/fit_vllm060.txt 2>&1
# vLLM 0.6's sources held out in turn (35 s)
build-dev/pkvsim validate --by-source --iterations 25 $v06 > $out/subset_vllm06.txt
# held out by source, the whole corpus (about 7 minutes; each fold's constants on stderr);
# experiments/planning/held_out.json is its --json
build-dev/pkvsim validate --by-source --iterations 25 --json $out/validate_by_source.json \
  > $out/validate_by_source.txt 2> $out/validate_by_source_folds.txt
