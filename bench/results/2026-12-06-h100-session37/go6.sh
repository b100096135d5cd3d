#!/usr/bin/env bash
# Call 1 of the 37th session: the GPU tests at this revision, then on an H200 the speed
# and type tables and the served model's type runs; on an H100 the sanitizers instead.
out=$1
SECONDS=0
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case $gpu in
*H200*) parts="tests speed types dims own" ;;
*) parts="tests sanitize" ;;
esac
TESTS="test_kernels_gpu test_cuda_backend test_noalloc test_model_gpu test_model_gpu_d64 test_model_gpu_d256" \
  DEADLINE=${DEADLINE:-565} scripts/gpu_session_backlog.sh "$out" $parts
rm -rf "$out/w"
echo "total $SECONDS s"
