#!/bin/bash
# Cache lines an allocate or free fetches when the allocator's records are cold, in a
# trace's steady state: bench/cold_replay (which touches 96 KiB of other memory before
# every call) under callgrind's cache model (32 KiB L1, 64 KiB last level), counted
# inside memkit's allocate and free only, over the whole trace and over its first 10
# steps; the difference divided by the events between. Needs valgrind and a build
# with the benchmarks. Prints instructions and L1 misses (reads + writes) an event.
#   bench/workloads/cold_misses.sh build/bench/cold_replay data/traces/workloads/T.trace.csv.gz [segments]
set -eu
driver=$1; trace=$2; policy=${3:-default}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/steady_split.sh"
split_steady cold_misses "$trace" "$work"
count() {
  valgrind --tool=callgrind --cache-sim=yes --D1=32768,8,64 --LL=65536,16,64 --I1=32768,8,64 \
    --callgrind-out-file="$work/$1.out" \
    --toggle-collect='memkit::allocator::allocate(*' --toggle-collect='memkit::allocator::free(*' \
    "$driver" "$work/$1.csv" "$policy" 96 > /dev/null 2>&1
  callgrind_annotate --show=Ir,D1mr,D1mw "$work/$1.out" |
    awk '/PROGRAM TOTALS/ {gsub(",", ""); print $1, $3, $5}'
}
count full > "$work/full.txt" & count first10 > "$work/first10.txt"; wait
read -r ir_full mr_full mw_full < "$work/full.txt"; read -r ir_first mr_first mw_first < "$work/first10.txt"
awk -v n="$steady_events" -v i=$((ir_full - ir_first)) \
  -v m=$((mr_full + mw_full - mr_first - mw_first)) -v name="$(basename "$trace" | cut -d. -f1)" \
  'BEGIN { printf "%s %.0f instructions, %.2f L1 misses an event\n", name, i / n, m / n }'
