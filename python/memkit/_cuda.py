"""The CUDA allocators that memkit.torch, memkit.cupy and memkit.numba share: one memkit
allocator per device, inside libmemkit_torch.so (the library PyTorch's
CUDAPluggableAllocator loads), so that every framework in a process allocates from
the same one. Found next to this package, or at $MEMKIT_TORCH_LIBRARY."""
import ctypes
import os
import threading

from . import _memkit
from .errors import InvalidArgument, MemkitError, OutOfMemoryError, UnavailableError

LIBRARY_NAME = "libmemkit_torch.so"
LIBRARY_VARIABLE = "MEMKIT_TORCH_LIBRARY"

# memkit_status of memkit.h.
_OK, _INVALID_ARGUMENT, _OUT_OF_MEMORY = 0, 1, 2
_POLICIES = {"automatic": 0, "segments": 1, "arena": 2}


class AllocatorOptions(ctypes.Structure):
    """memkit_allocator_options of include/memkit/memkit.h."""
    _fields_ = [("policy", ctypes.c_int), ("memory_limit", ctypes.c_size_t),
                ("cache_limit", ctypes.c_size_t), ("wired_limit", ctypes.c_size_t),
                ("arena_slack", ctypes.c_double), ("validate", ctypes.c_int),
                ("thread_cache", ctypes.c_int), ("plan_loops", ctypes.c_int),
                ("order_queues", ctypes.c_int)]


class BlockRecord(ctypes.Structure):
    """memkit_block_record of include/memkit/memkit.h."""
    _fields_ = [("offset", ctypes.c_size_t), ("size", ctypes.c_size_t),
                ("requested", ctypes.c_size_t), ("live", ctypes.c_int)]


class SegmentRecord(ctypes.Structure):
    """memkit_segment_record of include/memkit/memkit.h."""
    _fields_ = [("base", ctypes.c_uint64), ("size", ctypes.c_size_t), ("small", ctypes.c_int),
                ("block_count", ctypes.c_size_t), ("blocks", ctypes.POINTER(BlockRecord))]


class Snapshot(ctypes.Structure):
    """memkit_snapshot of include/memkit/memkit.h."""
    _fields_ = [("segment_count", ctypes.c_size_t), ("segments", ctypes.POINTER(SegmentRecord)),
                ("block_count", ctypes.c_size_t), ("blocks", ctypes.POINTER(BlockRecord))]


_SIGNATURES = {
    # name: (result, arguments)
    "memkit_torch_last_error": (ctypes.c_char_p, []),
    "memkit_torch_configure": (ctypes.c_int, [ctypes.POINTER(AllocatorOptions)]),
    "memkit_torch_is_used": (ctypes.c_int, [ctypes.c_int]),
    "memkit_torch_allocate": (ctypes.c_int, [ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p,
                                             ctypes.POINTER(ctypes.c_void_p)]),
    "memkit_torch_deallocate": (ctypes.c_int, [ctypes.c_int, ctypes.c_void_p]),
    "memkit_torch_get_out_of_memory_details": (None, [ctypes.POINTER(ctypes.c_size_t)]),
    "memkit_torch_statistics_fields": (ctypes.c_char_p, []),
    "memkit_torch_get_statistics_array": (ctypes.c_int, [ctypes.c_int,
                                                         ctypes.POINTER(ctypes.c_uint64),
                                                         ctypes.c_size_t]),
    "memkit_torch_set_memory_limit": (ctypes.c_int, [ctypes.c_int, ctypes.c_size_t,
                                                     ctypes.POINTER(ctypes.c_size_t)]),
    "memkit_torch_set_cache_limit": (ctypes.c_int, [ctypes.c_int, ctypes.c_size_t,
                                                    ctypes.POINTER(ctypes.c_size_t)]),
    "memkit_torch_get_memory_limit": (ctypes.c_int, [ctypes.c_int,
                                                     ctypes.POINTER(ctypes.c_size_t)]),
    "memkit_torch_get_cache_limit": (ctypes.c_int, [ctypes.c_int,
                                                    ctypes.POINTER(ctypes.c_size_t)]),
    "memkit_torch_reset_peak": (ctypes.c_int, [ctypes.c_int]),
    "memkit_torch_empty_cache": (ctypes.c_int, [ctypes.c_int]),
    "memkit_torch_snapshot_create": (ctypes.c_int, [ctypes.c_int,
                                                    ctypes.POINTER(ctypes.POINTER(Snapshot))]),
    "memkit_torch_snapshot_destroy": (None, [ctypes.POINTER(Snapshot)]),
    "memkit_torch_install_hooks": (ctypes.c_int, []),
}

