// memkit_allocator_options (memkit.h) as allocator_options, checked: one conversion for
// the C API and the PyTorch library. A bad value throws invalid_argument naming
// `function`.
#pragma once

#include <cmath>
#include <string>

#include "memkit/allocator.hpp"
#include "memkit/memkit.h"

namespace memkit::capi {

inline allocator_options to_options(const memkit_allocator_options& c, const char* function) {
  allocator_options options;
  switch (c.policy) {
    case MEMKIT_POLICY_AUTOMATIC:
      options.policy = pool_policy::automatic;
      break;
    case MEMKIT_POLICY_SEGMENTS:
      options.policy = pool_policy::segments;
      break;
    case MEMKIT_POLICY_ARENA:
      options.policy = pool_policy::arena;
      break;
    default:
      throw invalid_argument(std::string("[") + function + "] policy " +
                             std::to_string(static_cast<int>(c.policy)) +
                             " is not a memkit_policy");
  }
  if (!std::isfinite(c.arena_slack) || c.arena_slack < 0) {
    throw invalid_argument(std::string("[") + function + "] arena_slack " +
                           std::to_string(c.arena_slack) + " is not a finite number >= 0");
  }
  options.memory_limit = c.memory_limit;
  options.cache_limit = c.cache_limit;
  options.wired_limit = c.wired_limit;
  options.arena_slack = c.arena_slack;
  options.validate = c.validate != 0;
  options.thread_cache = c.thread_cache != 0;
  options.plan_loops = c.plan_loops != 0;
  return options;
}

}  // namespace memkit::capi
