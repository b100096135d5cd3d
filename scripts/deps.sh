#!/usr/bin/env bash
# Install the Debian/Ubuntu packages pkvsim needs, only those missing.
set -euo pipefail
pkgs=(build-essential cmake pkg-config libgsl-dev libhdf5-dev libcjson-dev hdf5-tools python3
      python3-h5py python3-matplotlib python3-pandas openmpi-bin libopenmpi-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
