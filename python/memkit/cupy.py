"""memkit as CuPy's allocator.

    import memkit.cupy
    memkit.cupy.enable()       # cupy.cuda.set_allocator(memkit.cupy.malloc)

Blocks come from the same per-device allocators as memkit.torch's, so CuPy and
PyTorch share one cache in a process; statistics(), memory_summary() and the limits
are memkit.torch's (they need no PyTorch): memkit.cupy re-exports them by device.
"""
import cupy

from . import _cuda
from ._summary import format_summary


class _Block:
    """Owns one memkit block; CuPy drops it when the last array over it is gone."""
    __slots__ = ("device", "address")

    def __init__(self, device, address):
        self.device = device
        self.address = address

    def __del__(self):
        if self.address:
            _cuda.deallocate(self.device, self.address)
            self.address = 0


def malloc(nbytes):
    """cupy.cuda.memory.MemoryPointer to a memkit block on the current device, used on
    the current stream. Raises memkit.OutOfMemoryError (a MemoryError)."""
    device = cupy.cuda.Device().id
    stream = cupy.cuda.get_current_stream().ptr
    address = _cuda.allocate(device, nbytes, stream)
    memory = cupy.cuda.memory.UnownedMemory(address, nbytes, _Block(device, address), device)
    return cupy.cuda.memory.MemoryPointer(memory, 0)


def enable(policy=None, memory_limit=None, cache_limit=None, arena_slack=None,
           plan_loops=None, order_queues=None):
    """Makes memkit CuPy's allocator. The options are memkit.torch.enable()'s and can be
    given only before memkit's first allocation in the process."""
    options = dict(policy=policy, memory_limit=memory_limit, cache_limit=cache_limit,
                   arena_slack=arena_slack, plan_loops=plan_loops, order_queues=order_queues)
    if any(v is not None for v in options.values()):
        _cuda.configure("memkit.cupy.enable", **options)
    else:
        _cuda.library()  # a missing library is an error now, not at the first array
    cupy.cuda.set_allocator(malloc)


def statistics(device=None):
    return _cuda.statistics(cupy.cuda.Device().id if device is None else int(device))


def memory_summary(device=None):
    index = cupy.cuda.Device().id if device is None else int(device)
    return format_summary(_cuda.statistics(index), "memkit memory summary, device %d" % index)


def set_memory_limit(nbytes, device=None):
    return _cuda.set_memory_limit(cupy.cuda.Device().id if device is None else int(device),
                                  int(nbytes))


def empty_cache(device=None):
    _cuda.empty_cache(cupy.cuda.Device().id if device is None else int(device))
