"""memkit.torch: PyTorch allocating through memkit (needs PyTorch and a CUDA GPU)."""
import pytest

from gpu import import_or_none, require_cuda_library, run_program

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
        except RuntimeError as e:
            assert "out of memory" in str(e), e
        assert mt.memory_stats()["num_ooms"] == 1
        mt.empty_cache()
        print(mt.memory_summary())
    """)
    assert "Allocated memory" in out and "Memory limit" in out


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
