#!/usr/bin/env bash
# with_h5py.sh SCRIPT ARGS...: run a Python test script under the first python3 that
# has h5py, numpy and pandas (the distribution's, which scripts/deps.sh installs, may
# not be the first python3 on PATH).
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import h5py, numpy, pandas" 2>/dev/null; then
    exec "$p" "$@"
  fi
done
echo "FAIL: no python3 with h5py, numpy and pandas (scripts/deps.sh installs them)"
exit 1
