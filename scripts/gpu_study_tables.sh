#!/usr/bin/env bash
# gpu_study_tables.sh W: the study's closed-loop tables on the cuda backend (issue 49, item 7),
# /summary recording only, each run under STUDY_S seconds (default 75), outputs in W. A
# sweep stopped by the cap leaves W/NAME.h5.points; copied into .gpu/points (with any
# assembled NAME.h5) and carried into the next call, the same script resumes them.
# Run through scripts/gpu_session_backlog.sh OUT scripts/gpu_study_tables.sh.
w=$1
[ -d .gpu/points ] && cp -r .gpu/points/. "$w/"
for e in paper/table2_bimodal_b8 paper/table2_uniform_b8 paper/table2_zipf_b8 paper/table2_bimodal_b4 \
  policy/uniform_b8 policy/zipf_b8 policy/bimodal_b4; do
  n=$(basename $e)
  sed 's/"record": *"steps"/"record": "summary"/' experiments/$e.json > experiments/$e.summary.json
  t0=$SECONDS
  timeout --signal=INT ${STUDY_S:-75} .bundle/run pkvsim run experiments/$e.summary.json -b cuda -q \
    -o "$w/$n.h5" > "$w/$n.log" 2>&1
  echo "$n rc $? $((SECONDS - t0)) s" | tee -a "$w/study.txt"
  rm -f experiments/$e.summary.json
done
