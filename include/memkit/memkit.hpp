// memkit: everything a framework needs, in one include.
#pragma once

#include "memkit/allocator.hpp"
#include "memkit/backend.hpp"
#include "memkit/backends/cpu.hpp"
#include "memkit/backends/sim.hpp"
#include "memkit/errors.hpp"
#include "memkit/statistics.hpp"
