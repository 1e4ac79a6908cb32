#include "memkit/adaptors/fault_injection.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace memkit {

bool fault_injection_adaptor::schedule_state::next() {
  const std::uint64_t call = ++calls;
  bool fail = schedule.every != 0 && call % schedule.every == 0;
  if (schedule.rate > 0.0) {
    // Draw on every call so that a seed gives the same faults whatever else fails.
    const double draw = std::uniform_real_distribution<double>(0.0, 1.0)(random);
    fail = fail || draw < schedule.rate;
  }
  if (!schedule.calls.empty()) {
    fail = fail ||
           std::find(schedule.calls.begin(), schedule.calls.end(), call) != schedule.calls.end();
  }
  return fail;
}

fault_injection_adaptor::fault_injection_adaptor(backend& upstream, fault_injection_options options)
    : forwarded_data(upstream),
      upstream_(upstream),
      unmap_delay_us_(options.unmap_delay_us),
      segments_(std::move(options.segments)),
      vm_(std::move(options.virtual_memory)),
      orderings_(std::move(options.orderings)),
      vm_calls_(options.vm_calls),
      lag_(options.completion_lag),
      random_lag_(options.random_lag),
      lag_random_(options.lag_seed),
      histories_(std::max<std::uint32_t>(upstream.get_facts().queue_count, 1)) {}

address_t fault_injection_adaptor::allocate_segment(std::size_t bytes) {
  {
    std::lock_guard lock(mutex_);
    counters_.segment_calls++;
    if (segments_.next() && enabled_) {
      counters_.segment_faults++;
      return 0;
    }
  }
  return upstream_.allocate_segment(bytes);
}

bool fault_injection_adaptor::order_after(queue_id queue, fence f) {
  {
    std::lock_guard lock(mutex_);
    counters_.order_calls++;
    if (orderings_.next() && enabled_) {
      counters_.order_refusals++;
      return false;
    }
  }
  return upstream_.order_after(queue, f);
}

void fault_injection_adaptor::free_segment(address_t address, std::size_t bytes) {
  upstream_.free_segment(address, bytes);
}

std::uint64_t fault_injection_adaptor::get_submitted(queue_id queue) {
  return upstream_.get_submitted(queue);
}

fault_injection_adaptor::queue_history& fault_injection_adaptor::get_history(queue_id queue) const {
  if (queue >= histories_.size()) histories_.resize(queue + 1);
  return histories_[queue];
}

std::uint64_t fault_injection_adaptor::get_completed(queue_id queue) const {
  const std::uint64_t now = upstream_.get_completed(queue);  // throws for a bad queue
  std::lock_guard lock(mutex_);
  queue_history& h = get_history(queue);
  if (lag_ == 0) {
    h.reported = std::max(h.reported, now);
    return h.reported;
  }
  h.values.push_back(now);
  while (h.values.size() > std::size_t{lag_} + 1) h.values.pop_front();
  std::size_t back = h.values.size() - 1;  // steps back from the newest answer
  if (random_lag_) {
    back = std::min<std::size_t>(
        back, std::uniform_int_distribution<std::uint32_t>(0, lag_)(lag_random_));
  }
  const std::uint64_t answer = std::max(h.reported, h.values[h.values.size() - 1 - back]);
  if (answer < now) counters_.late_completions++;
  h.reported = answer;
  return answer;
}

void fault_injection_adaptor::wait(fence f) {
  upstream_.wait(f);
  // A fence waited for is complete: later answers must not say otherwise.
  const std::uint64_t now = upstream_.get_completed(f.queue);
  std::lock_guard lock(mutex_);
  queue_history& h = get_history(f.queue);
  h.reported = std::max(h.reported, std::min(f.value, now));
}

void fault_injection_adaptor::set_wired_limit(std::size_t bytes) {
  upstream_.set_wired_limit(bytes);
}

template <class Call>
void fault_injection_adaptor::count_upstream_failure(Call&& call) {
  try {
    call();
  } catch (...) {
    std::lock_guard lock(mutex_);
    counters_.upstream_failures++;
    throw;
  }
}

bool fault_injection_adaptor::should_fail_vm(vm_call which, std::uint64_t* call) {
  std::lock_guard lock(mutex_);
  if (!(vm_calls_ & which)) return false;
  counters_.vm_calls++;
  const bool fail = vm_.next() && enabled_;
  if (fail) counters_.vm_faults++;
  *call = vm_.calls;
  return fail;
}

address_t fault_injection_adaptor::reserve_range(std::size_t bytes) {
  std::uint64_t call;
  if (should_fail_vm(vm_reserve_range, &call)) return 0;
  return upstream_.reserve_range(bytes);
}

void fault_injection_adaptor::release_range(address_t base, std::size_t bytes) {
  upstream_.release_range(base, bytes);
}

page_id fault_injection_adaptor::create_page(std::size_t bytes) {
  std::uint64_t call;
  if (should_fail_vm(vm_create_page, &call)) return 0;
  return upstream_.create_page(bytes);
}

void fault_injection_adaptor::release_page(page_id page, std::size_t bytes) {
  upstream_.release_page(page, bytes);
}

void fault_injection_adaptor::map(address_t at, page_id page, std::size_t bytes) {
  std::uint64_t call;
  if (should_fail_vm(vm_map, &call)) {
    throw injected_fault(
        "[memkit::fault_injection_adaptor::map] injected fault at virtual-memory call " +
        std::to_string(call) + " (" + std::to_string(bytes) + " bytes)");
  }
  count_upstream_failure([&] { upstream_.map(at, page, bytes); });
}

void fault_injection_adaptor::set_access(address_t at, std::size_t bytes) {
  upstream_.set_access(at, bytes);
}

void fault_injection_adaptor::unmap(address_t at, std::size_t bytes) {
  std::uint64_t call;
  if (should_fail_vm(vm_unmap, &call)) {
    throw injected_fault(
        "[memkit::fault_injection_adaptor::unmap] injected fault at virtual-memory call " +
        std::to_string(call) + " (" + std::to_string(bytes) + " bytes)");
  }
  if (unmap_delay_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(unmap_delay_us_));
  count_upstream_failure([&] { upstream_.unmap(at, bytes); });
}

void fault_injection_adaptor::set_segment_schedule(fault_schedule schedule) {
  std::lock_guard lock(mutex_);
  segments_ = schedule_state(std::move(schedule));
}

void fault_injection_adaptor::set_vm_schedule(fault_schedule schedule, unsigned calls) {
  std::lock_guard lock(mutex_);
  vm_ = schedule_state(std::move(schedule));
  vm_calls_ = calls;
}

void fault_injection_adaptor::set_enabled(bool on) {
  std::lock_guard lock(mutex_);
  enabled_ = on;
}

void fault_injection_adaptor::set_completion_lag(std::uint32_t lag, bool random) {
  std::lock_guard lock(mutex_);
  lag_ = lag;
  random_lag_ = random;
}

fault_counters fault_injection_adaptor::get_counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace memkit
