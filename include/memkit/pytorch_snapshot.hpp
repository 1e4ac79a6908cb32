// memkit's replay of traces as a PyTorch memory snapshot: the dict that
// torch.cuda.memory._snapshot() returns, pickled, which PyTorch's memory_viz opens
// (python -m torch.cuda._memory_viz trace_plot FILE -o OUT.html) (docs/TRACES.md,
// "Writing PyTorch snapshots").
#pragma once

#include <string>
#include <vector>

#include "memkit/replay.hpp"

namespace memkit::trace {

// One device of the snapshot: a trace and what the allocator did replaying it.
struct snapshot_device {
  const trace_data* trace = nullptr;
  const allocator_history* history = nullptr;
};

// The pickle: `segments` (every device's segments at the end, with their blocks) and
// `device_traces` (one list of entries per device, in the order given).
std::string write_pytorch_snapshot(const std::vector<snapshot_device>& devices);

}  // namespace memkit::trace
