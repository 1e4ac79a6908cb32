"""Makes libmemkit_torch.so PyTorch's CUDA allocator in this process, for the comparison
scripts that load the library by path (memkit.torch.enable does the same for the
Python package)."""
import ctypes
import sys


def use_memkit(lib_path, who):
    """Installs the library at lib_path as PyTorch's allocator, before any CUDA tensor,
    with its hooks (Tensor.record_stream and CUDA graphs reach memkit only through them).
    Exits naming `who` when the hooks cannot go in. Returns the library (ctypes)."""
    import torch
    torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
        lib_path, "memkit_torch_malloc", "memkit_torch_free"))
    lib = ctypes.CDLL(lib_path)
    lib.memkit_torch_last_error.restype = ctypes.c_char_p
    if lib.memkit_torch_install_hooks() != 0:
        sys.exit("[%s] %s" % (who, lib.memkit_torch_last_error().decode()))
    return lib


def read_statistics(lib, device=0):
    """The library's statistics of `device` by name, as many fields as it has (the names
    come from the library, so a field it adds never overruns a buffer here)."""
    lib.memkit_torch_statistics_fields.restype = ctypes.c_char_p
    names = lib.memkit_torch_statistics_fields().decode().split(",")
    values = (ctypes.c_uint64 * len(names))()
    if lib.memkit_torch_get_statistics_array(device, values, ctypes.c_size_t(len(names))) != 0:
        raise RuntimeError("[memkit_torch_get_statistics_array] memkit was not used on device %d"
                           % device)
    return dict(zip(names, values))
