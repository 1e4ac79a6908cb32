#!/usr/bin/env python3
"""Does how device memory is mapped change how fast kernels read it?

Times one random gather (torch.take of 16M random indices) and one sequential copy
over a 2 GiB buffer made four ways, alternating them for several rounds in one
process: cudaMalloc (PyTorch's default allocator), and cuMemCreate physical pages
mapped into one reserved range (cuMemMap), one page per 2 MiB handle (as memkit's
arena makes them), one handle per 64 MiB, and one handle for the whole buffer.
Prints the median time of each kernel per way, as a markdown table.

    python3 bench/gpu/tlb_probe.py [--gib 2] [--rounds 15]
"""
import argparse
import ctypes
import statistics

import torch

cuda = ctypes.CDLL("libcuda.so.1")


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class Prop(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", AllocFlags)]


class AccessDesc(ctypes.Structure):
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


def check(result, what):
    if result != 0:
        raise SystemExit("[tlb_probe] %s failed: CUresult %d" % (what, result))


class Mapped:
    """A range of `size` bytes mapped from physical handles of `chunk` bytes each."""

    def __init__(self, size, chunk):
        prop = Prop()
        prop.type = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location = Location(1, torch.cuda.current_device())  # CU_MEM_LOCATION_TYPE_DEVICE
        self.size = size
        self.base = ctypes.c_uint64()
        check(cuda.cuMemAddressReserve(ctypes.byref(self.base), ctypes.c_size_t(size),
                                       ctypes.c_size_t(0), ctypes.c_uint64(0),
                                       ctypes.c_uint64(0)), "cuMemAddressReserve")
        self.handles = []
        for offset in range(0, size, chunk):
            handle = ctypes.c_uint64()
            check(cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(chunk), ctypes.byref(prop),
                                   ctypes.c_uint64(0)), "cuMemCreate")
            check(cuda.cuMemMap(ctypes.c_uint64(self.base.value + offset), ctypes.c_size_t(chunk),
                                ctypes.c_size_t(0), handle, ctypes.c_uint64(0)), "cuMemMap")
            self.handles.append(handle)
        access = AccessDesc(Location(1, torch.cuda.current_device()), 3)  # read and write
        check(cuda.cuMemSetAccess(ctypes.c_uint64(self.base.value), ctypes.c_size_t(size),
                                  ctypes.byref(access), ctypes.c_size_t(1)), "cuMemSetAccess")
        self.__cuda_array_interface__ = {"shape": (size // 4,), "typestr": "<f4",
                                         "data": (self.base.value, False), "version": 3}


def timed(fn, repeats=5):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    size = args.gib << 30
    ways = {"cudaMalloc": torch.empty(size // 4, device="cuda")}
    keep = []
    for name, chunk in (("2 MiB handles", 2 << 20), ("64 MiB handles", 64 << 20),
                        ("one handle", size)):
        mapped = Mapped(size, chunk)
        keep.append(mapped)
        ways[name] = torch.as_tensor(mapped, device="cuda")
    for t in ways.values():
        t.uniform_()
    index = torch.randint(0, size // 4, (16 << 20,), device="cuda")
    out = torch.empty(size // 4, device="cuda")
    times = {name: {"gather": [], "copy": []} for name in ways}
    for _ in range(args.rounds):
        for name, t in ways.items():
            times[name]["gather"].append(timed(lambda: torch.take(t, index)))
            times[name]["copy"].append(timed(lambda: out.copy_(t)))
    print("| buffer (%d GiB) | random gather of 16M floats, ms | copy of the buffer, ms |"
          % args.gib)
    print("| --- | ---: | ---: |")
    for name, kinds in times.items():
        print("| %s | %.3f | %.3f |" % (name, statistics.median(kinds["gather"]),
                                       statistics.median(kinds["copy"])))


if __name__ == "__main__":
    main()
