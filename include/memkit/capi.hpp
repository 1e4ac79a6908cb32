// The C API (memkit/memkit.h) seen from C++: what a library that speaks the C API
// beside the C++ one (the C API itself, the PyTorch library) needs to answer in its
// terms. Defined in src/capi/.
#pragma once

#include "memkit/errors.hpp"
#include "memkit/memkit.h"

namespace memkit::capi {

// What a failed call tells its C caller.
struct failure {
  memkit_status status = MEMKIT_INTERNAL_ERROR;
  const char* message = "";          // the exception's: valid while it is being handled
  out_of_memory::details details{};  // out_of_memory's; zeros for the others
};

// The failure of the exception being handled: call it from a catch block. The one
// mapping of exceptions to statuses: out_of_memory (and the host's std::bad_alloc)
// MEMKIT_OUT_OF_MEMORY, invalid_argument MEMKIT_INVALID_ARGUMENT, unavailable
// MEMKIT_UNAVAILABLE, anything else MEMKIT_INTERNAL_ERROR.
failure get_current_failure() noexcept;

}  // namespace memkit::capi
