#!/usr/bin/env python3
"""The host cost of PyTorch's caching allocator and of memkit, call by call, in one
process on the GPU machine: each suite trace's events (data/traces/workloads/) are
replayed through `c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete` and
through `memkit_torch_malloc / memkit_torch_free` (the calls PyTorch makes through
its pluggable-allocator interface), on the current stream. The warm-up steps run
untimed; then each call of up to --events events is timed. With --evict, 4 MiB are
touched between two calls (in a framework, kernels were launched in between and the
allocators' records have left the core's caches).

    python3 bench/workloads/allocator_calls.py --lib build/libmemkit_torch.so [--evict] \
        [--traces T ...] [--events N]
"""
import argparse
import glob
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_lines  # noqa: E402
from torch.utils.cpp_extension import load_inline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SOURCE = r"""
#include <dlfcn.h>
#include <chrono>
#include <stdexcept>
#include <vector>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

namespace {
using malloc_fn = void* (*)(ssize_t, int, cudaStream_t);
using free_fn = void (*)(void*, ssize_t, int, cudaStream_t);

void evict() {
  static std::vector<char> junk(std::size_t{4} << 20);
  for (std::size_t i = 0; i < junk.size(); i += 64) junk[i] = static_cast<char>(junk[i] + 1);
  asm volatile("" ::: "memory");
}
}  // namespace

// kind[i]: 0 allocate, 1 free; block[i]: the block's number; size[i]: bytes (allocate).
// Events from timed_from on are timed (at most `count`); returns their nanoseconds:
// allocate and free summed separately, and the calls of each.
std::vector<double> replay(const std::string& lib, torch::Tensor kind, torch::Tensor block,
                           torch::Tensor size, int64_t blocks, int64_t timed_from,
                           int64_t count, bool evict_between) {
  malloc_fn mk_malloc = nullptr;
  free_fn mk_free = nullptr;
  if (!lib.empty()) {
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) throw std::runtime_error(std::string("[allocator_calls] dlopen: ") + dlerror());
    mk_malloc = reinterpret_cast<malloc_fn>(dlsym(h, "memkit_torch_malloc"));
    mk_free = reinterpret_cast<free_fn>(dlsym(h, "memkit_torch_free"));
    if (!mk_malloc || !mk_free) throw std::runtime_error("[allocator_calls] no memkit_torch_malloc");
  }
  const int device = c10::cuda::current_device();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  auto k = kind.accessor<int8_t, 1>();
  auto b = block.accessor<int64_t, 1>();
  auto s = size.accessor<int64_t, 1>();
  std::vector<void*> address(static_cast<std::size_t>(blocks), nullptr);
  std::vector<int64_t> bytes(static_cast<std::size_t>(blocks), 0);
  double ns[2] = {0, 0};
  double calls[2] = {0, 0};
  const int64_t n = kind.size(0);
  const int64_t end = std::min(n, timed_from + count);
  for (int64_t i = 0; i < n; ++i) {
    const bool timed = i >= timed_from && i < end;
    if (timed && evict_between) evict();
    const auto start = std::chrono::steady_clock::now();
    if (k[i] == 0) {
      void* p = mk_malloc ? mk_malloc(s[i], device, stream)
                          : c10::cuda::CUDACachingAllocator::raw_alloc(static_cast<size_t>(s[i]));
      address[b[i]] = p;
      bytes[b[i]] = s[i];
    } else {
      void* p = address[b[i]];
      if (mk_free) mk_free(p, bytes[b[i]], device, stream);
      else c10::cuda::CUDACachingAllocator::raw_delete(p);
      address[b[i]] = nullptr;
    }
    if (timed) {
      ns[k[i]] += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
      calls[k[i]] += 1;
    }
  }
  // Frees what the trace left live (untimed), so the next run starts empty.
  for (std::size_t j = 0; j < address.size(); ++j) {
    if (!address[j]) continue;
    if (mk_free) mk_free(address[j], bytes[j], device, stream);
    else c10::cuda::CUDACachingAllocator::raw_delete(address[j]);
  }
  return {ns[0], calls[0], ns[1], calls[1]};
}
"""


def read_trace(path):
    """Events (kind, block, size) of a memkit trace, and where its warm-up ends. A line
    that is not a memkit trace line, or a free of a block not live, stops the run with
    the file and line."""
    kind, block, size = [], [], []
    ids = {}  # live trace id -> block number
    blocks = 0
    warmup = 0
    step_starts = []
    for number, kind_of_line, line, fields in trace_lines.read(path, "allocator_calls"):
        if kind_of_line == "#":
            if line.startswith("# warmup_steps:"):
                warmup = int(line.split(":")[1])
        elif kind_of_line == "s":
            step_starts.append(len(kind))
        elif kind_of_line == "a":
            ids[fields[1]] = blocks
            kind.append(0)
            block.append(blocks)
            size.append(int(fields[2]))
            blocks += 1
        elif kind_of_line == "f":
            if fields[1] not in ids:
                sys.exit("[allocator_calls] %s:%d: free of block %s, which is not live"
                         % (path, number, fields[1]))
            kind.append(1)
            block.append(ids.pop(fields[1]))
            size.append(0)
    timed_from = step_starts[warmup] if len(step_starts) > warmup else 0
    return (torch.tensor(np.array(kind, dtype=np.int8)), torch.tensor(np.array(block, dtype=np.int64)),
            torch.tensor(np.array(size, dtype=np.int64)), blocks, timed_from)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", required=True, help="path of libmemkit_torch.so")
    parser.add_argument("--traces", nargs="+",
                        default=sorted(glob.glob(os.path.join(ROOT, "data/traces/workloads/*.gz"))))
    parser.add_argument("--events", type=int, default=20000, help="timed events a trace")
    parser.add_argument("--evict", action="store_true")
    parser.add_argument("--rounds", type=int, default=2, help="alternated runs of each allocator")
    args = parser.parse_args()
    ext = load_inline("memkit_allocator_calls", cpp_sources=[SOURCE], functions=["replay"],
                      with_cuda=True, extra_cflags=["-O2"], verbose=False)
    torch.cuda.init()
    lib = os.path.abspath(args.lib)
    print("| trace | timed calls | PyTorch ns a call (allocate / free) | memkit ns a call "
          "(allocate / free) | memkit / PyTorch |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for path in args.traces:
        kind, block, size, blocks, timed_from = read_trace(path)
        per = {"pytorch": [], "memkit": []}
        for _ in range(args.rounds):
            for name, l in (("pytorch", ""), ("memkit", lib)):
                r = ext.replay(l, kind, block, size, blocks, timed_from, args.events, args.evict)
                per[name].append(r)
        def summary(rs):
            a = sum(r[0] for r in rs) / max(sum(r[1] for r in rs), 1)
            f = sum(r[2] for r in rs) / max(sum(r[3] for r in rs), 1)
            total = sum(r[0] + r[2] for r in rs) / max(sum(r[1] + r[3] for r in rs), 1)
            return a, f, total, int(sum(r[1] + r[3] for r in rs) / len(rs))
        pa, pf, pt, calls = summary(per["pytorch"])
        ma, mf, mt, _ = summary(per["memkit"])
        name = os.path.basename(path).split(".")[0]
        print("| %s | %d | %.0f (%.0f / %.0f) | %.0f (%.0f / %.0f) | %.2f |"
              % (name, calls, pt, pa, pf, mt, ma, mf, mt / pt), flush=True)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
