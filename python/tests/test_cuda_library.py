"""The binding to libmemkit_torch.so that memkit.torch, memkit.cupy and memkit.numba
share, checked without a GPU where there is none."""
import re

import pytest

import memkit
from conftest import SOURCE_DIR
from gpu import require_cuda_library

from test_allocator import statistics_fields_of_c_api


def c_struct_fields(name):
    header = (SOURCE_DIR / "include" / "memkit" / "memkit.h").read_text()
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = []
    for declaration in filter(None, (d.strip() for d in body.split(";"))):
        first, *rest = declaration.split(",")
        names.append(first.split()[-1].lstrip("*"))
        names.extend(n.strip().lstrip("*") for n in rest)
    return names


@pytest.fixture(scope="module")
def cuda():
    require_cuda_library()
    from memkit import _cuda
    return _cuda


def cuda_device_present():
    try:
        memkit.Allocator("cuda").close()
        return True
    except memkit.UnavailableError:
        return False


def test_statistics_are_named_by_the_library(cuda):
    assert cuda.statistics(0).keys() == set(statistics_fields_of_c_api())
    assert list(cuda.statistics(0)) == statistics_fields_of_c_api()


@pytest.mark.parametrize("struct, c_name", [
    ("AllocatorOptions", "memkit_allocator_options"),
    ("BlockRecord", "memkit_block_record"),
    ("SegmentRecord", "memkit_segment_record"),
    ("Snapshot", "memkit_snapshot"),
])
def test_structs_match_memkit_h(cuda, struct, c_name):
    assert [f[0] for f in getattr(cuda, struct)._fields_] == c_struct_fields(c_name)


def test_an_unused_device_reports_nothing(cuda):
    assert not cuda.is_used(3)
    assert set(cuda.statistics(3).values()) == {0}
    assert cuda.snapshot(3) == []
    cuda.reset_peak(3)
    cuda.empty_cache(3)


def test_bad_options_are_refused(cuda):
    with pytest.raises(memkit.InvalidArgument, match=r"^\[memkit.test\] policy 'best'"):
        cuda.configure("memkit.test", policy="best")
    with pytest.raises(memkit.InvalidArgument, match="memory_limit"):
        cuda.configure("memkit.test", memory_limit=0)
    with pytest.raises(memkit.InvalidArgument, match=r"^\[memkit_torch_configure\] arena_slack"):
        cuda.configure("memkit.test", arena_slack=float("inf"))


def test_allocate_where_there_is_a_device_else_a_clear_error(cuda):
    cuda.configure("memkit.test", policy="segments", memory_limit=1 << 30)
    if not cuda_device_present():
        with pytest.raises(memkit.MemkitError, match="cuda"):
            cuda.allocate(0, 1 << 20)
        return
    address = cuda.allocate(0, 1 << 20)
    assert address and cuda.statistics(0)["live_blocks"] == 1
    assert cuda.get_memory_limit(0) == 1 << 30
    with pytest.raises(memkit.InvalidArgument, match="configure before the first"):
        cuda.configure("memkit.test", policy="arena")
    with pytest.raises(memkit.OutOfMemoryError) as caught:
        cuda.allocate(0, 2 << 30)
    assert caught.value.requested_bytes == 2 << 30 and caught.value.limit_bytes == 1 << 30
    segments = cuda.snapshot(0)
    assert any(b["live"] for s in segments for b in s["blocks"])
    cuda.deallocate(0, address)
    assert cuda.statistics(0)["live_blocks"] == 0


@pytest.mark.parametrize("name", ["torch", "cupy", "numba"])
def test_adaptors_compile(name):
    # Their frameworks are not importable everywhere: at least the syntax is checked.
    path = SOURCE_DIR / "python" / "memkit" / (name + ".py")
    compile(path.read_text(), str(path), "exec")
