"""memkit: a caching device-memory allocator, its trace replay and its offset planner.

    import memkit
    alloc = memkit.Allocator("sim", memory_limit=1 << 30)   # or "cpu", "cuda", "vulkan"
    block = alloc.allocate(6000)                             # Allocation(address, size)
    alloc.free(block)
    alloc.statistics()["peak_reserved_bytes"]

    memkit.replay("trace.csv.gz")        # what `memkit replay --json` prints, as a dict
    memkit.plan("instance.csv")          # what `memkit plan --json` prints, as a dict

The adaptors for frameworks are imported on their own: memkit.torch, memkit.cupy and
memkit.numba.
"""
import collections
import json
import operator
import os

from . import _memkit
from ._summary import format_summary
from .errors import (InvalidArgument, InvariantViolation, MemkitError, OutOfMemoryError,
                     PlannerError, TraceError, UnavailableError)

__version__ = _memkit.__version__
__all__ = [
    "Allocation", "Allocator", "available_backends", "format_summary", "plan", "replay", "MemkitError",
    "InvalidArgument", "OutOfMemoryError", "TraceError", "PlannerError",
    "InvariantViolation", "UnavailableError",
]

Allocation = collections.namedtuple("Allocation", ["address", "size"])
Allocation.__doc__ = "A block: its device address and its real size (>= the request)."


def available_backends():
    """The backends this build has: 'cpu', 'sim' and, where built, 'cuda', 'vulkan'.
    A listed backend may still have no device on this machine (UnavailableError)."""
    return _memkit.available_backends()


class Allocator(_memkit.Allocator):
    """memkit's caching allocator over one backend.

    Allocator(backend="cpu", *, policy="automatic", memory_limit=None,
              cache_limit=None, wired_limit=None, arena_slack=0.02, validate=False,
              thread_cache=True, plan_loops=True, order_queues=True,
              capacity=0, granularity=0,                 # sim: 0 takes 80 GiB, 2 MiB
              device=0, cuda_memory="device",            # cuda ("managed", "pinned_host")
              webgpu_compatible=False)                   # vulkan (device -1 picks one)

    policy: "automatic" (the arena where the backend has virtual memory), "segments"
    or "arena". order_queues: before growing, a queue waits on the device for the
    other queues' pending frees and reuses them (where the backend can). A limit of None is the default (the capacity, the memory limit, none
    wired); 0 allows nothing. The setters return the previous value.

    Addresses are device addresses (host pointers on cpu); free() and the other calls
    taking an address accept an int or an Allocation. close() (or leaving a ``with``
    block) gives every segment back at once; blocks still live are forgotten.
    """

    def allocate(self, nbytes, queue=0):
        """A block of at least nbytes usable on queue: an Allocation(address, size).
        0 bytes gives Allocation(0, 0). Raises OutOfMemoryError when nothing can make
        room, InvalidArgument above the device's largest buffer."""
        return Allocation(*super().allocate(nbytes, queue))

    def summary(self):
        """The statistics and limits as a readable table (like torch.cuda.memory_summary)."""
        limits = {"Memory limit": self.get_memory_limit(), "Cache limit": self.get_cache_limit()}
        return format_summary(self.statistics(), "memkit on %s" % self.device()["name"], limits)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self.closed:
            return "<memkit.Allocator (closed)>"
        s = self.statistics()
        return "<memkit.Allocator on %s: %d live blocks, %d bytes active, %d reserved>" % (
            self.device()["name"], s["live_blocks"], s["active_bytes"], s["reserved_bytes"])


def _path(value, function, name):
    try:
        return os.fspath(value)
    except TypeError:
        raise InvalidArgument("[%s] %s %r is not a path" % (function, name, value)) from None


