#!/usr/bin/env bash
# The corpus' fourteenth source (GPUStack's Qwen3-8B on one H100: vLLM 0.11.0 at 1-8 at once,
# SGLang 0.5.3 at 4; fifty-first session, 2026-12-07), from the repository root with a CPU
# build in build-dev: the new files alone, then held out by source over the whole corpus.
set -euo pipefail
out=bench/results/2026-12-07-gpustack-source
build-dev/pkvsim validate experiments/validation/*qwen3-8b* > $out/validate_new.txt 2>&1
# held out by source, the whole corpus (about 4.5 minutes; each fold's constants on stderr);
# experiments/planning/held_out.json is its --json
build-dev/pkvsim validate --by-source --iterations 25 --json $out/validate_by_source.json \
  > $out/validate_by_source.txt 2> $out/validate_by_source_folds.txt
