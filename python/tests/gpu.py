"""Helpers for the framework tests: skip with the reason where a framework or a GPU is
missing, and run a program in a fresh interpreter (an allocator is chosen once per
process, before the first CUDA allocation)."""
import os
import subprocess
import sys
import textwrap

import pytest

import memkit


def require_cuda_library():
    from memkit import _cuda
    try:
        _cuda.library()
    except memkit.UnavailableError as e:
        pytest.skip(str(e))


def run_program(source):
    """Runs source in a new python with this one's path; returns its stdout."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def import_or_none(name):
    """The module, or None where it is not installed."""
    try:
        return __import__(name)
    except ImportError:
        return None
