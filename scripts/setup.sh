#!/usr/bin/env bash
# Installs what memkit needs from Debian's packages. Safe to run again.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
  nlohmann-json3-dev libcli11-dev
  clang libclang-rt-dev clang-format
  chromium
  libvulkan-dev glslang-tools mesa-vulkan-drivers vulkan-validationlayers
  python3-dev pybind11-dev python3-pybind11 python3-pytest python3-numpy
)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
