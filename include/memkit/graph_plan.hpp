// Planning a recorded graph of kernels: every tensor gets a (buffer, offset) once, so
// the graph runs with the buffers allocated up front and no allocator call after
// (docs/ARCHITECTURE.md, "Arrays, planner, tools").
//
// A graph is a list of kernels in the order they run; each binds tensors with an
// access (read, write, read_write). A tensor lives from the first kernel that binds
// it to the last; a tensor the caller holds lives to the end of the graph, and from
// its start when it is an input (its first kernel reads it, or none binds it).
// Tensors live in the same kernel never share bytes, except sanctioned in-place
// pairs: an output (bound `write`) may take the bytes of an input (bound `read`) of
// the same kernel when that input dies there, is not held by the caller, is marked
// `can_mut` (its handle has one owner) and is no smaller; the output may be one the
// caller holds. plan_graph() forms such pairs between tensors of equal (aligned) size.
//
// With the WebGPU usage-scope rule (memkit/arrays/aliasing.hpp) a written binding may
// not share a buffer with any other binding of its dispatch, even at another offset.
// The plan then spans several buffers: tensors are coloured so that a tensor a
// kernel writes sits in no buffer holding another tensor of that kernel, each colour
// is one buffer, and each buffer is planned alone. In-place pairs are not formed
// under the rule (the pair would be a written and a read binding of one buffer).
//
// Offsets come from planner::solve() (memkit/planner.hpp) over the tensors' (or
// in-place chains') lifetimes, sizes rounded up to `alignment`. validate_graph_plan()
// checks a plan independently of how it was made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memkit/arrays/aliasing.hpp"
#include "memkit/planner.hpp"

namespace memkit::planner {

struct graph_tensor {
  std::int64_t bytes = 0;       // > 0
  bool held_by_caller = false;  // a graph input or output (see above)
  bool can_mut = false;         // its last reader may write its output in place
};

struct graph_binding {
  std::size_t tensor = 0;  // index into kernel_graph::tensors
  arrays::access use = arrays::access::read;
};

struct graph_kernel {
  std::string name;
  std::vector<graph_binding> bindings;
};

struct kernel_graph {
  std::vector<graph_tensor> tensors;
  std::vector<graph_kernel> kernels;  // in the order they run
};

struct graph_plan_options {
  bool webgpu_usage_scope = false;
  bool in_place = true;             // form in-place pairs where allowed
  std::int64_t alignment = 256;     // every offset is a multiple of it
  double time_limit_seconds = 1.0;  // for the offset search, all buffers together
};

struct tensor_placement {
  std::uint32_t buffer = 0;
  std::int64_t offset = 0;
};

struct in_place_pair {
  std::size_t kernel = 0;
  std::size_t input = 0;   // tensor whose bytes are taken
  std::size_t output = 0;  // tensor written there
};

struct graph_plan {
  std::vector<tensor_placement> placements;  // one per tensor
  std::vector<std::int64_t> buffer_bytes;    // allocate each buffer once, this size
  std::vector<in_place_pair> in_place;       // sanctioned overlaps
  std::int64_t load_bytes = 0;               // largest sum of (aligned) tensor bytes live at once
  std::int64_t total_bytes() const;
};

// Rejects bindings of unknown tensors, tensors of <= 0 bytes, alignment <= 0 and
// tensors no kernel binds (unless held by the caller) with planner_error.
graph_plan plan_graph(const kernel_graph& graph, const graph_plan_options& settings = {});

// Checks one placement per tensor inside its buffer; that no two tensors live in the
// same kernel share a byte of one buffer, except the plan's in-place pairs (which it
// checks are allowed); and, when asked, the usage-scope rule in every kernel.
validation validate_graph_plan(const kernel_graph& graph, const graph_plan& plan,
                               bool webgpu_usage_scope);

}  // namespace memkit::planner
