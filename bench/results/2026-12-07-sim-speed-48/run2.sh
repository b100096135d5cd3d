#!/bin/bash
# clean sitting: three builds alternated (d9090c7, d9090c7 + the closed-loop draw fix 5b71852, HEAD), then bench fleet 8eeb652 vs HEAD
cd "$(dirname "$0")"
for i in 1 2 3; do
  for b in d9o:/tmp/d9o/b d9fix:/tmp/d9/b head:/work/main/build-dev; do
    n=${b%%:*}; p=${b#*:}
    $p/pkvsim bench sim --steps 50000 --out bench_sim_${n}_$i.txt > /dev/null
  done
done
for i in 1 2 3; do
  for b in 8eeb652:/tmp/bis/b head:/work/main/build-dev; do
    n=${b%%:*}; p=${b#*:}
    $p/pkvsim bench fleet --requests 100 --out bench_fleet_${n}_$i.txt > /dev/null
  done
done
echo done
