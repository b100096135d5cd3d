#!/bin/bash
cmake -S . -B /tmp/bisb2 -DPKV_CUDA=OFF -DPKV_MPI=OFF > /dev/null 2>&1 || exit 125
make -C /tmp/bisb2 -j2 pkvsim > /dev/null 2>&1 || exit 125
/tmp/bisb2/pkvsim bench fleet --out /tmp/eq/bis2.txt > /dev/null 2>&1 || exit 125
r=$(grep "^| 1 | 8 " /tmp/eq/bis2.txt | awk -F'|' '{print $7}')
echo "$(git rev-parse --short HEAD) it/s $r" >> /tmp/eq/bis2.log
python3 -c "import sys; sys.exit(0 if float('$r') > 1.9e6 else 1)"
