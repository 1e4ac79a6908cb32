"""memkit.cupy: CuPy allocating through memkit (needs CuPy and a CUDA GPU)."""
import pytest

from gpu import import_or_none, require_cuda_library, run_program

cupy = import_or_none("cupy")


def cupy_devices():
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        return 0


pytestmark = [
    pytest.mark.skipif(cupy is None, reason="CuPy is not installed"),
    pytest.mark.skipif(cupy is not None and cupy_devices() == 0,
                       reason="CuPy sees no CUDA device"),
]


def test_arrays_come_from_memkit():
    require_cuda_library()
    out = run_program("""
        import cupy, memkit, memkit.cupy as mc
        mc.enable(memory_limit=1 << 30)
        a = cupy.arange(1 << 20, dtype=cupy.float32)
        b = (a * 2).sum()
        assert float(b) == float(2 * sum(range(1 << 20)))
        s = mc.statistics()
        assert s["live_blocks"] >= 1 and s["active_bytes"] >= 4 << 20
        del a, b
        assert mc.statistics()["frees"] >= 2
        try:
            cupy.empty(2 << 30, dtype=cupy.uint8)
            raise SystemExit("no out of memory above the limit")
        except memkit.OutOfMemoryError as e:
            assert e.limit_bytes == 1 << 30
        print(mc.memory_summary())
    """)
    assert "Allocated memory" in out
