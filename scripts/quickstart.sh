#!/usr/bin/env bash
# Installs what memkit needs (Debian packages), builds it, and runs its main job:
# a replay of a real PyTorch allocation trace on the simulated device, with the
# figures on stdout and a self-contained HTML report in report.html.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"${MEMKIT_JOBS:-2}" --target memkit_cli
build/memkit replay data/traces/resnet50_train.trace.csv.gz --min-capacity --html report.html
