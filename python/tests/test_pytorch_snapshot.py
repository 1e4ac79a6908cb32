"""memkit replay --pytorch-snapshot: a pickle in the format of torch.cuda.memory._snapshot()
that PyTorch's memory_viz opens.

Without PyTorch the tests check what memory_viz relies on: the pickle loads, uses only the
opcodes memory_viz's own JavaScript unpickler reads, has the keys it reads, and its
history is consistent with its final state (memory_viz rebuilds every earlier moment by
undoing the entries from the end, and fails on a block outside every segment). With
PyTorch, memory_viz itself turns the file into its pages."""
import bisect
import json
import pickle
import pickletools
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

RESNET = SOURCE_DIR / "data" / "traces" / "resnet50_train.trace.csv.gz"

# The opcodes of memory_viz's JavaScript unpickler (torch/utils/viz/MemoryViz.js).
JS_OPCODES = {
    "PROTO", "APPEND", "APPENDS", "LIST", "TUPLE", "NEWFALSE", "NEWTRUE", "NONE", "BINGET",
    "BININT", "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME", "LONG1", "LONG_BINGET",
    "MARK", "MEMOIZE", "BINPUT", "LONG_BINPUT", "SETITEMS", "SETITEM", "DICT", "SHORT_BINUNICODE",
    "BINUNICODE", "STOP", "EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "BINFLOAT",
}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom"}


def write_snapshot(memkit_cli, tmp_path, *arguments):
    path = tmp_path / "snapshot.pickle"
    run = subprocess.run([str(memkit_cli), "replay", "--pytorch-snapshot", str(path),
                          *map(str, arguments)], capture_output=True, text=True)
    assert run.returncode in (0, 2), run.stderr
    assert "snapshot: %s" % path in run.stdout
    return path


class Ranges:
    """Disjoint [start, end) ranges, neighbours merged, as memory_viz merges mapped pages."""

    def __init__(self):
        self.starts, self.ends = [], []

    def find(self, start, end):
        """The index of the range holding [start, end), or None."""
        i = bisect.bisect_right(self.starts, start) - 1
        if i >= 0 and self.starts[i] <= start and end <= self.ends[i]:
            return i
        return None

    def add(self, start, end):
        i = bisect.bisect_left(self.starts, start)
        assert i == len(self.starts) or end <= self.starts[i], "overlapping segments"
        assert i == 0 or self.ends[i - 1] <= start, "overlapping segments"
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        if i + 1 < len(self.starts) and self.starts[i + 1] == end:
            self.ends[i] = self.ends.pop(i + 1)
            self.starts.pop(i + 1)
        if i > 0 and self.ends[i - 1] == start:
            self.ends[i - 1] = self.ends.pop(i)
            self.starts.pop(i)

    def remove(self, start, end):
        i = self.find(start, end)
        assert i is not None, "unmapping memory that is not mapped"
        old_start, old_end = self.starts.pop(i), self.ends.pop(i)
        for piece in ((end, old_end), (old_start, start)):
            if piece[0] < piece[1]:
                self.starts.insert(i, piece[0])
                self.ends.insert(i, piece[1])

    def as_list(self):
        return list(zip(self.starts, self.ends))