_lock = threading.Lock()
_library = None
_fields = None


def library_path():
    """Where libmemkit_torch.so is: $MEMKIT_TORCH_LIBRARY, else next to this package."""
    path = os.environ.get(LIBRARY_VARIABLE)
    if path:
        if not os.path.isfile(path):
            raise UnavailableError("[memkit] %s=%s: no such file" % (LIBRARY_VARIABLE, path))
        return os.path.abspath(path)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)
    if not os.path.isfile(path):
        raise UnavailableError(
            "[memkit] no %s next to the package (%s): this build of memkit has no CUDA "
            "backend (cmake prints why), or set %s to the library" % (
                LIBRARY_NAME, os.path.dirname(path), LIBRARY_VARIABLE))
    return path


def library():
    """The loaded library, with its functions' signatures."""
    global _library, _fields
    with _lock:
        if _library is None:
            lib = ctypes.CDLL(library_path())
            for name, (result, arguments) in _SIGNATURES.items():
                function = getattr(lib, name)
                function.restype = result
                function.argtypes = arguments
            _fields = lib.memkit_torch_statistics_fields().decode().split(",")
            _library = lib
        return _library


def _check(status, function):
    if status == _OK:
        return
    message = library().memkit_torch_last_error().decode("utf-8", "replace")
    if status == _OUT_OF_MEMORY:
        values = (ctypes.c_size_t * 6)()
        library().memkit_torch_get_out_of_memory_details(values)
        raise OutOfMemoryError(message, *values)
    if status == _INVALID_ARGUMENT:
        raise InvalidArgument(message)
    raise MemkitError(message or "[%s] failed with status %d" % (function, status))


def configure(function, policy=None, memory_limit=None, cache_limit=None, arena_slack=None,
              plan_loops=None, thread_cache=None, order_queues=None):
    """Options for every device's allocator, before the first allocation. An option not
    given takes its MEMKIT_* environment variable (MEMKIT_POLICY, MEMKIT_ARENA_SLACK,
    MEMKIT_PLAN_LOOPS, MEMKIT_ORDER_QUEUES), else the allocator's default."""
    defaults = _memkit.allocator_defaults()
    env = os.environ
    if policy is None:
        policy = env.get("MEMKIT_POLICY", defaults["policy"])
    if arena_slack is None:
        arena_slack = float(env.get("MEMKIT_ARENA_SLACK", defaults["arena_slack"]))
    if plan_loops is None:
        plan_loops = env.get("MEMKIT_PLAN_LOOPS", "1" if defaults["plan_loops"] else "0") == "1"
    if thread_cache is None:
        thread_cache = defaults["thread_cache"]
    if order_queues is None:
        order_queues = env.get("MEMKIT_ORDER_QUEUES",
                               "1" if defaults["order_queues"] else "0") == "1"
    if policy not in _POLICIES:
        raise InvalidArgument("[%s] policy %r: expected 'automatic', 'segments' or 'arena'" % (
            function, policy))
    for name, value in (("memory_limit", memory_limit), ("cache_limit", cache_limit)):
        if value is not None and value <= 0:
            raise InvalidArgument("[%s] %s %r: expected a number of bytes > 0 or None" % (
                function, name, value))
    options = AllocatorOptions(
        policy=_POLICIES[policy], memory_limit=memory_limit or 0, cache_limit=cache_limit or 0,
        wired_limit=0, arena_slack=arena_slack, validate=int(defaults["validate"]),
        thread_cache=int(bool(thread_cache)), plan_loops=int(bool(plan_loops)),
        order_queues=int(bool(order_queues)))
    _check(library().memkit_torch_configure(ctypes.byref(options)), function)


