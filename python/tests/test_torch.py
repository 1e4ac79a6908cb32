"""memkit.torch: PyTorch allocating through memkit (needs PyTorch and a CUDA GPU)."""
import os
import sys
import textwrap

import pytest

from gpu import import_or_none, require_cuda_library, run_program

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench", "gpu"))
from torch_api_probe import PROBES  # noqa: E402

torch = import_or_none("torch")
pytestmark = [
    pytest.mark.skipif(torch is None, reason="PyTorch is not installed"),
    pytest.mark.skipif(torch is not None and not torch.cuda.is_available(),
                       reason="PyTorch sees no CUDA device"),
]


def test_training_step_reports_memkit_statistics():
    require_cuda_library()
    out = run_program("""
        import torch, memkit.torch as mt
        mt.enable(policy="arena", cache_limit=1 << 30)
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                    torch.nn.Linear(4096, 10)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            loss = model(torch.randn(256, 1024, device="cuda")).sum()
            loss.backward(); opt.step(); opt.zero_grad()
        torch.cuda.synchronize()
        s = mt.memory_stats()
        assert s["allocated_bytes.all.current"] == mt.memory_allocated() > 0
        assert mt.max_memory_allocated() >= mt.memory_allocated()
        assert s["reserved_bytes.all.current"] >= s["allocated_bytes.all.current"]
        assert mt.get_cache_limit() == 1 << 30
        snapshot = mt.memory_snapshot()
        assert sum(b["size"] for seg in snapshot for b in seg["blocks"]
                   if b["state"] == "active_allocated") == mt.memory_allocated()
        mt.reset_peak_memory_stats()
        assert mt.max_memory_allocated() == mt.memory_allocated()
        previous = mt.set_per_process_memory_fraction(0.5)
        total = torch.cuda.get_device_properties(0).total_memory
        assert mt.get_memory_limit() == int(0.5 * total)
        try:
            torch.empty(int(0.6 * total), dtype=torch.uint8, device="cuda")
            raise SystemExit("no out of memory above the limit")
        except torch.cuda.OutOfMemoryError as e:  # as with PyTorch's own allocator
            assert "CUDA out of memory." in str(e) and "[memkit::" in str(e), e
        assert mt.memory_stats()["num_ooms"] == 1
        mt.empty_cache()
        print(mt.memory_summary())
    """)
    assert "Allocated memory" in out and "Memory limit" in out


def test_pytorch_memory_calls_answer_with_memkit():
    # PyTorch's pluggable allocator class refuses cacheInfo (cuDNN's benchmark mode),
    # getDeviceStats (torch.cuda.memory_allocated and the rest) and the resets; memkit
    # answers them with its own statistics.
    require_cuda_library()
    # The probe's cuDNN program first (bench/gpu/torch_api_probe.py).
    run_program(textwrap.dedent("""
        import torch, memkit.torch as mt
        mt.enable()
    """) + textwrap.dedent(PROBES["cudnn.benchmark conv train"]) + textwrap.dedent("""
        assert torch.cuda.memory_allocated() == mt.memory_allocated() > 0
        assert torch.cuda.max_memory_allocated() == mt.max_memory_allocated()
        assert torch.cuda.memory_reserved() == mt.memory_reserved()
        assert torch.cuda.max_memory_reserved() == mt.max_memory_reserved()
        s = torch.cuda.memory_stats()
        assert s["allocated_bytes.all.current"] == mt.memory_allocated(), s
        assert s["requested_bytes.all.peak"] >= s["requested_bytes.all.current"] > 0, s
        assert s["allocation.all.allocated"] >= s["allocation.all.current"] > 0, s
        torch.cuda.reset_peak_memory_stats()
        assert torch.cuda.max_memory_allocated() == torch.cuda.memory_allocated()
        torch.cuda.reset_accumulated_memory_stats()
        assert torch.cuda.memory_stats()["allocation.all.allocated"] == 0
        x = torch.empty(1 << 20, device="cuda")
        assert torch.cuda.memory_stats()["allocation.all.allocated"] == 1
        assert "Allocated memory" in torch.cuda.memory_summary()
        total = torch.cuda.get_device_properties(0).total_memory
        for nbytes in (4 * total, int(0.6 * total)):  # past the device; past the limit
            torch.cuda.set_per_process_memory_fraction(0.5)
            try:
                torch.empty(nbytes, dtype=torch.uint8, device="cuda")
                raise SystemExit("no out of memory for %d bytes" % nbytes)
            except torch.cuda.OutOfMemoryError as e:
                assert "CUDA out of memory." in str(e), e
        assert torch.cuda.memory_stats()["num_ooms"] == 1
        x += 1
        torch.cuda.synchronize()
    """))


