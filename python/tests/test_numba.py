"""memkit.numba: Numba allocating through memkit (needs Numba and a CUDA GPU)."""
import pytest

from gpu import import_or_none, require_cuda_library, run_program

numba = import_or_none("numba.cuda")  # the package numba, with numba.cuda loaded
pytestmark = [
    pytest.mark.skipif(numba is None, reason="Numba is not installed"),
    pytest.mark.skipif(numba is not None and not numba.cuda.is_available(),
                       reason="Numba sees no CUDA device"),
]


def test_device_arrays_come_from_memkit():
    require_cuda_library()
    run_program("""
        import numpy as np
        from numba import cuda
        import memkit.numba as mn
        mn.enable()
        d = cuda.to_device(np.arange(1 << 20, dtype=np.float32))
        assert mn.statistics(0)["live_blocks"] >= 1
        assert (d.copy_to_host() == np.arange(1 << 20, dtype=np.float32)).all()
        free, total = cuda.current_context().get_memory_info()
        assert 0 < free <= total
        del d
        import gc; gc.collect()
        cuda.current_context().deallocations.clear()
        assert mn.statistics(0)["frees"] >= 1
    """)
