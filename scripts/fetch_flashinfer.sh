#!/usr/bin/env bash
# Fetch the pinned flashinfer-python wheel with pip and unpack the headers the
# FlashInfer routes compile against: flashinfer/data/include and flashinfer/data/cccl
# (with nvcc 13.0 FlashInfer needs its bundled CCCL before the toolkit's on the
# include path). Usage: scripts/fetch_flashinfer.sh [DEST] (default third_party/).
# Prints the two include folders. The wheel is Apache-2.0 (its LICENSE is kept).
set -euo pipefail
version=0.7.4
here=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$here/third_party}/flashinfer-$version
if [ -d "$dest/include/flashinfer/attention" ] && [ -d "$dest/cccl" ]; then
  echo "$dest/include"; echo "$dest/cccl"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "flashinfer-python==$version"
whl=$(ls "$tmp"/flashinfer_python-"$version"-*.whl)
python3 - "$whl" "$tmp/x" <<'PY'
import sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist()
             if n.startswith(("flashinfer/data/include/", "flashinfer/data/cccl/"))
             or n.endswith("LICENSE")]
    z.extractall(out, names)
PY
mkdir -p "$dest"
mv "$tmp/x/flashinfer/data/include" "$dest/include"
mv "$tmp/x/flashinfer/data/cccl" "$dest/cccl"
find "$tmp/x" -name LICENSE -exec cp {} "$dest/" \; -quit 2>/dev/null || true
test -f "$dest/include/flashinfer/attention/decode.cuh"
test -f "$dest/include/flashinfer/attention/scheduler.cuh"
echo "$dest/include"; echo "$dest/cccl"
