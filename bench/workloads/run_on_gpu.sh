#!/bin/bash
# On the GPU machine: builds libmemkit_torch.so (and, with MEMKIT_GPU_TESTS=1, the
# test suite, run with validation on; MEMKIT_GPU_TEST_FILTER selects tests), then runs workloads.py with the arguments
# given, writing logs to $OUT. MEMKIT_SOURCE names another tree to build. Debian dev packages the build needs and the machine
# lacks are unpacked from .deps/*.deb when present (apt-get download them here).
#   bash bench/workloads/run_on_gpu.sh record --out $OUT/traces
#   bash bench/workloads/run_on_gpu.sh compare --json $OUT/compare.json
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
source=${MEMKIT_SOURCE:-$root}  # the tree to build (default: this one)
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
deps=/tmp/memkit-deps; mkdir -p "$deps"
for f in "$root"/.deps/*.deb; do [ -e "$f" ] && dpkg -x "$f" "$deps"; done
build=/tmp/memkit-gpu-build-$(echo "$source" | md5sum | cut -c1-8)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
start=$(date +%s)
# The library is built without validation (it would check every invariant after
# every call); the tests, when asked for, in a second build with it on.
cmake -S "$source" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMKIT_BENCH=OFF \
  -DMEMKIT_TESTS=OFF -DCMAKE_PREFIX_PATH="$deps/usr" > "$out/build.log" 2>&1
cmake --build "$build" --target memkit_torch >> "$out/build.log" 2>&1
rc=$?; echo "build: rc $rc in $(( $(date +%s) - start )) s"
[ $rc = 0 ] || { tail -30 "$out/build.log"; exit 1; }
if [ "${MEMKIT_GPU_TESTS:-0}" = 1 ]; then
  cmake -S "$source" -B "$build-validate" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMKIT_VALIDATE=ON \
    -DMEMKIT_BENCH=OFF -DCMAKE_PREFIX_PATH="$deps/usr" > "$out/build-tests.log" 2>&1
  cmake --build "$build-validate" --target memkit_tests >> "$out/build-tests.log" 2>&1
  timeout 200 "$build-validate/tests/memkit_tests" --gtest_brief=1 \
    ${MEMKIT_GPU_TEST_FILTER:+--gtest_filter=$MEMKIT_GPU_TEST_FILTER} > "$out/tests.log" 2>&1
  echo "tests (validation on): rc $?"; grep -E "PASSED|FAILED|tests ran" "$out/tests.log" | head -30
fi
[ $# -gt 0 ] || exit 0
export PYTHONUNBUFFERED=1
lib=(); [ "$1" = compare ] && lib=(--lib "$build/libmemkit_torch.so")
echo "library: $build/libmemkit_torch.so"
python3 "$root/bench/workloads/workloads.py" "$@" "${lib[@]}" 2>&1 |
  tee "$out/workloads.log"
