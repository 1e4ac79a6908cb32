// A trace as memkit's CSV (docs/TRACES.md, "memkit CSV"), for `memkit convert`: any
// format the readers take becomes a file they read back to the same events, streams,
// steps, metadata and call stacks.
#pragma once

#include <string>

#include "memkit/trace.hpp"

namespace memkit::trace {

// Block k is id k; each stack is written as `@` lines just before its first use.
// Metadata keeps its order, with `workload` added when the trace has none (its name
// stays the same read back).
std::string write_memkit_csv(const trace_data& trace);

}  // namespace memkit::trace
