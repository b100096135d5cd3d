#!/usr/bin/env bash
# One GPU call for the study's experiments (experiments/paper/*.json, or the names
# given), on the cuda backend, from the repository root of the GPU machine with the
# bundled programs in .bundle/. Each sweep writes TMP/NAME.h5; a call that would run
# past DEADLINE seconds (default 540) interrupts the sweep it is in (SIGINT: the file
# keeps its finished points, and a later call with that file in place resumes it).
# The files travel back as OUT/paper.tgz.partNN (15 MB pieces: cat | tar xz), the log
# as OUT/paper.log. Usage: gpu_session_paper.sh OUT [NAME...]
set -uo pipefail
out=${1:?usage: gpu_session_paper.sh OUT [NAME...]}
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(cd experiments/paper && ls *.json | sed 's/\.json$//'))
deadline=${DEADLINE:-540}
tmp=${TMP_H5:-/tmp/paper}
mkdir -p "$out" "$tmp"
log="$out/paper.log"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
for n in "${names[@]}"; do
  left=$((deadline - SECONDS))
  if [ "$left" -lt 20 ]; then echo "skipped $n: deadline" | tee -a "$log"; continue; fi
  t0=$SECONDS
  timeout --signal=INT --kill-after=30 "$left" .bundle/run pkvsim run "experiments/paper/$n.json" \
    --backend cuda -q -o "$tmp/$n.h5" > "$tmp/$n.log" 2>&1
  rc=$?
  echo "$n: rc $rc, $((SECONDS - t0)) s" | tee -a "$log"
  tail -3 "$tmp/$n.log" >> "$log"
done
(cd "$tmp" && tar cf - *.h5 | gzip -1 | split -b 15M -d - "$out/paper.tgz.part")
echo "gpu_session_paper: ${SECONDS} s" | tee -a "$log"
