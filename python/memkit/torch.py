"""memkit as PyTorch's CUDA allocator, with PyTorch's memory functions over it.

    import memkit.torch
    memkit.torch.enable(memory_limit=40 << 30)   # before the first CUDA tensor
    ... train ...
    print(memkit.torch.memory_summary())

enable() installs libmemkit_torch.so through torch.cuda.memory.CUDAPluggableAllocator,
and gives PyTorch's allocator object the calls its Python API leaves out
(Tensor.record_stream, CUDA graph capture into private pools, empty_cache, the memory
fraction).
PyTorch's own torch.cuda.memory_stats() and friends report nothing for a pluggable
allocator; the functions here answer them from memkit's statistics. The allocators
are shared with memkit.cupy and memkit.numba in the same process.
"""
import warnings

import torch

from . import _cuda
from ._summary import format_summary
from .errors import InvalidArgument, UnavailableError

_allocator = None


def enable(policy=None, memory_limit=None, cache_limit=None, arena_slack=None,
           plan_loops=None, order_queues=None):
    """Makes memkit PyTorch's CUDA allocator: call it before the first CUDA allocation.

    policy ("automatic", "segments", "arena"), memory_limit and cache_limit (bytes, for
    each device), arena_slack, plan_loops and order_queues: memkit's allocator options;
    one not given takes its MEMKIT_* environment variable, else memkit's default. Calling
    it again once enabled, without options, does nothing."""
    global _allocator
    function = "memkit.torch.enable"
    options = dict(policy=policy, memory_limit=memory_limit, cache_limit=cache_limit,
                   arena_slack=arena_slack, plan_loops=plan_loops, order_queues=order_queues)
    if _allocator is not None:
        if any(v is not None for v in options.values()):
            raise InvalidArgument("[%s] memkit is PyTorch's allocator already: its options "
                                  "can be given once, before the first CUDA allocation"
                                  % function)
        return _allocator
    if not torch.cuda.is_available():
        raise UnavailableError("[%s] PyTorch sees no CUDA device" % function)
    path = _cuda.library_path()
    _cuda.configure(function, **options)
    allocator = torch.cuda.memory.CUDAPluggableAllocator(
        path, "memkit_torch_malloc", "memkit_torch_free")
    try:
        torch.cuda.memory.change_current_allocator(allocator)
    except RuntimeError as e:
        raise InvalidArgument(
            "[%s] PyTorch's CUDA allocator is in use already: call enable() before the "
            "first CUDA allocation (PyTorch: %s)" % (function, e)) from None
    try:
        _cuda.install_hooks()
    except UnavailableError as e:
        warnings.warn("%s; malloc and free go to memkit, Tensor.record_stream and CUDA graph "
                      "capture do not" % e, RuntimeWarning, stacklevel=2)
    _allocator = allocator
    return allocator


def is_enabled():
    return _allocator is not None


def _device(device):
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, torch.device):
        return torch.cuda.current_device() if device.index is None else device.index
    if isinstance(device, str):
        return _device(torch.device(device))
    return int(device)


def statistics(device=None):
    """memkit's statistics of the device, by the names of memkit.h."""
    return _cuda.statistics(_device(device))


def memory_stats(device=None):
    """memkit's statistics, with PyTorch's names for those that have one
    ("allocated_bytes.all.current", "reserved_bytes.all.peak", "num_ooms", ...)."""
    s = statistics(device)
    out = dict(s)
    for torch_name, current, peak in (
            ("allocated_bytes", "active_bytes", "peak_active_bytes"),
            ("active_bytes", "active_bytes", "peak_active_bytes"),
            ("requested_bytes", "requested_bytes", "peak_requested_bytes"),
            ("reserved_bytes", "reserved_bytes", "peak_reserved_bytes")):
        out[torch_name + ".all.current"] = s[current]
        out[torch_name + ".all.peak"] = s[peak]
    out["allocation.all.current"] = s["live_blocks"]
    out["allocation.all.allocated"] = s["allocations"]
    out["allocation.all.freed"] = s["frees"]
    out["segment.all.current"] = s["segments"]
    out["num_alloc_retries"] = s["retries"]
    out["num_ooms"] = s["out_of_memory"]
    return out


def memory_allocated(device=None):
    return statistics(device)["active_bytes"]


def max_memory_allocated(device=None):
    return statistics(device)["peak_active_bytes"]


def memory_reserved(device=None):
    return statistics(device)["reserved_bytes"]


def max_memory_reserved(device=None):
    return statistics(device)["peak_reserved_bytes"]


def reset_peak_memory_stats(device=None):
    _cuda.reset_peak(_device(device))


def empty_cache(device=None):
    """Gives the device's cached memory back to CUDA (None: the current device)."""
    _cuda.empty_cache(_device(device))


def set_memory_limit(nbytes, device=None):
    """The most memory memkit holds on the device; returns the previous limit."""
    return _cuda.set_memory_limit(_device(device), int(nbytes))


def get_memory_limit(device=None):
    return _cuda.get_memory_limit(_device(device))


def set_cache_limit(nbytes, device=None):
    """The most free memory memkit keeps cached on the device; returns the previous."""
    return _cuda.set_cache_limit(_device(device), int(nbytes))


def get_cache_limit(device=None):
    return _cuda.get_cache_limit(_device(device))


def set_per_process_memory_fraction(fraction, device=None):
    """A memory limit as a fraction of the device's memory, like PyTorch's."""
    if not 0 <= fraction <= 1:
        raise InvalidArgument("[memkit.torch.set_per_process_memory_fraction] fraction %r is "
                              "not from 0 to 1" % (fraction,))
    index = _device(device)
    total = torch.cuda.get_device_properties(index).total_memory
    return set_memory_limit(int(fraction * total), index)


def memory_snapshot(device=None):
    """The device's segments and blocks in the layout of torch.cuda.memory_snapshot()
    (address, total_size, allocated_size, segment_type, blocks with their state)."""
    index = _device(device)
    out = []
    for seg in _cuda.snapshot(index):
        blocks = [{"address": seg["base"] + b["offset"], "size": b["size"],
                   "requested_size": b["requested"],
                   "state": "active_allocated" if b["live"] else "inactive"}
                  for b in seg["blocks"]]
        allocated = sum(b["size"] for b in seg["blocks"] if b["live"])
        out.append({"device": index, "address": seg["base"], "total_size": seg["size"],
                    "allocated_size": allocated, "active_size": allocated,
                    "requested_size": sum(b["requested"] for b in seg["blocks"]),
                    "segment_type": "small" if seg["small"] else "large",
                    "blocks": blocks})
    return out


def memory_summary(device=None, abbreviated=False):
    """A readable table of the device's statistics and limits, like PyTorch's."""
    index = _device(device)
    limits = None
    if _cuda.is_used(index):
        limits = {"Memory limit": _cuda.get_memory_limit(index),
                  "Cache limit": _cuda.get_cache_limit(index)}
    return format_summary(_cuda.statistics(index), "memkit memory summary, device %d" % index,
                          limits)