def check_snapshot(snapshot, device=0):
    """The checks memory_viz's views rely on; returns the device's peak of live bytes."""
    assert set(snapshot) >= {"segments", "device_traces"}
    segments = [s for s in snapshot["segments"] if s["device"] == device]
    for segment in segments:
        assert set(segment) >= {"address", "total_size", "stream", "segment_type",
                                "allocated_size", "active_size", "blocks", "device"}
        # The blocks tile the segment from its base (memory_viz gives each block the
        # address where the one before it ends, and its stats check the sums).
        address = segment["address"]
        for block in segment["blocks"]:
            assert set(block) >= {"address", "size", "requested_size", "state", "frames"}
            assert block["state"] in ("active_allocated", "inactive")
            assert block["address"] == address
            assert block["requested_size"] <= block["size"]
            address += block["size"]
        assert address == segment["address"] + segment["total_size"]
        active = sum(b["size"] for b in segment["blocks"] if b["state"] == "active_allocated")
        assert segment["allocated_size"] == active

    # Forward through the entries: every block lies in mapped memory and every free
    # matches a block; at the end the state is the snapshot's segments and blocks.
    mapped, segment_starts, live = Ranges(), {}, {}
    live_bytes = peak = 0
    for entry in snapshot["device_traces"][device]:
        assert set(entry) >= {"action", "addr", "size", "stream", "frames", "time_us"}
        action, addr, size = entry["action"], entry["addr"], entry["size"]
        assert action in ACTIONS
        if action in ("segment_alloc", "segment_map"):
            mapped.add(addr, addr + size)
            if action == "segment_alloc":
                segment_starts[addr] = size
        elif action in ("segment_free", "segment_unmap"):
            if action == "segment_free":
                assert segment_starts.pop(addr) == size
            mapped.remove(addr, addr + size)
        elif action == "alloc":
            assert addr not in live
            assert mapped.find(addr, addr + size) is not None, "a block outside every segment"
            live[addr] = size
            live_bytes += size
            peak = max(peak, live_bytes)
        elif action == "free_requested":
            assert live[addr] == size
        elif action == "free_completed":
            live_bytes -= live.pop(addr)
    final = Ranges()
    for segment in segments:
        final.add(segment["address"], segment["address"] + segment["total_size"])
    assert mapped.as_list() == final.as_list()
    at_end = {b["address"]: b["requested_size"] for s in segments for b in s["blocks"]
              if b["state"] == "active_allocated"}
    assert at_end == live
    return peak


def test_the_pickle_has_what_memory_viz_reads(memkit_cli, traces, tmp_path):
    path = write_snapshot(memkit_cli, tmp_path, traces / "pytorch_snapshot.json")
    data = path.read_bytes()
    used = {op.name for op, _, _ in pickletools.genops(data)}
    assert used <= JS_OPCODES, used - JS_OPCODES
    snapshot = pickle.loads(data)
    entries = snapshot["device_traces"][0]
    assert [e["action"] for e in entries if not e["action"].startswith("segment")] == [
        "alloc", "alloc", "free_requested", "free_completed", "alloc", "free_requested",
        "free_completed"]
    # Sizes are what the program asked for; streams are the trace's own numbers.
    allocs = [e for e in entries if e["action"] == "alloc"]
    assert [e["size"] for e in allocs] == [512, 1536, 1024]
    assert [e["stream"] for e in allocs] == [0, 0, 94000000000000]
    # The trace's frames come with their allocation.
    assert allocs[0]["frames"] == [{"filename": "train.py", "line": 10, "name": "forward"}]
    assert allocs[1]["frames"] == []
    assert check_snapshot(snapshot) == 1536 + 1024  # the 512 is freed before the 1024


def test_the_frames_of_a_real_snapshot_come_through(memkit_cli, traces, tmp_path):
    """A PyTorch 2.11 snapshot (a small training loop on an H200): each allocation keeps
    its size and frames, through memkit's reader, replay and writer."""
    source = traces / "pytorch_2_11_frames.json"
    path = write_snapshot(memkit_cli, tmp_path, source)
    recorded = [e for e in json.loads(source.read_text())["device_traces"][0]
                if e["action"] == "alloc"]
    written = [e for e in pickle.loads(path.read_bytes())["device_traces"][0]
               if e["action"] == "alloc"]
    assert len(written) == len(recorded) == 58
    for before, after in zip(recorded, written):
        assert after["size"] == before["size"]
        assert after["frames"] == [{"filename": f["filename"], "line": f["line"], "name": f["name"]}
                                   for f in before["frames"]]
    assert any(f["filename"].endswith("linear.py") for e in written for f in e["frames"])


