"""Shared paths for the tests: ctest sets MEMKIT_SOURCE_DIR and MEMKIT_BINARY_DIR;
run by hand, they default to this checkout and its build/."""
import os
import pathlib

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get(
    "MEMKIT_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BINARY_DIR = pathlib.Path(os.environ.get("MEMKIT_BINARY_DIR", SOURCE_DIR / "build"))
TRACES = SOURCE_DIR / "tests" / "data" / "traces"


@pytest.fixture
def traces():
    return TRACES


@pytest.fixture
def memkit_cli():
    """The memkit command of the same build, to compare with; the test skips without it."""
    path = BINARY_DIR / "memkit"
    if not path.exists():
        pytest.skip("no memkit command at %s to compare with" % path)
    return path
