#!/usr/bin/env bash
# validation.fits_engine: the mixture-of-experts file fits no engine's constants (fifty-first
# session, 2026-12-07), from the repository root with a CPU build in build-dev.
set -euo pipefail
out=bench/results/2026-12-07-fits-engine
v1=$(grep -l '"engine": "vllm@0.\(8\|9\|10\)\|"engine": "vllm"' experiments/validation/*.json)
# the vLLM files held out in turn (V1's three sources among them)
build-dev/pkvsim validate --by-source --iterations 25 $v1 > $out/subset_vllm.txt 2>&1
# held out by source, the whole corpus (about 7.5 minutes; each fold's constants on stderr);
# experiments/planning/held_out.json is its --json
build-dev/pkvsim validate --by-source --iterations 25 --json $out/validate_by_source.json \
  > $out/validate_by_source.txt 2> $out/validate_by_source_folds.txt