def install_hooks():
    """After PyTorch's allocator became the library's: gives it record_stream, CUDA graph
    capture, empty_cache and the memory fraction (PyTorch's Python API passes only
    malloc and free). Raises memkit.UnavailableError with the reason where this PyTorch
    lacks them."""
    status = library().memkit_torch_install_hooks()
    if status == 4:  # MEMKIT_UNAVAILABLE
        raise UnavailableError(library().memkit_torch_last_error().decode("utf-8", "replace"))
    _check(status, "memkit_torch_install_hooks")


def is_used(device):
    return bool(library().memkit_torch_is_used(device))


def allocate(device, nbytes, stream=0):
    """A block of nbytes on device for work on stream (a cudaStream_t as an int): its
    address. Raises memkit.OutOfMemoryError with the details."""
    out = ctypes.c_void_p()
    _check(library().memkit_torch_allocate(device, nbytes, stream or None, ctypes.byref(out)),
           "memkit_torch_allocate")
    return out.value or 0


def deallocate(device, address):
    _check(library().memkit_torch_deallocate(device, address), "memkit_torch_deallocate")


def statistics(device):
    """The device's statistics by memkit.h's names; zeros where memkit has not allocated."""
    lib = library()
    values = (ctypes.c_uint64 * len(_fields))()
    if is_used(device):
        _check(lib.memkit_torch_get_statistics_array(device, values, len(_fields)),
               "memkit_torch_get_statistics_array")
    return dict(zip(_fields, values))


def _set(name, device, nbytes):
    previous = ctypes.c_size_t()
    _check(getattr(library(), name)(device, nbytes, ctypes.byref(previous)), name)
    return previous.value


def _get(name, device):
    out = ctypes.c_size_t()
    _check(getattr(library(), name)(device, ctypes.byref(out)), name)
    return out.value


def set_memory_limit(device, nbytes):
    return _set("memkit_torch_set_memory_limit", device, nbytes)


def set_cache_limit(device, nbytes):
    return _set("memkit_torch_set_cache_limit", device, nbytes)


def get_memory_limit(device):
    return _get("memkit_torch_get_memory_limit", device)


def get_cache_limit(device):
    return _get("memkit_torch_get_cache_limit", device)


def reset_peak(device):
    if is_used(device):
        _check(library().memkit_torch_reset_peak(device), "memkit_torch_reset_peak")


def empty_cache(device):
    if is_used(device):
        _check(library().memkit_torch_empty_cache(device), "memkit_torch_empty_cache")


def snapshot(device):
    """The device's segments with their blocks, as memkit.Allocator.snapshot() gives them."""
    if not is_used(device):
        return []
    lib = library()
    pointer = ctypes.POINTER(Snapshot)()
    _check(lib.memkit_torch_snapshot_create(device, ctypes.byref(pointer)),
           "memkit_torch_snapshot_create")
    try:
        s = pointer.contents
        segments = []
        for i in range(s.segment_count):
            seg = s.segments[i]
            blocks = [{"offset": b.offset, "size": b.size, "requested": b.requested,
                       "live": bool(b.live)}
                      for b in (seg.blocks[j] for j in range(seg.block_count))]
            segments.append({"base": seg.base, "size": seg.size, "small": bool(seg.small),
                             "blocks": blocks})
        return segments
    finally:
        lib.memkit_torch_snapshot_destroy(pointer)
