#include "memkit/pytorch_snapshot.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "trace/pickle.hpp"

namespace memkit::trace {
namespace {

// A stream as PyTorch writes it, an integer: the trace's label when it is one, else
// the stream's dense number.
std::uint64_t stream_value(const trace_data& trace, std::uint32_t stream) {
  if (stream >= trace.streams.size()) return stream;
  const std::string& label = trace.streams[stream];
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(label.data(), label.data() + label.size(), value);
  return error == std::errc{} && end == label.data() + label.size() ? value : stream;
}

class snapshot_writer {
 public:
  std::string write(const std::vector<snapshot_device>& devices) {
    stack_memos_.resize(devices.size());
    out_.begin_dict();
    out_.shared_string("segments");
    out_.begin_list();
    for (std::size_t d = 0; d < devices.size(); ++d) {
      begin_device(devices, d);
      for (std::size_t s = 0; s < history_->segments.size(); ++s) write_segment(d, s);
    }
    out_.end_list();
    out_.shared_string("device_traces");
    out_.begin_list();
    for (std::size_t d = 0; d < devices.size(); ++d) {
      begin_device(devices, d);
      out_.begin_list();
      for (const history_event& entry : history_->entries) write_entry(entry);
      out_.end_list();
    }
    out_.end_list();
    out_.end_dict();
    return out_.finish();
  }

 private:
  void begin_device(const std::vector<snapshot_device>& devices, std::size_t d) {
    if (trace_ != devices[d].trace) requested_.clear();
    trace_ = devices[d].trace;
    history_ = devices[d].history;
    stack_memo_ = &stack_memos_[d];
    stack_memo_->resize(trace_->stacks.size(), 0);
  }

  void key(const char* name) { out_.shared_string(name); }

  // The frames of a block's stack, as a list of {filename, line, name}; a stack is
  // written once and repeated by reference after.
  void write_frames(std::uint64_t block) {
    const std::uint32_t stack =
        block < trace_->block_stacks.size() ? trace_->block_stacks[block] : 0;
    if (stack == 0) {
      out_.begin_list();
      out_.end_list();
      return;
    }
    std::uint32_t& memo = (*stack_memo_)[stack - 1];
    if (memo != 0) {
      out_.repeat(memo - 1);
      return;
    }
    out_.begin_list();
    memo = out_.remember() + 1;
    for (const frame& f : trace_->stacks[stack - 1]) {
      out_.begin_dict();
      key("filename");
      out_.string(f.filename);
      key("line");
      out_.unsigned_integer(f.line);
      key("name");
      out_.string(f.name);
      out_.end_dict();
    }
    out_.end_list();
  }

  void write_block(address_t address, std::size_t size, std::size_t requested, bool active,
                   std::uint64_t block) {
    out_.begin_dict();
    key("address");
    out_.unsigned_integer(address);
    key("size");
    out_.unsigned_integer(size);
    key("requested_size");
    out_.unsigned_integer(requested);
    key("state");
    out_.shared_string(active ? "active_allocated" : "inactive");
    key("frames");
    if (active) {
      write_frames(block);
    } else {
      out_.begin_list();
      out_.end_list();
    }
    out_.end_dict();
  }

