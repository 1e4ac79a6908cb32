"""The exceptions memkit raises. Each message starts with the function that raised
it: ``[memkit.Allocator.allocate] ...`` from the Python API, ``[memkit::allocate] ...``
from the C++ core underneath."""


class MemkitError(Exception):
    """Base of every memkit error."""


class InvalidArgument(MemkitError, ValueError):
    """Bad input: a size above the device's largest buffer, an unknown address, an
    unknown option value. Nothing changed."""


class OutOfMemoryError(MemkitError, MemoryError):
    """The request cannot be met within the memory limit or the device's capacity,
    after releasing the cache and waiting for queued work. Nothing changed.

    The attributes say where memory stood: ``requested_bytes`` (the request),
    ``active_bytes`` (live blocks), ``cached_bytes`` (reserved but not live),
    ``reserved_bytes`` (held from the device), ``limit_bytes`` (the memory limit in
    force) and ``largest_free_bytes`` (the largest free block)."""

    def __init__(self, message, requested_bytes=0, active_bytes=0, cached_bytes=0,
                 reserved_bytes=0, limit_bytes=0, largest_free_bytes=0):
        super().__init__(message)
        self.requested_bytes = requested_bytes
        self.active_bytes = active_bytes
        self.cached_bytes = cached_bytes
        self.reserved_bytes = reserved_bytes
        self.limit_bytes = limit_bytes
        self.largest_free_bytes = largest_free_bytes

    def details(self):
        """The attributes as a dict."""
        return {name: getattr(self, name) for name in (
            "requested_bytes", "active_bytes", "cached_bytes", "reserved_bytes",
            "limit_bytes", "largest_free_bytes")}


class TraceError(MemkitError, ValueError):
    """A trace that cannot be read: the message names the file and line."""


class PlannerError(MemkitError, ValueError):
    """A planning instance that cannot be read: the message names the file and line."""


class InvariantViolation(MemkitError, RuntimeError):
    """Validation found a broken invariant: a bug in memkit."""


class UnavailableError(MemkitError, RuntimeError):
    """The backend is not in this build, or no device of its kind is present; also a
    framework adaptor whose framework or library is missing."""