@pytest.mark.parametrize("policy", ["arena", "segments"])
def test_a_real_trace_is_consistent_for_memory_viz(memkit_cli, tmp_path, policy):
    path = write_snapshot(memkit_cli, tmp_path, RESNET, "--policy", policy)
    snapshot = pickle.loads(path.read_bytes())
    actions = {e["action"] for e in snapshot["device_traces"][0]}
    assert (policy == "arena") == ("segment_map" in actions)
    replay = json.loads(subprocess.run(
        [str(memkit_cli), "replay", "--json", "--policy", policy, str(RESNET)],
        capture_output=True, text=True, check=True).stdout)
    assert check_snapshot(snapshot) == replay["peak_live_bytes"]


def test_several_traces_are_several_devices(memkit_cli, traces, tmp_path):
    path = write_snapshot(memkit_cli, tmp_path, traces / "small.trace.csv",
                          traces / "pytorch_snapshot.json")
    snapshot = pickle.loads(path.read_bytes())
    assert len(snapshot["device_traces"]) == 2
    assert {s["device"] for s in snapshot["segments"]} == {0, 1}
    for device in (0, 1):
        check_snapshot(snapshot, device)


def test_out_of_memory_ends_with_an_oom_entry(memkit_cli, traces, tmp_path):
    path = write_snapshot(memkit_cli, tmp_path, traces / "small.trace.csv", "--capacity", 3 << 20)
    snapshot = pickle.loads(path.read_bytes())
    last = snapshot["device_traces"][0][-1]
    assert last["action"] == "oom" and last["size"] > 0 and "device_free" in last
    check_snapshot(snapshot)


def test_the_snapshot_as_json_replays_to_the_same_peak(memkit_cli, tmp_path):
    """memkit reads PyTorch snapshots saved as JSON: its own, converted, replays the same."""
    path = write_snapshot(memkit_cli, tmp_path, RESNET)
    as_json = tmp_path / "snapshot.json"
    as_json.write_text(json.dumps(pickle.loads(path.read_bytes())))
    replays = [json.loads(subprocess.run([str(memkit_cli), "replay", "--json", str(p)],
                                         capture_output=True, text=True, check=True).stdout)
               for p in (RESNET, as_json)]
    for key in ("events", "allocations", "peak_live_bytes"):
        assert replays[0][key] == replays[1][key], key


def test_the_python_package_writes_it_too(memkit_cli, traces, tmp_path):
    import memkit
    path = tmp_path / "from_python.pickle"
    memkit.replay(traces / "pytorch_snapshot.json", pytorch_snapshot=path)
    assert path.read_bytes() == write_snapshot(memkit_cli, tmp_path,
                                               traces / "pytorch_snapshot.json").read_bytes()
    with pytest.raises(memkit.InvalidArgument, match="one of the traces"):
        memkit.replay(traces / "small.trace.csv", pytorch_snapshot=traces / "small.trace.csv")


def test_memory_viz_opens_it(memkit_cli, traces, tmp_path):
    """PyTorch's own viewer on the file (run where PyTorch is installed)."""
    torch = pytest.importorskip("torch",
                                reason="PyTorch is not installed: memory_viz itself not run")
    import torch.cuda._memory_viz as viz
    if not hasattr(viz, "trace_plot"):
        pytest.skip("PyTorch %s's memory_viz has no trace_plot (PyTorch 2.1 and later)"
                    % torch.__version__)
    path = write_snapshot(memkit_cli, tmp_path, RESNET)
    for command in ("trace_plot", "segment_plot"):
        page = tmp_path / (command + ".html")
        subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", command, str(path),
                        "-o", str(page)], check=True, capture_output=True, text=True)
        assert page.stat().st_size > path.stat().st_size  # the pickle is in the page
    stats = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "stats", str(path)],
                           check=True, capture_output=True, text=True).stdout
    assert "total_reserved" in stats
