#!/usr/bin/env bash
# 41st session, call 2: test_cuda_backend at the revision that lands (its adaptive comparison
# only where FlashInfer is built).
top=$1; out=$top; t0=$SECONDS
tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
nvidia-smi --query-gpu=name --format=csv,noheader
echo "rev $(cat .gpu/rev)"
timeout 150 .bundle/run test_cuda_backend > "$out/test_cuda_backend.log" 2>&1; echo "rc $?"
grep -E "FAIL|checks|proposer's least" "$out/test_cuda_backend.log"
echo "go16: $((SECONDS - t0)) s"
