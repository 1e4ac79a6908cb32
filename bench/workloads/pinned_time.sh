#!/bin/bash
# On the GPU machine: the host's layout (NUMA nodes, the GPU's local CPUs), then
# kernel_time.py on LOOPS, once with every process pinned to the GPU's local CPUs
# (taskset) and once not, to tell a step time that moves with where the process runs
# from one that moves with the allocator. Writes $OUT/pinned.json and unpinned.json.
#   bash bench/workloads/pinned_time.sh "resnet18_eval_varbatch" 3
set -u
loops=${1:-resnet18_eval_varbatch}; repeats=${2:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$PWD/gpu-out}; mkdir -p "$out"
lscpu > "$out/lscpu.txt"; nvidia-smi topo -m > "$out/topo.txt" 2>&1
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr A-Z a-z | sed 's/^0000//')
cpus=$(cat "/sys/bus/pci/devices/$bus/local_cpulist")
echo "GPU $bus: NUMA node $(cat /sys/bus/pci/devices/$bus/numa_node), local CPUs $cpus;" \
  "$(lscpu | grep -E '^NUMA node\(s\)')"
bash "$root/bench/workloads/run_on_gpu.sh" > "$out/build.txt" 2>&1 || { cat "$out/build.txt"; exit 1; }
lib=$(ls /tmp/memkit-gpu-build-*/libmemkit_torch.so | head -1)  # run_on_gpu.sh's build
cd "$root/bench/workloads"
for mode in pinned unpinned; do
  pin=(); [ $mode = pinned ] && pin=(taskset -c "$cpus")
  echo "== $mode"
  "${pin[@]}" python3 kernel_time.py --lib "$lib" --loops $loops --allocators pytorch memkit \
    --repeats "$repeats" --profiled 3 --json "$out/$mode.json" | grep -v "^  "
done
