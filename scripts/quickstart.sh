#!/usr/bin/env bash
# Install what is missing, build, and run experiments/quickstart.json (the model
# backend where no GPU is present). Writes quickstart.h5 in the current folder.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/deps.sh"
"$here/scripts/build.sh" "$here/build"
"$here/build/pkvsim" run "$here/experiments/quickstart.json" -o quickstart.h5
