#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run):
#   1. Release with warnings as errors: every test.
#   2. AddressSanitizer + UndefinedBehaviorSanitizer, validation on: every test.
#   3. ThreadSanitizer: the concurrency tests (names matching stress/thread/concurren).
#   4. The fuzz seed corpora as regression tests (replayed in 1 and 2; with clang,
#      also through the libFuzzer binaries under ASan/UBSan).
# Any sanitizer report fails the run. Build dirs: build/, build-asan/, build-tsan/,
# build-fuzz/. MEMKIT_JOBS sets the parallelism (default 2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${MEMKIT_JOBS:-2}
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
export CTEST_OUTPUT_ON_FAILURE=1
step() { echo; echo "=== $* ($(date +%T))"; }

step "1/4 Release, -Werror"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMKIT_WERROR=ON
cmake --build build -j"$jobs"
ctest --test-dir build -j"$jobs"

step "2/4 AddressSanitizer + UndefinedBehaviorSanitizer, validation on"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMKIT_WERROR=ON \
  -DMEMKIT_SANITIZE=address,undefined -DMEMKIT_VALIDATE=ON -DMEMKIT_BENCH=OFF \
  -DCMAKE_CXX_FLAGS=-fno-sanitize-recover=all -DCMAKE_C_FLAGS=-fno-sanitize-recover=all
cmake --build build-asan -j"$jobs"
# Tests that open the system's Vulkan driver run apart, with Mesa's lavapipe preloaded:
# the Vulkan loader unloads it at vkDestroyInstance, and a one-time allocation its
# globals still held then reads as a leak (128 bytes, Mesa 22.3.6-1+deb12u2).
vulkan_tests='vulkan|Vulkan|gpu_backends_report_unavailable'
ctest --test-dir build-asan -j"$jobs" -E "$vulkan_tests"
lavapipe=$(ls /usr/lib/*/libvulkan_lvp.so 2>/dev/null | head -1 || true)
LD_PRELOAD=$lavapipe ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 \
  ctest --test-dir build-asan -j"$jobs" -R "$vulkan_tests"

step "3/4 ThreadSanitizer: concurrency tests"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMKIT_WERROR=ON \
  -DMEMKIT_SANITIZE=thread -DMEMKIT_BENCH=OFF
cmake --build build-tsan -j"$jobs" --target memkit_tests
build-tsan/tests/memkit_tests --gtest_filter='*stress*:*Stress*:*thread*:*Thread*:*concurren*:*Concurren*'

step "4/4 fuzz corpora"
ctest --test-dir build-asan -L fuzz
if command -v clang++ >/dev/null; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DMEMKIT_FUZZ=ON \
    -DMEMKIT_SANITIZE=address,undefined -DCMAKE_CXX_FLAGS=-fno-sanitize-recover=all \
    -DMEMKIT_TESTS=OFF -DMEMKIT_BENCH=OFF
  for t in api trace planner; do
    cmake --build build-fuzz -j"$jobs" --target "fuzz_$t"
    # -runs=0: replay the corpus only, no mutation.
    build-fuzz/fuzz_$t -runs=0 fuzz/corpus/$t
  done
else
  echo "clang++ not found: libFuzzer replay skipped (the corpora ran as replay tests above)"
fi
echo; echo "=== all passed ($(date +%T))"
