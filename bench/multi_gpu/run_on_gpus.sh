#!/usr/bin/env bash
# Builds memkit on a machine with several GPUs and runs the multi-GPU and sharing
# tests, the CUDA backend's tests, and the NCCL all-reduce benchmark. Logs go to
# $OUT (or ./multi_gpu_out). Usage: bash bench/multi_gpu/run_on_gpus.sh [SOURCE_DIR]
set -u -o pipefail
source_dir=${1:-.}
out=${OUT:-$PWD/multi_gpu_out}
mkdir -p "$out"
build=${MEMKIT_BUILD_DIR:-build-multi-cuda}
# NVLink multicast stays off: on shared hosts it can take the GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

{
  date -u
  nvidia-smi -L
  nvidia-smi topo -m
  nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null)
  echo "nvidia.nccl at: ${nccl_dir:-none}"
  ls "${nccl_dir:-/nonexistent}/lib" 2>/dev/null
} 2>&1 | tee "$out/machine.txt"
nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null)
[ -n "$nccl_dir" ] && export LD_LIBRARY_PATH="$nccl_dir/lib:${LD_LIBRARY_PATH:-}"

start=$(date +%s)
cmake -S "$source_dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMKIT_WERROR=ON \
  -DMEMKIT_CUDA=ON >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
grep "memkit:" "$out/configure.log"
cmake --build "$build" --target memkit_tests memkit_nccl_bench -j "$(nproc)" >"$out/build.log" 2>&1 ||
  { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

timeout 300 "$build/tests/memkit_tests" \
  --gtest_filter='MultiGpu*:Cases/MultiGpu*:*DeviceSet*:*SharingTest*:SharingErrors*' \
  >"$out/multi_tests.log" 2>&1
echo "multi-GPU tests: rc=$?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|Failure|Skipped|error" "$out/multi_tests.log" | head -40

timeout 300 "$build/tests/memkit_tests" --gtest_filter='*cuda*:*Cuda*:-MultiGpu*:Cases/MultiGpu*' \
  >"$out/cuda_tests.log" 2>&1
echo "CUDA backend tests: rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$out/cuda_tests.log" | head -20

NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG NCCL_DEBUG_FILE="$out/nccl_debug.log" timeout 300 "$build/memkit_nccl_bench" \
  ${MEMKIT_NCCL_BENCH_ARGS:---sizes 64M,256M,1G,2G --iterations 20 --repeats 10} \
  >"$out/nccl_bench.txt" 2>&1
echo "NCCL benchmark: rc=$?"
grep -m1 "NCCL version" "$out/nccl_debug.log"
echo "NCCL IPC registrations: $(grep -c 'IPC register buffer' "$out/nccl_debug.log")," \
  "failed: $(grep -c 'failed to IPC register' "$out/nccl_debug.log")," \
  "warnings: $(grep -c 'WARN' "$out/nccl_debug.log")"
cat "$out/nccl_bench.txt"
