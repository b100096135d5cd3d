#!/bin/bash
# git bisect run bisect.sh routing|iterations: builds pkvsim without CUDA in /tmp/bisb,
# runs `pkvsim bench fleet` and calls the revision good when, at 8 rows, the
# least-requests router takes under 5 us a request at 1,000 replicas (routing), or one
# replica runs over 1.9M replica-iterations a second (iterations). Appends each
# revision's figure to /tmp/bisect.log.
cmake -S . -B /tmp/bisb -DPKV_CUDA=OFF -DPKV_MPI=OFF > /dev/null 2>&1 || exit 125
make -C /tmp/bisb -j2 pkvsim > /dev/null 2>&1 || exit 125
/tmp/bisb/pkvsim bench fleet --out /tmp/bisect.txt > /dev/null 2>&1 || exit 125
if [ "$1" = routing ]; then
  x=$(grep "^| 1000 | 8 " /tmp/bisect.txt | awk -F'|' '{print $8}'); good="x < 5"
else
  x=$(grep "^| 1 | 8 " /tmp/bisect.txt | awk -F'|' '{print $7}'); good="x > 1.9e6"
fi
echo "$(git rev-parse --short HEAD) $1 $x" >> /tmp/bisect.log
python3 -c "import sys; x = float('$x'); sys.exit(0 if $good else 1)"
