"""memkit as Numba's CUDA memory manager (an External Memory Management plugin).

    import memkit.numba
    memkit.numba.enable()      # numba.cuda.set_memory_manager(MemkitCUDAMemoryManager)

or, before Numba initialises CUDA, NUMBA_CUDA_MEMORY_MANAGER=memkit.numba. Device
blocks come from the same per-device allocators as memkit.torch's and memkit.cupy's;
host and pinned memory stay Numba's.
"""
import ctypes

from numba import cuda
from numba.cuda import GetIpcHandleMixin, HostOnlyCUDAMemoryManager, MemoryInfo, MemoryPointer

from . import _cuda


def _device_pointer(address):
    """The pointer type Numba's driver works with: the NVIDIA binding's CUdeviceptr
    where the driver module uses that binding (numba-cuda always does, and takes int()
    of the pointer), else a ctypes pointer (Numba's older ctypes driver)."""
    try:
        from numba.cuda.cudadrv import driver
    except ImportError:
        driver = None
    binding = getattr(driver, "binding", None)
    if binding is not None and getattr(driver, "USE_NV_BINDING", True):
        return binding.CUdeviceptr(address)
    return ctypes.c_void_p(address)


def _finalizer(device, address):
    # Without a reference to the manager: Numba keeps finalizers past its lifetime.
    def finalize():
        _cuda.deallocate(device, address)
    return finalize


class MemkitCUDAMemoryManager(GetIpcHandleMixin, HostOnlyCUDAMemoryManager):
    """Device allocations through memkit (on the default stream)."""

    def initialize(self):
        """Called by Numba once its context exists: loads memkit's CUDA library (the
        allocator itself is made at the first allocation on each device)."""
        _cuda.library()

    def memalloc(self, size):
        device = self.context.device.id
        address = _cuda.allocate(device, size, 0)
        return MemoryPointer(self.context, _device_pointer(address), size,
                             finalizer=_finalizer(device, address))

    def get_memory_info(self):
        """free: what memkit may still allocate (the limit less live bytes); total: the
        memory limit (the device's memory unless set)."""
        device = self.context.device.id
        limit = _cuda.get_memory_limit(device)
        active = _cuda.statistics(device)["active_bytes"]
        return MemoryInfo(free=max(0, limit - active), total=limit)

    def reset(self):
        super().reset()
        _cuda.empty_cache(self.context.device.id)

    @property
    def interface_version(self):
        return 1


# The name Numba looks for with NUMBA_CUDA_MEMORY_MANAGER=memkit.numba.
_numba_memory_manager = MemkitCUDAMemoryManager


def enable():
    """Makes memkit Numba's device memory manager."""
    _cuda.library()  # a missing library is an error now, not at the first array
    cuda.set_memory_manager(MemkitCUDAMemoryManager)


def statistics(device=0):
    return _cuda.statistics(device)
