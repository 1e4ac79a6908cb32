#!/usr/bin/env bash
# Installs what memkit needs (Debian packages), builds it, makes `import memkit` work
# for python3 (scripts/link_python.sh), and runs its main job: a replay of a real
# PyTorch allocation trace on the simulated device, with the figures on stdout and a
# self-contained HTML report in report.html.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
targets=(memkit_cli)
# The Python package, where cmake found pybind11 (it prints why not otherwise).
if cmake --build build --target help | grep '^memkit_python:' >/dev/null; then
  targets+=(memkit_python)
fi
cmake --build build -j"${MEMKIT_JOBS:-2}" --target "${targets[@]}"
if [[ " ${targets[*]} " == *" memkit_python "* ]]; then
  scripts/link_python.sh build
fi
build/memkit replay data/traces/resnet50_train.trace.csv.gz --min-capacity --html report.html
