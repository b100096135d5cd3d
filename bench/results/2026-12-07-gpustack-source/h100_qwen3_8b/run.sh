#!/usr/bin/env bash
# The qwen3-8b preset on a real H100 (nvidia-h100-x1, 2026-12-07, fifty-first session): the
# cuda backend (pkvsim's own kernels and loop, no engine profile) against the model backend on
# h100-sxm.json. From the repository root on the GPU machine with the bundle (.bundle/run);
# the experiments' paths were ../../ from .gpu/q8/ there.
set -euo pipefail
for f in q8c1 q8c8; do for b in model cuda; do
  .bundle/run pkvsim run .gpu/q8/$f.json -b $b -q -o /tmp/${f}_$b.h5 --json "$OUT/${f}_$b.json"
done; done
