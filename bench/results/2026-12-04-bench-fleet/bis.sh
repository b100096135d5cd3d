#!/bin/bash
# git bisect run: good when the least_requests router takes under 5 us a request at 1,000 replicas
cmake -S . -B /tmp/bisb -DPKV_CUDA=OFF -DPKV_MPI=OFF > /dev/null 2>&1 || exit 125
make -C /tmp/bisb -j2 pkvsim > /dev/null 2>&1 || exit 125
/tmp/bisb/pkvsim bench fleet --out /tmp/eq/bis.txt > /dev/null 2>&1 || exit 125
us=$(grep "^| 1000 | 8 " /tmp/eq/bis.txt | awk -F'|' '{print $8}')
echo "$(git rev-parse --short HEAD) route us $us" >> /tmp/eq/bis.log
python3 -c "import sys; sys.exit(0 if float('$us') < 5 else 1)"