  // A segment with blocks that tile it from its base, as memory_viz reads them: the
  // trace's live blocks active, everything else (free ranges, blocks the allocator
  // still parks for reuse) inactive, neighbouring inactive ranges as one.
  void write_segment(std::size_t device, std::size_t index) {
    const segment_view& segment = history_->segments[index];
    struct piece {
      std::size_t offset = 0, size = 0, requested = 0;
      bool active = false;
      std::uint64_t block = 0;
    };
    std::vector<block_view> views = segment.blocks;
    std::sort(views.begin(), views.end(),
              [](const block_view& a, const block_view& b) { return a.offset < b.offset; });
    std::vector<piece> pieces;
    const auto add_inactive = [&](std::size_t offset, std::size_t size) {
      if (size == 0) return;
      if (!pieces.empty() && !pieces.back().active) {
        pieces.back().size += size;
      } else {
        pieces.push_back({offset, size, 0, false, 0});
      }
    };
    std::size_t cursor = 0;
    for (const block_view& view : views) {
      if (view.offset + view.size <= cursor || view.offset >= segment.size) continue;
      const std::size_t start = std::max(view.offset, cursor);
      const std::size_t end = std::min(view.offset + view.size, segment.size);
      add_inactive(cursor, start - cursor);
      const auto live =
          std::lower_bound(history_->live_blocks.begin(), history_->live_blocks.end(),
                           std::pair<address_t, std::uint64_t>{segment.base + start, 0});
      const bool active = view.live && start == view.offset &&
                          live != history_->live_blocks.end() &&
                          live->first == segment.base + start;
      if (active) {
        const std::size_t requested = requested_size(live->second);
        pieces.push_back(
            {start, end - start, std::min(requested, end - start), true, live->second});
      } else {
        add_inactive(start, end - start);
      }
      cursor = end;
    }
    add_inactive(cursor, segment.size - cursor);

    std::size_t active_bytes = 0, requested_bytes = 0;
    for (const piece& p : pieces) {
      if (!p.active) continue;
      active_bytes += p.size;
      requested_bytes += p.requested;
    }
    out_.begin_dict();
    key("device");
    out_.unsigned_integer(device);
    key("address");
    out_.unsigned_integer(segment.base);
    key("total_size");
    out_.unsigned_integer(segment.size);
    key("allocated_size");
    out_.unsigned_integer(active_bytes);
    key("active_size");
    out_.unsigned_integer(active_bytes);
    key("requested_size");
    out_.unsigned_integer(requested_bytes);
    key("stream");
    out_.unsigned_integer(0);
    key("segment_type");
    out_.shared_string(segment.small ? "small" : "large");
    key("is_expandable");
    out_.boolean(index < history_->segment_in_range.size() && history_->segment_in_range[index]);
    key("frames");
    out_.begin_list();
    out_.end_list();
    key("blocks");
    out_.begin_list();
    for (const piece& p : pieces) {
      write_block(segment.base + p.offset, p.size, p.requested, p.active, p.block);
    }
    out_.end_list();
    out_.end_dict();
  }

  // The bytes the trace asked for block `block`, from its allocation event.
  std::size_t requested_size(std::uint64_t block) {
    if (requested_.empty()) {
      requested_.assign(trace_->allocations, 0);
      for (const event& e : trace_->events) {
        if (e.kind == action::allocate) requested_[e.block] = e.size;
      }
    }
    return block < requested_.size() ? requested_[block] : 0;
  }

  void write_action(const char* action, const history_event& entry, bool with_frames,
                    std::uint64_t stream) {
    out_.begin_dict();
    key("action");
    out_.shared_string(action);
    key("addr");
    out_.unsigned_integer(entry.address);
    key("size");
    out_.unsigned_integer(entry.size);
    key("stream");
    out_.unsigned_integer(stream);
    key("time_us");
    out_.unsigned_integer(entry.event);
    key("frames");
    if (with_frames) {
      write_frames(entry.block);
    } else {
      out_.begin_list();
      out_.end_list();
    }
    if (entry.kind == history_event::kinds::oom) {
      key("device_free");
      out_.unsigned_integer(
          history_->capacity > history_->reserved ? history_->capacity - history_->reserved : 0);
    }
    out_.end_dict();
  }

  void write_entry(const history_event& entry) {
    using kinds = history_event::kinds;
    const std::uint64_t stream = stream_value(*trace_, entry.stream);
    switch (entry.kind) {
      case kinds::alloc:
        write_action("alloc", entry, true, stream);
        break;
      case kinds::free:
        // The program lets go, and the block is free at once: no pending work in a replay.
        write_action("free_requested", entry, false, stream);
        write_action("free_completed", entry, false, stream);
        break;
      case kinds::segment_alloc:
        write_action("segment_alloc", entry, false, 0);
        break;
      case kinds::segment_free:
        write_action("segment_free", entry, false, 0);
        break;
      case kinds::segment_map:
        write_action("segment_map", entry, false, 0);
        break;
      case kinds::segment_unmap:
        write_action("segment_unmap", entry, false, 0);
        break;
      case kinds::oom:
        write_action("oom", entry, false, 0);
        break;
    }
  }

  pickle_writer out_;
  const trace_data* trace_ = nullptr;
  const allocator_history* history_ = nullptr;
  // Per device, per stack: 1 + its memo index once written.
  std::vector<std::vector<std::uint32_t>> stack_memos_;
  std::vector<std::uint32_t>* stack_memo_ = nullptr;
  std::vector<std::size_t> requested_;  // per block of the current trace
};

}  // namespace

std::string write_pytorch_snapshot(const std::vector<snapshot_device>& devices) {
  return snapshot_writer().write(devices);
}

}  // namespace memkit::trace
