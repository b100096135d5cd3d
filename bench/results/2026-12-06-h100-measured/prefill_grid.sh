#!/bin/bash
# prefill_grid.sh PKVSIM CAL GRIDDIR: each ref_paged grid run's prefill batches (GRIDDIR:
# grid_fitset.tar.xz unpacked) on the model backend with CAL against the H100's measured time.
pkvsim=$(realpath "$1") cal=$(realpath "$2") dir=$(realpath "$3") tmp=$(mktemp -d)
for j in "$dir"/*_ref_paged_*.json; do
  "$pkvsim" run "$j" --backend model -c "$cal" -q -o "$tmp/$(basename "$j" .json).h5" 2> /dev/null
done
/usr/bin/python3 - "$dir" "$tmp" <<'PY'
import glob, sys
import h5py
d, tmp = sys.argv[1:]
rows = []
for f in sorted(glob.glob(f"{d}/*_ref_paged_*.h5")):
    c = h5py.File(f)["prefills"]
    m = h5py.File(f"{tmp}/{f.split('/')[-1]}")["prefills"]
    rows += [(int(c["tokens"][i]), c["t_device"][i] * 1e3, m["t_predicted"][i] * 1e3)
             for i in range(min(len(c["tokens"]), len(m["tokens"])))]
print("| prompt tokens | H100 ms | model ms | error |\n|---|---|---|---|")
for t, cd, mp in sorted(rows):
    print("| %d | %.2f | %.2f | %+.1f%% |" % (t, cd, mp, 100 * (mp / cd - 1)))
PY
rm -rf "$tmp"