def replay(path, *, backend="sim", policy=None, capacity=None, granularity=None,
           arena_slack=None, plan_loops=None, device_lag=0, lag_seed=0,
           min_capacity=False, at_peak=False, validate=False, html=None, pytorch_snapshot=None):
    """Replays an allocation trace (memkit CSV, RMM log or PyTorch snapshot JSON; gzip or
    plain) through the allocator on the simulated device (or "cpu") and returns what
    ``memkit replay --json`` prints: a dict, or a list of them when ``path`` is a list.

    The options are the command's: policy, capacity and granularity (sim, bytes),
    arena_slack, plan_loops, device_lag and lag_seed (sim), min_capacity (also find
    the smallest capacity the trace runs in), at_peak (also break the reserved bytes
    down at their peak), validate, html (write the report there),
    pytorch_snapshot (write the replay there as a PyTorch memory snapshot, the pickle
    torch.cuda._memory_viz opens; trace i is device i).
    None takes the command's default. A trace that runs out of memory gives
    ``completed: False`` with the ``error``; an unreadable one raises TraceError."""
    function = "memkit.replay"
    several = isinstance(path, (list, tuple))
    paths = [_path(p, function, "path") for p in (path if several else [path])]
    defaults = _memkit.replay_defaults()
    html_path = None if html is None else _path(html, function, "html")
    snapshot_path = (None if pytorch_snapshot is None
                     else _path(pytorch_snapshot, function, "pytorch_snapshot"))
    for name, output in (("html", html_path), ("pytorch_snapshot", snapshot_path)):
        if output is not None and any(os.path.abspath(output) == os.path.abspath(p)
                                      for p in paths):
            raise InvalidArgument("[%s] %s %s is one of the traces" % (function, name, output))
    text, page = _memkit.replay(
        paths, backend=backend,
        policy=defaults["policy"] if policy is None else policy,
        capacity=defaults["capacity"] if capacity is None else capacity,
        granularity=defaults["granularity"] if granularity is None else granularity,
        arena_slack=defaults["arena_slack"] if arena_slack is None else arena_slack,
        plan_loops=defaults["plan_loops"] if plan_loops is None else plan_loops,
        device_lag=device_lag, lag_seed=lag_seed, min_capacity=min_capacity,
        at_peak=at_peak, validate=validate, html=html_path is not None,
        pytorch_snapshot=snapshot_path or "")
    if html_path is not None:
        with open(html_path, "w", encoding="utf-8") as f:
            f.write(page)
    results = json.loads(text)
    return results if several else results[0]


def _instance_text(buffers, function):
    """CSV text of an instance from (id, lower, upper, size) rows or dicts with those keys."""
    lines = ["id,lower,upper,size"]
    for i, row in enumerate(buffers):
        try:
            if isinstance(row, dict):
                row = (row["id"], row["lower"], row["upper"], row["size"])
            values = [operator.index(v) for v in row]
            if len(values) != 4:
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise InvalidArgument("[%s] buffer %d is %r: expected (id, lower, upper, size) "
                                  "as whole numbers" % (function, i, row)) from None
        lines.append("%d,%d,%d,%d" % tuple(values))
    return "\n".join(lines) + "\n"


def plan(source, *, from_trace=False, capacity=None, time_limit=10.0, minimize=False,
         output=None, offsets=False):
    """Plans static offsets for a schedule of buffers and returns what
    ``memkit plan --json`` prints, as a dict (``fits`` False when no plan within
    ``capacity`` was found in the time limit).

    source: an instance CSV path (id,lower,upper,size), a trace path with
    from_trace=True, or a list of (id, lower, upper, size) tuples or dicts.
    output: write the plan there as CSV. offsets=True adds "offsets", one per buffer in
    the instance's order."""
    function = "memkit.plan"
    text = None
    if isinstance(source, (str, bytes, os.PathLike)):
        name = _path(source, function, "source")
    else:
        if from_trace:
            raise InvalidArgument("[%s] from_trace needs a trace path" % function)
        name = "<buffers>"
        text = _instance_text(source, function)
    return json.loads(_memkit.plan(
        name, instance_text=text, from_trace=from_trace, capacity=capacity,
        time_limit=time_limit, minimize=minimize,
        output=None if output is None else _path(output, function, "output"),
        offsets=offsets))