def test_enable_after_the_first_cuda_allocation_is_refused():
    require_cuda_library()
    run_program("""
        import torch, memkit, memkit.torch as mt
        torch.ones(1, device="cuda")
        try:
            mt.enable()
            raise SystemExit("enable() accepted after an allocation")
        except memkit.InvalidArgument as e:
            assert "before the first CUDA allocation" in str(e), e
    """)


def test_cuda_graphs_capture_into_a_private_pool():
    # The graph's blocks serve no eager request while it lives: eager tensors made
    # between replays keep their values, and every replay matches the eager model.
    require_cuda_library()
    run_program("""
        import torch, memkit.torch as mt
        mt.enable()
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                    torch.nn.Linear(4096, 1024)).cuda()
        x = torch.randn(64, 1024, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        reserved = mt.memory_reserved()
        with torch.cuda.graph(graph):
            y = model(x)
        # The pool's memory is the graph's own, and memkit's statistics count it.
        assert mt.memory_reserved() > reserved, (mt.memory_reserved(), reserved)
        for i in range(10):
            x.copy_(torch.randn(64, 1024, device="cuda"))
            eager = [torch.full((64, 4096), float(i), device="cuda") for _ in range(8)]
            graph.replay()
            assert torch.allclose(y, model(x), atol=1e-4), i
            assert all(bool((t == i).all()) for t in eager), i
        del graph, y
        torch.cuda.synchronize()
        assert mt.memory_allocated() > 0
    """)


@pytest.mark.parametrize("graph_trees", [False, True])
def test_compile_reduce_overhead_runs_on_memkit(graph_trees):
    # With CUDA graph trees (PyTorch's default) PyTorch also checks a pool's live blocks
    # and takes the allocator's state after each recording, which memkit answers on
    # PyTorch 2.11; without them, its plain CUDA graphs path, through the hooks.
    require_cuda_library()
    run_program("""
        import torch, torch._inductor.config, memkit.torch as mt
        mt.enable()
        torch._inductor.config.triton.cudagraph_trees = %s
        model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                    torch.nn.Linear(1024, 256)).cuda()
        compiled = torch.compile(model, mode="reduce-overhead")
        for i in range(8):
            x = torch.randn(32, 256, device="cuda")
            eager = torch.full((32, 1024), float(i), device="cuda")
            assert torch.allclose(compiled(x), model(x), atol=1e-3), i
            assert bool((eager == i).all()), i
    """ % graph_trees)


def test_record_stream_delays_reuse_until_the_other_stream_is_done():
    require_cuda_library()
    run_program("""
        import torch, memkit.torch as mt
        mt.enable()
        other = torch.cuda.Stream()
        x = torch.ones(1 << 20, device="cuda")
        address = x.data_ptr()
        other.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(other):
            torch.cuda._sleep(200_000_000)  # keeps `other` busy for a while
            x.add_(1)
        x.record_stream(other)
        del x
        y = torch.empty(1 << 20, device="cuda")
        # Reused only after waiting for `other` (the allocator may wait rather than grow).
        assert y.data_ptr() != address or other.query(), "reused while `other` still uses it"
        torch.cuda.synchronize()
    """)


def test_empty_cache_and_memory_fraction_reach_memkit():
    require_cuda_library()
    run_program("""
        import torch, memkit.torch as mt
        mt.enable(policy="segments")
        x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        del x
        assert mt.memory_reserved() > 0
        torch.cuda.empty_cache()
        assert mt.memory_reserved() == 0, mt.memory_reserved()
        torch.cuda.set_per_process_memory_fraction(0.25)
        total = torch.cuda.get_device_properties(0).total_memory
        assert mt.get_memory_limit() == int(0.25 * total), mt.get_memory_limit()
    """)


def test_plain_pluggable_allocator_gets_the_hooks_at_its_first_allocation():
    # As a program that installs the library with CUDAPluggableAllocator alone does.
    require_cuda_library()
    run_program("""
        import torch
        from memkit import _cuda
        allocator = torch.cuda.memory.CUDAPluggableAllocator(
            _cuda.library_path(), "memkit_torch_malloc", "memkit_torch_free")
        torch.cuda.memory.change_current_allocator(allocator)
        model = torch.nn.Linear(512, 512).cuda()
        x = torch.randn(16, 512, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            model(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = model(x)
        eager = torch.full((16, 512), 3.0, device="cuda")
        graph.replay()
        assert torch.allclose(y, model(x), atol=1e-4)
        assert bool((eager == 3.0).all())
    """)
