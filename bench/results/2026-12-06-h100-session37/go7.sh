#!/usr/bin/env bash
# Call 2 of the 37th session: test_kernels_gpu with the long-rows planner's calibration
# kept alive (a dangling pointer at 23fff15), racecheck on its quick mode, then on an
# H200 the speed and type tables and the served model's type runs.
out=$1
SECONDS=0
[ -d .bundle ] || tar xJf .gpu/bundle.txz
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case $gpu in
*H200*) parts="tests sanitize speed types dims own" ;;
*) parts="tests sanitize" ;;
esac
TESTS="test_kernels_gpu" TOOLS=racecheck DEADLINE=${DEADLINE:-560} scripts/gpu_session_backlog.sh "$out" $parts
rm -rf "$out/w"
echo "total $SECONDS s"
