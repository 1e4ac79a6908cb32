// memkit_snapshot (memkit.h) from the allocator's segments: one construction for the
// C API and the PyTorch library.
#pragma once

#include <memory>
#include <vector>

#include "memkit/allocator.hpp"
#include "memkit/memkit.h"

namespace memkit::capi {

// Three allocations, given back together by destroy_c_snapshot.
inline memkit_snapshot* make_c_snapshot(const std::vector<segment_view>& views) {
  std::size_t block_count = 0;
  for (const segment_view& v : views) block_count += v.blocks.size();
  auto snapshot = std::make_unique<memkit_snapshot>();
  auto segments = std::make_unique<memkit_segment_record[]>(views.size());
  auto blocks = std::make_unique<memkit_block_record[]>(block_count);
  std::size_t next_block = 0;
  for (std::size_t i = 0; i < views.size(); ++i) {
    const segment_view& v = views[i];
    segments[i] =
        memkit_segment_record{v.base, v.size, v.small, v.blocks.size(), blocks.get() + next_block};
    for (const block_view& b : v.blocks) {
      blocks[next_block++] = memkit_block_record{b.offset, b.size, b.requested, b.live};
    }
  }
  *snapshot = memkit_snapshot{views.size(), segments.release(), block_count, blocks.release()};
  return snapshot.release();
}

inline void destroy_c_snapshot(memkit_snapshot* snapshot) noexcept {
  if (!snapshot) return;
  delete[] snapshot->segments;
  delete[] snapshot->blocks;
  delete snapshot;
}

}  // namespace memkit::capi
