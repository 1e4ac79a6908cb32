"""memkit.Allocator on the cpu and sim backends (and Vulkan or CUDA where present)."""
import ctypes
import re
import threading

import pytest

import memkit
from conftest import SOURCE_DIR


def statistics_fields_of_c_api():
    """The field names of memkit_statistics in include/memkit/memkit.h, in order."""
    header = (SOURCE_DIR / "include" / "memkit" / "memkit.h").read_text()
    body = re.search(r"typedef struct memkit_statistics \{(.*?)\} memkit_statistics;",
                     header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = []
    for declaration in body.split(";"):
        declaration = declaration.strip()
        if declaration:
            type_and_first, *rest = declaration.split(",")
            names.append(type_and_first.split()[-1])
            names.extend(name.strip() for name in rest)
    return names


@pytest.fixture(params=["cpu", "sim"])
def alloc(request):
    with memkit.Allocator(request.param, validate=True) as a:
        yield a


def test_version_and_backends():
    assert re.fullmatch(r"\d+\.\d+\.\d+", memkit.__version__)
    assert {"cpu", "sim"} <= set(memkit.available_backends())


def test_statistics_have_the_names_of_the_c_api(alloc):
    fields = statistics_fields_of_c_api()
    assert len(fields) == 21
    assert list(alloc.statistics()) == fields


def test_allocate_and_free_count(alloc):
    block = alloc.allocate(6000)
    assert isinstance(block, memkit.Allocation)
    assert block.address != 0 and block.size >= 6000 and block.size % 512 == 0
    assert alloc.size(block) == block.size
    s = alloc.statistics()
    assert (s["active_bytes"], s["requested_bytes"], s["live_blocks"], s["allocations"]) == \
        (block.size, 6000, 1, 1)
    assert s["reserved_bytes"] == s["active_bytes"] + s["cached_bytes"]
    alloc.free(block)
    s = alloc.statistics()
    assert (s["active_bytes"], s["live_blocks"], s["frees"]) == (0, 0, 1)
    assert s["peak_active_bytes"] == block.size
    assert s["cached_bytes"] == s["reserved_bytes"] > 0
    assert alloc.calculate_statistics() == alloc.statistics()


def test_free_takes_an_int_and_reuse_hits_the_cache(alloc):
    address, _ = alloc.allocate(1 << 20)
    alloc.free(address)
    again = alloc.allocate(1 << 20)
    assert again.address == address
    assert alloc.statistics()["cache_hits"] >= 1
    alloc.free(again)


def test_zero_bytes_cost_nothing(alloc):
    assert alloc.allocate(0) == (0, 0)
    assert alloc.statistics()["allocations"] == 0
    alloc.free(0)


def test_peaks_reset_and_cache_cleared(alloc):
    blocks = [alloc.allocate(3 << 20) for _ in range(4)]
    peak = alloc.statistics()["peak_active_bytes"]
    assert peak == sum(b.size for b in blocks)
    for b in blocks[1:]:
        alloc.free(b)
    alloc.reset_peak()
    s = alloc.statistics()
    assert s["peak_active_bytes"] == s["active_bytes"] == blocks[0].size
    alloc.clear_cache()
    s = alloc.statistics()
    assert s["cached_bytes"] < (3 << 20)
    assert s["backend_frees"] > 0
    alloc.free(blocks[0])


def test_limits_set_and_get(alloc):
    limit = alloc.get_memory_limit()
    assert limit > 0
    assert alloc.set_memory_limit(256 << 20) == limit
    assert alloc.get_memory_limit() == 256 << 20
    previous_cache = alloc.get_cache_limit()
    assert alloc.set_cache_limit(8 << 20) == previous_cache
    assert alloc.get_cache_limit() == 8 << 20
    assert alloc.get_wired_limit() == 0


def test_wired_limit_on_the_simulated_device():
    with memkit.Allocator("sim", capacity=1 << 30, wired_limit=64 << 20) as a:
        assert a.get_wired_limit() == 64 << 20
        assert a.set_wired_limit(0) == 64 << 20
        with pytest.raises(memkit.InvalidArgument):
            a.set_wired_limit(2 << 30)  # above the device


def test_options_in_the_constructor():
    with memkit.Allocator("sim", capacity=1 << 30, granularity=1 << 20, policy="segments",
                          memory_limit=64 << 20, cache_limit=16 << 20, arena_slack=0,
                          plan_loops=False, thread_cache=False, order_queues=False) as a:
        device = a.device()
        assert (device["name"], device["capacity"], device["granularity"]) == \
            ("sim", 1 << 30, 1 << 20)
        assert a.get_memory_limit() == 64 << 20
        assert a.get_cache_limit() == 16 << 20


def test_a_memory_limit_of_zero_allows_nothing():
    with memkit.Allocator("sim", memory_limit=0) as a:
        assert a.get_memory_limit() == 0
        with pytest.raises(memkit.OutOfMemoryError):
            a.allocate(512)


def test_arena_maps_pages_on_the_simulated_device():
    with memkit.Allocator("sim", policy="arena", validate=True) as a:
        block = a.allocate(64 << 20)
        assert a.statistics()["maps"] > 0
        a.free(block)


def test_out_of_memory_carries_the_details():
    with memkit.Allocator("sim", capacity=1 << 30, memory_limit=32 << 20,
                          policy="segments") as a:
        held = a.allocate(20 << 20)
        with pytest.raises(memkit.OutOfMemoryError) as caught:
            a.allocate(24 << 20)
        e = caught.value
        assert isinstance(e, MemoryError) and isinstance(e, memkit.MemkitError)
        assert str(e).startswith("[memkit::allocate] out of memory")
        assert e.requested_bytes == 24 << 20
        assert e.active_bytes == held.size
        assert e.limit_bytes == 32 << 20
        assert e.reserved_bytes == e.active_bytes + e.cached_bytes
        assert e.largest_free_bytes < 24 << 20
        assert e.details()["limit_bytes"] == 32 << 20
        s = a.statistics()
        assert s["out_of_memory"] == 1 and s["live_blocks"] == 1  # nothing else changed
        a.free(held)
        a.free(a.allocate(24 << 20))  # fits once the block is gone


def test_bad_calls_raise_invalid_argument(alloc):
    with pytest.raises(memkit.InvalidArgument, match=r"^\[memkit::") as caught:
        alloc.free(12345)
    assert isinstance(caught.value, ValueError)
    with pytest.raises(memkit.InvalidArgument):
        alloc.allocate(1 << 62)  # above the device's largest buffer
    with pytest.raises(TypeError):
        alloc.allocate(-1)


@pytest.mark.parametrize("arguments, message", [
    (dict(backend="tpu"), r"backend 'tpu'"),
    (dict(policy="best"), r"policy 'best'"),
    (dict(arena_slack=float("nan")), r"arena_slack"),
    (dict(backend="cpu", capacity=1 << 30), r"sim backend"),
    (dict(backend="sim", granularity=3000), r"power of two"),
])
def test_bad_options_raise_invalid_argument(arguments, message):
    with pytest.raises(memkit.InvalidArgument, match=r"^\[memkit.Allocator\] .*" + message):
        memkit.Allocator(**arguments)


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError):
        memkit.Allocator("cpu", memory_limt=1)


