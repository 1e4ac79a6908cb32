"""integrations/pytorch/ddp_compare.py: its CPU form (DDP over gloo, two ranks, tiny
ResNet) runs and reports every rank; needs torch and torchvision. The GPU form, with
memkit under DDP and FSDP, needs two GPUs (docs/MULTI_GPU.md)."""
import json
import os
import subprocess
import sys

import pytest

from gpu import import_or_none

torch = import_or_none("torch")
torchvision = import_or_none("torchvision")
pytestmark = pytest.mark.skipif(torch is None or torchvision is None,
                                reason="torch and torchvision are not installed")

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "integrations", "pytorch",
                      "ddp_compare.py")


def test_two_cpu_ranks_train_and_report(tmp_path):
    out = tmp_path / "ddp.json"
    run = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--modes", "ddp",
                          "--allocators", "pytorch", "--models", "resnet50", "--tiny",
                          "--steps", "2", "--warmup", "1", "--nproc", "2", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    results = json.loads(out.read_text())
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["world"] == 2 and len(r["step_times_ms"]) == 2 and len(r["losses"]) == 3
    assert "| resnet50 | ddp | pytorch |" in run.stdout


def test_cpu_form_refuses_what_it_cannot_run():
    run = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--modes", "fsdp"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "--device cpu runs DDP" in run.stderr
