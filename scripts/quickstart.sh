#!/usr/bin/env bash
# Install what is missing, build, and run experiments/quickstart.json (Llama-3.1-8B on
# one H200 replaying the Azure code trace; the model backend where no GPU is present).
# Writes quickstart.h5 and its timeline, quickstart.png, in the current folder.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/deps.sh"
"$here/scripts/build.sh" "$here/build"
"$here/build/pkvsim" run "$here/experiments/quickstart.json" -o quickstart.h5
python3 "$here/analysis/plot.py" timeline quickstart.h5 -o quickstart.png ||
  echo "quickstart: the plot needs python3 with h5py and matplotlib (scripts/deps.sh installs them)"
