#!/bin/bash
# Instructions an event inside memkit's allocate and free in a trace's steady state:
# callgrind over the whole trace and over its first 10 steps, the difference divided
# by the events between. Needs valgrind. Extra arguments go to `memkit replay`.
#   bench/workloads/steady_instructions.sh build/memkit data/traces/workloads/T.trace.csv.gz [--policy segments]
set -eu
memkit=$1; trace=$2; shift 2; extra=("$@")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/steady_split.sh"
split_steady steady_instructions "$trace" "$work"
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    --toggle-collect='memkit::allocator::allocate(*' --toggle-collect='memkit::allocator::free(*' \
    "$memkit" replay "$1" ${extra[@]+"${extra[@]}"} 2>&1 >/dev/null | awk '/Collected/ {gsub(",", "", $4); print $4}'
}
full=$(count "$work/full.csv"); first=$(count "$work/first10.csv")
echo "$(basename "$trace" | cut -d. -f1) $(( (full - first) / steady_events ))"
