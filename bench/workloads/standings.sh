#!/bin/bash
# Where every loop of the suite stands on the GPU machine: each loop's latest run (either
# card), from the compare result files in the order they were committed, less the runs
# made under other settings (emptied every step, a memory limit, timing, pinned threads)
# and the files of other measurements (kernel time, call cost, graphs). Needs no GPU.
#   bash bench/workloads/standings.sh [--allocators pytorch memkit]
set -eu
cd "$(dirname "$0")/../.."
files=()
for f in $(git log --diff-filter=A --format= --name-only --reverse -- bench/workloads/results/ |
           grep 'json$' | grep -v -E 'empty|limit|timing|pinned|kernel-time|call-cost|graph'); do
  [ -e "$f" ] && files+=("$f")
done
echo "${#files[@]} result files"
options=("$@"); [ $# -gt 0 ] || options=(--allocators pytorch memkit)
python3 bench/workloads/workloads.py table --latest "${options[@]}" -- "${files[@]}"
