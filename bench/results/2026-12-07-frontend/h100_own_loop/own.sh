#!/usr/bin/env bash
# The served runs of LambdaLabs' and vLLM CI's H100 files with pkvsim's own loop, on the
# cuda backend (real kernels) and the model backend, for the comparison of their figures.
set -u
[ -d .bundle ] || tar xJf .gpu/bundle.txz
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $OUT/card.txt
for f in .gpu/exp/*.json; do
  n=$(basename $f .json)
  for b in cuda model; do
    /usr/bin/time -f "$n $b %e s" timeout 200 .bundle/run pkvsim run -q $f -b $b \
      --json $OUT/$n-$b.json -o /tmp/$n-$b.h5 2>> $OUT/log.txt
    echo "$n $b rc $?" >> $OUT/log.txt
  done
done
cat $OUT/log.txt
