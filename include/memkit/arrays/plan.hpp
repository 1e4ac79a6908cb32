// A plan: submitted batches written out as JSON, so a backend outside the
// process (integrations/webgpu) can run exactly the dispatches, buffers, offsets,
// sizes and accesses the encoder chose.
//
//   {"rule": "webgpu_usage_scope",
//    "buffers": [{"id": 0, "size": 16777216}, ...],
//    "batches": [{"dispatches": [{"kernel": "add", "arguments": [],
//        "relocation": false,
//        "bindings": [{"handle": 3, "buffer": 0, "offset": 0, "size": 4096,
//                      "access": "read"}, ...]}]}],
//    "results": [{"handle": 7, "buffer": 1, "offset": 256, "size": 4096}]}
#pragma once

#include <span>
#include <string>

#include "memkit/arrays/context.hpp"
#include "memkit/arrays/encoder.hpp"

namespace memkit::arrays {

// results: the handles whose final contents a runner should check.
std::string export_plan(const context& source, std::span<const batch> batches,
                        std::span<const handle> results);

}  // namespace memkit::arrays
