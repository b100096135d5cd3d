#!/usr/bin/env bash
# Install what is missing, build, and run experiments/quickstart.json (Llama-3.1-8B on
# one H200 replaying the Azure code trace; the model backend where no GPU is present).
# Writes quickstart.h5 and its timeline, quickstart.png, in the current folder.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/deps.sh"
if command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "quickstart: building with the CUDA kernels (minutes; they run where a GPU is usable;" \
    "scripts/build.sh build -DPKV_CUDA=OFF leaves them out)"
fi
"$here/scripts/build.sh" "$here/build"
"$here/build/pkvsim" run "$here/experiments/quickstart.json" -o quickstart.h5
# the plot: the first python3 that has h5py and matplotlib (the distribution's, which
# deps.sh installs, may not be the first on PATH)
for py in python3 /usr/bin/python3 ""; do
  [ -n "$py" ] && command -v "$py" > /dev/null && "$py" -c "import h5py, matplotlib" 2> /dev/null && break
done
if [ -n "$py" ]; then
  "$py" "$here/analysis/plot.py" timeline quickstart.h5 -o quickstart.png
else
  echo "quickstart: the plot needs python3 with h5py and matplotlib (scripts/deps.sh installs them)"
fi
