// Per-queue fence bookkeeping. See allocator/fences.hpp.
#include "allocator/fences.hpp"

#include <algorithm>

namespace memkit {

bool fence_tracker::has_unsafe_frees() const {
  for (std::size_t q = 0; q < queues_.size(); ++q) {
    if (queues_[q].last_free_serial > safe_serial_[q]) return true;
  }
  return false;
}

std::vector<queue_id> fence_tracker::find_unordered(queue_id queue) const {
  std::vector<queue_id> unordered;
  for (queue_id q = 0; q < queues_.size(); ++q) {
    const serial_t reusable =
        std::max(safe_serial_[q], ordered_serial_[queue * queues_.size() + q]);
    if (q != queue && queues_[q].last_free_serial > reusable) unordered.push_back(q);
  }
  return unordered;
}

fence_tracker::refresh_plan fence_tracker::plan_refresh(serial_t serial_now) const {
  refresh_plan plan;
  plan.serial = serial_now;
  for (queue_id q = 0; q < queues_.size(); ++q) {
    const queue_state& qs = queues_[q];
    const serial_t covered = qs.records.empty() ? safe_serial_[q] : qs.records.back().serial;
    if (qs.last_free_serial > covered) plan.record.push_back(q);
    if (qs.last_free_serial > safe_serial_[q]) plan.poll.push_back(q);
  }
  return plan;
}

bool fence_tracker::apply_refresh(const refresh_plan& plan,
                                  const std::vector<fence_value>& submitted,
                                  const std::vector<fence_value>& completed) {
  for (std::size_t i = 0; i < plan.record.size(); ++i) {
    queues_[plan.record[i]].records.push_back({plan.serial, submitted[i]});
  }
  bool advanced = false;
  for (std::size_t i = 0; i < plan.poll.size(); ++i) {
    const queue_id q = plan.poll[i];
    queue_state& qs = queues_[q];
    while (!qs.records.empty() && qs.records.front().value <= completed[i]) {
      safe_serial_[q] = std::max(safe_serial_[q], qs.records.front().serial);
      qs.records.pop_front();
      advanced = true;
    }
  }
  return advanced;
}

void fence_tracker::record(queue_id queue, serial_t serial, fence_value value) {
  queue_state& qs = queues_[queue];
  if (serial <= safe_serial_[queue]) return;
  if (!qs.records.empty() && qs.records.back().serial >= serial) return;  // covered already
  // A later fence covers the frees before it too: waits get coarser, never wrong.
  if (qs.records.size() >= kMaxRecords)
    qs.records.back() = {serial, value};
  else
    qs.records.push_back({serial, value});
}

std::optional<fence> fence_tracker::find_covering(queue_id queue, serial_t serial) const {
  for (const queue_record& record : queues_[queue].records) {
    if (record.serial >= serial) return fence{queue, record.value};
  }
  return std::nullopt;
}

std::vector<fence> fence_tracker::get_newest(std::optional<queue_id> only) const {
  std::vector<fence> fences;
  for (queue_id q = 0; q < queues_.size(); ++q) {
    if (only && q != *only) continue;
    if (!queues_[q].records.empty()) fences.push_back({q, queues_[q].records.back().value});
  }
  return fences;
}

std::optional<fence> fence_tracker::find_next(const std::vector<fence>& until) const {
  for (const fence& f : until) {
    const std::deque<queue_record>& records = queues_[f.queue].records;
    std::size_t reaching = 0;  // outstanding fences up to f (values rise along the queue)
    while (reaching < records.size() && records[reaching].value <= f.value) ++reaching;
    if (reaching > 0) return fence{f.queue, records[(reaching - 1) / 4].value};
  }
  return std::nullopt;
}

}  // namespace memkit
