#!/usr/bin/env python3
"""Which of PyTorch's CUDA memory APIs work with memkit as the allocator: each probe
runs in its own process, under PyTorch's default allocator and under memkit, and the
table says whether it ran and, if not, what it raised.

    python3 bench/gpu/torch_api_probe.py LIBMEMKIT_TORCH_SO
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBES = {
    "cudnn.benchmark conv train": """
        torch.backends.cudnn.benchmark = True
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3), torch.nn.ReLU(),
                                  torch.nn.Conv2d(64, 64, 3)).cuda()
        for batch in (8, 16, 8):
            net(torch.randn(batch, 3, 64, 64, device="cuda")).sum().backward()
        torch.cuda.synchronize()
    """,
    "memory_allocated / max_memory_allocated": """
        x = torch.empty(1 << 20, device="cuda")
        print(torch.cuda.memory_allocated(), torch.cuda.max_memory_allocated())
    """,
    "memory_reserved / max_memory_reserved": """
        x = torch.empty(1 << 20, device="cuda")
        print(torch.cuda.memory_reserved(), torch.cuda.max_memory_reserved())
    """,
    "reset_peak_memory_stats": """
        x = torch.empty(1 << 20, device="cuda")
        torch.cuda.reset_peak_memory_stats()
    """,
    "memory_stats / memory_summary": """
        x = torch.empty(1 << 20, device="cuda")
        torch.cuda.memory_stats(); torch.cuda.memory_summary()
    """,
    "memory_snapshot": """
        x = torch.empty(1 << 20, device="cuda")
        torch.cuda.memory_snapshot()
    """,
    "mem_get_info / empty_cache": """
        x = torch.empty(1 << 20, device="cuda")
        del x
        torch.cuda.empty_cache(); print(torch.cuda.mem_get_info())
    """,
    "OutOfMemoryError caught": """
        try:
            torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
        except torch.cuda.OutOfMemoryError:
            pass
        x = torch.ones(4, device="cuda"); torch.cuda.synchronize()
    """,
    "set_per_process_memory_fraction": """
        torch.cuda.set_per_process_memory_fraction(0.5)
        x = torch.empty(1 << 20, device="cuda")
    """,
    "torch.compile (inductor)": """
        f = torch.compile(lambda a, b: torch.nn.functional.gelu(a @ b) + 1)
        f(torch.randn(256, 256, device="cuda"), torch.randn(256, 256, device="cuda"))
        torch.cuda.synchronize()
    """,
    "torch.compile reduce-overhead (CUDA graph trees)": """
        model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                    torch.nn.Linear(1024, 256)).cuda()
        compiled = torch.compile(model, mode="reduce-overhead")
        for i in range(6):
            x = torch.randn(32, 256, device="cuda")
            assert torch.allclose(compiled(x), model(x), atol=1e-3), i
    """,
    "torch.compile reduce-overhead training, batch varies": """
        model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                    torch.nn.Linear(1024, 256)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        compiled = torch.compile(model, mode="reduce-overhead")
        for i in range(30):
            x = torch.randn((32, 64, 16)[i % 3], 256, device="cuda")
            loss = compiled(x).square().mean()
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    """,
    "memory._record_memory_history": """
        torch.cuda.memory._record_memory_history()
        x = torch.empty(1 << 20, device="cuda")
        torch.cuda.memory._record_memory_history(enabled=None)
    """,
    "scaled_dot_product_attention": """
        q = torch.randn(4, 8, 512, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        torch.nn.functional.scaled_dot_product_attention(q, q, q).sum().backward()
        torch.cuda.synchronize()
    """,
}

PRELUDE = """
import sys, textwrap
import torch
lib = sys.argv[1]
if lib != "-":
    sys.path.insert(0, {integrations!r})
    from pluggable import use_memkit
    use_memkit(lib, "torch_api_probe")
"""


def run(probe, lib):
    program = PRELUDE.format(integrations=os.path.join(ROOT, "integrations", "pytorch"))
    program += "\n".join(line[8:] if line.startswith(" " * 8) else line
                         for line in probe.strip("\n").splitlines())
    out = subprocess.run([sys.executable, "-c", program, lib], capture_output=True, text=True,
                         timeout=300)
    if out.returncode == 0:
        return "ok"
    lines = [l for l in out.stderr.strip().splitlines() if l.strip()]
    return "FAILED: " + (lines[-1][:160] if lines else "rc %d" % out.returncode)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    lib = sys.argv[1]
    print("| probe | PyTorch's allocator | memkit |")
    print("| --- | --- | --- |")
    for name, probe in PROBES.items():
        print("| %s | %s | %s |" % (name, run(probe, "-"), run(probe, lib)), flush=True)


if __name__ == "__main__":
    main()
