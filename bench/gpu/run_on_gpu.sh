#!/bin/bash
# Builds memkit on the GPU machine and runs, in one go, the test suite, the GPU
# benchmark (traces given as arguments) and the PyTorch training comparison.
# Results and logs go to $OUT (or ./gpu-out).
#   bash bench/gpu/run_on_gpu.sh SOURCE_DIR TRACE.csv.gz...
set -u
source_dir=$(realpath "$1"); shift
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
build=/tmp/memkit-gpu-build
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/device.txt" 2>&1
cat "$out/device.txt"
start=$(date +%s)
cmake -S "$source_dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$out/build.log" 2>&1
cmake --build "$build" --target memkit_tests memkit_torch memkit_gpu_bench >> "$out/build.log" 2>&1
echo "build: rc $? in $(( $(date +%s) - start )) s"; grep -E "memkit:|error" "$out/build.log" | head -20
timeout 150 "$build/tests/memkit_tests" --gtest_brief=1 > "$out/tests.log" 2>&1
echo "tests: rc $?"; grep -E "PASSED|FAILED|SKIPPED \]|tests ran" "$out/tests.log" | head -30
timeout 200 "$build/memkit_gpu_bench" --csv "$out/bench.csv" "$@" > "$out/bench.log" 2>&1
echo "bench: rc $?"; cat "$out/bench.log"
PYTHONUNBUFFERED=1 timeout 260 python3 "$source_dir/integrations/pytorch/train_compare.py" \
  --lib "$build/libmemkit_torch.so" --json "$out/train.json" > "$out/train.log" 2>&1
echo "train: rc $?"; tail -12 "$out/train.log"
