#!/usr/bin/env python3
"""Whether the CUDA virtual-memory calls the arena makes (cuMemCreate, cuMemMap,
cuMemSetAccess, cuMemUnmap, cuMemRelease) wait for the GPU's queued work: each is
timed on the host once with the GPU idle and once right after queuing a ~160 ms
kernel (torch.cuda._sleep), then the time the GPU still needed is measured. A call
that waited would take the kernel's time itself and leave none after it.

    python3 bench/gpu/vmm_while_busy.py      (on a machine with a CUDA GPU and PyTorch)
"""
import ctypes
import time

import torch

PAGE = 2 << 20  # the H200's granularity
cuda = ctypes.CDLL("libcuda.so.1")


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]  # 1: a device


class AllocationFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class AllocationProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", AllocationFlags)]


class AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]  # 3: read and write


def check(result, call):
    if result != 0:
        raise SystemExit("[vmm_while_busy] %s failed: CUresult %d" % (call, result))


def main():
    torch.zeros(1, device="cuda")  # a context
    device = torch.cuda.current_device()
    prop = AllocationProp(type=1, location=Location(1, device))  # pinned, on the device
    access = AccessDesc(Location(1, device), 3)
    base = ctypes.c_uint64()
    check(cuda.cuMemAddressReserve(ctypes.byref(base), ctypes.c_size_t(64 * PAGE),
                                   ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_uint64(0)),
          "cuMemAddressReserve")

    def at(page):
        return ctypes.c_uint64(base.value + page * PAGE)

    def create():
        handle = ctypes.c_uint64()
        check(cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(PAGE), ctypes.byref(prop),
                               ctypes.c_uint64(0)), "cuMemCreate")
        return handle

    # ~160 ms of GPU work: the sleep kernel's cycles, timed once.
    torch.cuda.synchronize()
    start = time.perf_counter()
    torch.cuda._sleep(100_000_000)
    torch.cuda.synchronize()
    cycles = int(0.16 * 100_000_000 / (time.perf_counter() - start))

    def probe(name, call):
        cells = []
        for busy in (False, True):
            torch.cuda.synchronize()
            if busy:
                torch.cuda._sleep(cycles)
            start = time.perf_counter()
            call()
            took = time.perf_counter() - start
            start = time.perf_counter()
            torch.cuda.synchronize()
            left = time.perf_counter() - start
            cells.append("%s: call %.3f ms, then the GPU %.1f ms"
                         % ("busy" if busy else "idle", took * 1e3, left * 1e3))
        print("%-16s %s | %s" % (name, cells[0], cells[1]), flush=True)

    handles = [create() for _ in range(4)]
    pages = iter(range(64))  # a fresh page of the range for each call
    mapped = []
    probe("cuMemCreate", lambda: handles.append(create()))

    def map_one():
        page = next(pages)
        check(cuda.cuMemMap(at(page), ctypes.c_size_t(PAGE), ctypes.c_size_t(0), handles.pop(),
                            ctypes.c_uint64(0)), "cuMemMap")
        mapped.append(page)
    probe("cuMemMap", map_one)
    granted = iter(list(mapped))
    probe("cuMemSetAccess",
          lambda: check(cuda.cuMemSetAccess(at(next(granted)), ctypes.c_size_t(PAGE),
                                            ctypes.byref(access), ctypes.c_size_t(1)),
                        "cuMemSetAccess"))
    probe("cuMemUnmap",
          lambda: check(cuda.cuMemUnmap(at(mapped.pop()), ctypes.c_size_t(PAGE)), "cuMemUnmap"))
    probe("cuMemRelease", lambda: check(cuda.cuMemRelease(handles.pop()), "cuMemRelease"))
    probe("cudaEventRecord", lambda: torch.cuda.Event().record())


if __name__ == "__main__":
    main()
