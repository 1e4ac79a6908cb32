"""The bench scripts (bench/workloads/*.py) the tests call, loaded by path: bench/ is not
a package, and the scripts import their neighbours (trace_lines) by name."""
import importlib.util
import os
import sys

WORKLOADS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                         "workloads")
if WORKLOADS not in sys.path:
    sys.path.insert(0, WORKLOADS)


def path(name):
    return os.path.join(WORKLOADS, name + ".py")


def load(name):
    spec = importlib.util.spec_from_file_location(name, path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
