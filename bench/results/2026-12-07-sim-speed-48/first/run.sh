#!/bin/bash
# three builds alternated: d9090c7, d9090c7 with the closed-loop draw fix (5b71852) backported, HEAD
for i in 1 2 3; do
  for b in d9o:/tmp/d9o/b d9fix:/tmp/d9/b head:/work/main/build-dev; do
    n=${b%%:*}; p=${b#*:}
    $p/pkvsim bench sim --steps 50000 --out /tmp/sp/bench_sim_${n}_$i.txt > /dev/null
  done
done
echo done