def test_snapshot_segments_tile_with_their_blocks():
    with memkit.Allocator("sim", policy="segments") as a:
        small = a.allocate(1000)
        large = a.allocate(5 << 20)
        segments = a.snapshot()
        assert len(segments) == a.statistics()["segments"] == 2
        for segment in segments:
            assert sum(b["size"] for b in segment["blocks"]) == segment["size"]
            offset = 0
            for b in segment["blocks"]:
                assert b["offset"] == offset
                offset += b["size"]
        live = {s["base"] + b["offset"]: b for s in segments for b in s["blocks"] if b["live"]}
        assert live[small.address]["requested"] == 1000
        assert live[large.address]["requested"] == 5 << 20
        assert [s["small"] for s in segments if s["base"] <= small.address < s["base"] +
                s["size"]] == [True]
        a.free(small)
        a.free(large)


def test_cpu_blocks_are_host_memory():
    with memkit.Allocator("cpu") as a:
        block = a.allocate(4096)
        ctypes.memset(block.address, 0x5A, block.size)
        assert ctypes.string_at(block.address, 4) == b"ZZZZ"
        a.free(block)


def test_closed_allocator_refuses_calls():
    a = memkit.Allocator("sim")
    a.allocate(1000)
    a.close()
    assert a.closed and "closed" in repr(a)
    with pytest.raises(memkit.InvalidArgument, match=r"^\[memkit.Allocator.statistics\] .*closed"):
        a.statistics()
    with pytest.raises(memkit.InvalidArgument, match="closed"):
        a.allocate(10)
    a.close()  # again: nothing


def test_threads_allocate_and_free_at_once(alloc):
    errors = []

    def work(seed):
        try:
            for i in range(300):
                b = alloc.allocate(512 * (1 + (seed * 7 + i) % 50))
                alloc.free(b)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    alloc.reset_peak()  # flushes the per-thread caches' peaks
    s = alloc.statistics()
    assert s["allocations"] == s["frees"] == 1200
    assert s["live_blocks"] == 0 and s["active_bytes"] == 0


@pytest.mark.parametrize("backend", ["vulkan", "cuda"])
def test_device_backends_where_present(backend):
    if backend not in memkit.available_backends():
        pytest.skip("this build has no %s backend" % backend)
    try:
        a = memkit.Allocator(backend, device=-1 if backend == "vulkan" else 0)
    except memkit.UnavailableError as e:
        pytest.skip("no %s device: %s" % (backend, e))
    with a:
        block = a.allocate(3 << 20)
        assert block.size >= 3 << 20
        assert a.statistics()["live_blocks"] == 1
        a.free(block)
        assert a.statistics()["frees"] == 1


def test_recording_gives_a_trace_replay_reads(tmp_path):
    path = tmp_path / "calls.csv"
    alloc = memkit.Allocator("sim")
    alloc.start_recording(str(path))
    blocks = [alloc.allocate(size) for size in (100, 3 << 20, 40 << 20)]
    for block in blocks:
        alloc.free(block)
    assert alloc.stop_recording() == 6
    result = memkit.replay(str(path))
    assert result["allocations"] == 3
    assert result["events"] == 6
    with pytest.raises(memkit.InvalidArgument, match="cannot open"):
        alloc.start_recording(str(tmp_path / "no" / "dir.csv"))
