#!/usr/bin/env python3
"""What backing N pages of a reserved range costs, per page, three ways:

  pages   N physical handles of one page, N mappings (as the arena does now)
  slices  one handle of N pages, mapped as N one-page slices (cuMemMap's offset):
          each page can still move or go alone
  whole   one handle of N pages, one mapping

Each: create, map, one cuMemSetAccess over the run; then unmap and release. Also
whether a slice moves as cheaply as a page (unmap one, map it elsewhere, set its
access), and whether unmapping half the slices of a released handle frees memory.

    python3 bench/gpu/handle_slices.py      (on a machine with a CUDA GPU and PyTorch)
"""
import ctypes
import time

import torch

from vmm_while_busy import PAGE, AccessDesc, AllocationProp, Location, check, cuda


def main():
    torch.zeros(1, device="cuda")  # a context
    device = torch.cuda.current_device()
    prop = AllocationProp(type=1, location=Location(1, device))
    access = AccessDesc(Location(1, device), 3)
    most = 512
    base = ctypes.c_uint64()
    check(cuda.cuMemAddressReserve(ctypes.byref(base), ctypes.c_size_t(4 * most * PAGE),
                                   ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_uint64(0)),
          "cuMemAddressReserve")

    def at(page):
        return ctypes.c_uint64(base.value + page * PAGE)

    def create(pages):
        handle = ctypes.c_uint64()
        check(cuda.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(pages * PAGE),
                               ctypes.byref(prop), ctypes.c_uint64(0)), "cuMemCreate")
        return handle

    def map_at(page, handle, pages=1, offset=0):
        check(cuda.cuMemMap(at(page), ctypes.c_size_t(pages * PAGE),
                            ctypes.c_size_t(offset * PAGE), handle, ctypes.c_uint64(0)),
              "cuMemMap")

    def grant(page, pages):
        check(cuda.cuMemSetAccess(at(page), ctypes.c_size_t(pages * PAGE), ctypes.byref(access),
                                  ctypes.c_size_t(1)), "cuMemSetAccess")

    def unmap(page, pages=1):
        check(cuda.cuMemUnmap(at(page), ctypes.c_size_t(pages * PAGE)), "cuMemUnmap")

    def release(handle):
        check(cuda.cuMemRelease(handle), "cuMemRelease")

    def free_bytes():
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        check(cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        return free.value

    def clock():
        torch.cuda.synchronize()
        return time.perf_counter()

    def timed(steps):
        """Runs each (name, fn) in turn; returns {name: seconds}."""
        took = {}
        for name, fn in steps:
            start = clock()
            fn()
            took[name] = clock() - start
        return took

    def pages_way(n):
        handles = []
        return timed([
            ("create", lambda: handles.extend(create(1) for _ in range(n))),
            ("map", lambda: [map_at(k, h) for k, h in enumerate(handles)]),
            ("access", lambda: grant(0, n)),
            ("unmap", lambda: [unmap(k) for k in range(n)]),
            ("release", lambda: [release(h) for h in handles]),
        ])

    def slices_way(n):
        handle = []
        return timed([
            ("create", lambda: handle.append(create(n))),
            ("map", lambda: [map_at(k, handle[0], 1, k) for k in range(n)]),
            ("access", lambda: grant(0, n)),
            ("unmap", lambda: [unmap(k) for k in range(n)]),
            ("release", lambda: release(handle[0])),
        ])

    def whole_way(n):
        handle = []
        return timed([
            ("create", lambda: handle.append(create(n))),
            ("map", lambda: map_at(0, handle[0], n)),
            ("access", lambda: grant(0, n)),
            ("unmap", lambda: unmap(0, n)),
            ("release", lambda: release(handle[0])),
        ])

    ways = [("pages", pages_way), ("slices", slices_way), ("whole", whole_way)]
    try:
        slices_way(8)
    except SystemExit as refused:  # cuMemMap takes no offset into a handle on some drivers
        print("slices: %s (not supported here)" % refused, flush=True)
        ways = [ways[0], ways[2]]
    for _, way in ways:
        way(8)  # warm-up
    print("us a page: create / map / set access / unmap / release = total")
    for n in (8, 32, 128, 512):
        for name, way in ways:
            best = None
            for _ in range(3):
                took = way(n)
                if best is None or sum(took.values()) < sum(best.values()):
                    best = took
            cells = " / ".join("%6.1f" % (best[k] / n * 1e6)
                               for k in ("create", "map", "access", "unmap", "release"))
            print("%4d pages, %-6s %s = %6.1f" % (n, name, cells, sum(best.values()) / n * 1e6),
                  flush=True)

    # Moving one page: unmap it, map it one range further, set its access.
    n = 64
    if len(ways) < 3:
        return
    for name in ("pages", "slices"):
        handles = [create(1) for _ in range(n)] if name == "pages" else [create(n)]
        for k in range(n):
            if name == "pages":
                map_at(k, handles[k])
            else:
                map_at(k, handles[0], 1, k)
        grant(0, n)
        start = clock()
        for k in range(n):
            unmap(k)
            if name == "pages":
                map_at(most + k, handles[k])
            else:
                map_at(most + k, handles[0], 1, k)
            grant(most + k, 1)
        took = clock() - start
        print("move a page (%s): %.1f us" % (name, took / n * 1e6), flush=True)
        for k in range(n):
            unmap(most + k)
        for h in handles:
            release(h)

    # Memory of a released handle whose slices are half unmapped.
    n = 256
    before = free_bytes()
    handle = create(n)
    for k in range(n):
        map_at(k, handle, 1, k)
    release(handle)
    mapped_all = free_bytes()
    for k in range(n // 2):
        unmap(k)
    half = free_bytes()
    for k in range(n // 2, n):
        unmap(k)
    print("one %d MiB handle, released while mapped as slices: free memory down %d MiB; "
          "half the slices unmapped: %d MiB back; all: %d MiB back"
          % (n * 2, (before - mapped_all) >> 20, (half - mapped_all) >> 20,
             (free_bytes() - mapped_all) >> 20), flush=True)


if __name__ == "__main__":
    main()
