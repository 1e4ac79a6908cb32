#!/usr/bin/env bash
# Fuzzes one target for a given time with clang's libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer:  scripts/fuzz.sh api|trace|planner SECONDS [JOBS]
# New inputs go to build-fuzz/corpus/<target> (the seed corpus in fuzz/corpus/<target>
# is read, never written); a crash is saved as build-fuzz/crash-* and fails the script.
set -euo pipefail
target=${1:?usage: scripts/fuzz.sh api|trace|planner SECONDS [JOBS]}
seconds=${2:?usage: scripts/fuzz.sh api|trace|planner SECONDS [JOBS]}
jobs=${3:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MEMKIT_FUZZ_BUILD:-$root/build-fuzz}
[ -f "$root/fuzz/${target}_fuzz.cpp" ] || { echo "[memkit::fuzz] no target '$target' (fuzz/${target}_fuzz.cpp)" >&2; exit 2; }
command -v clang++ >/dev/null || { echo "[memkit::fuzz] clang++ not found: run scripts/setup.sh" >&2; exit 2; }
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DMEMKIT_FUZZ=ON \
  -DMEMKIT_SANITIZE=address,undefined -DCMAKE_CXX_FLAGS=-fno-sanitize-recover=all \
  -DMEMKIT_TESTS=OFF -DMEMKIT_BENCH=OFF >/dev/null
cmake --build "$build" --target "fuzz_$target" -j2
mkdir -p "$build/corpus/$target"
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd "$build"
parallel=()
[ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
# An input is a hang past 120 s: with validation after every call, one that maps ~100k
# pages of 4 KiB takes ~45 s here (each validation walks and sorts every page).
"$build/fuzz_$target" -max_total_time="$seconds" -max_len=4096 -timeout=120 "${parallel[@]}" \
  -print_final_stats=1 "$build/corpus/$target" "$root/fuzz/corpus/$target"
