#!/usr/bin/env bash
# build.sh BUILD_DIR [CMAKE_ARGS...]: configure and build; CUDA kernels are compiled
# for Hopper (sm_90a) wherever nvcc exists.
set -euo pipefail
dir=$1; shift
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cuda=()
if command -v nvcc >/dev/null; then cuda=(-DPKV_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a); fi
cmake -S . -B "$dir" -DPKV_WERROR=ON "${cuda[@]}" "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
