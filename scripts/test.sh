#!/usr/bin/env bash
# Install what is missing, build (CUDA kernels compiled where nvcc exists), run the
# whole test suite. GPU tests skip cleanly without a GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/deps.sh"
"$here/scripts/build.sh" "$here/build"
# The checks labelled ci (allocation failures, queueing statistics, input mutation, the
# shipped sweeps: minutes) run in CI only (.ci/run).
cd "$here/build" && ctest --output-on-failure -j2 -LE ci
