// The allocator: its hot path (thread caches, then the pools under the lock), limits,
// statistics and views; what a request does when no free place holds it is in
// slow_path.cpp. Design and invariants: include/memkit/allocator.hpp.
#include "memkit/allocator.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "allocator/state.hpp"

namespace memkit {

namespace {
std::atomic<std::uint64_t> next_allocator_id{1};
}  // namespace

allocator::state::state(backend& b, const allocator_options& options)
    : device(b),
      facts(b.get_facts()),
      fences(std::max<std::uint32_t>(facts.queue_count, 1)),
      small(true, fences.get_reuse_view()),
      large(false, fences.get_reuse_view()),
      id(next_allocator_id++) {
  if (facts.max_buffer == 0) facts.max_buffer = facts.capacity;
  memory_limit = options.memory_limit ? options.memory_limit : facts.capacity;
  cache_limit = options.cache_limit ? options.cache_limit : memory_limit;
  wired_limit = options.wired_limit;
  validating = options.validate;
  thread_caching = options.thread_cache;
  ordering_queues = options.order_queues && facts.queue_ordering && facts.queue_count > 1;
#ifdef MEMKIT_VALIDATE_DEFAULT
  validating = true;
#endif
  if (options.policy == pool_policy::arena && !facts.virtual_memory) {
    throw invalid_argument("[memkit::allocator] the arena policy needs virtual memory, which " +
                           facts.name + " does not offer");
  }
  if (options.policy != pool_policy::segments && facts.virtual_memory) {
    vm = arena::create(device, facts, fences, options.arena_slack);
    if (vm) {
      vm->set_loop_planning(options.plan_loops);
      vm->set_listener(options.pages);
      small_max = pools::kSmallRequestWithArena;
      small_in_arena = options.small_segments_in_arena &&
                       vm->get_page_size() == segment_size_for(pools::kSmallRequest / 2);
      if (small_in_arena) vm->make_small_area();
    }
  }
}

std::size_t allocator::state::segment_size_for(std::size_t size) const {
  const std::size_t g = std::max<std::size_t>(facts.granularity, 1);
  std::size_t bytes =
      size <= small_max ? common::round_up(pools::kSmallSegment, g) : common::round_up(size, g);
  if (bytes > facts.max_buffer) bytes = std::max(size, facts.max_buffer);
  return bytes;
}

allocation allocator::state::on_allocated(block* b, std::size_t bytes, bool hit) {
  b->requested = bytes;
  b->counted_requested = bytes;
  b->stamp.store(thread_cache::serial_of(++stamp_counter), std::memory_order_release);
  const address_t address = b->owner->base + b->offset;
  live.insert(address, b);
  stats.active_bytes += b->size;
  stats.requested_bytes += bytes;
  stats.peak_active_bytes = std::max(stats.peak_active_bytes, stats.active_bytes);
  stats.peak_requested_bytes = std::max(stats.peak_requested_bytes, stats.requested_bytes);
  stats.cached_bytes = stats.reserved_bytes - stats.active_bytes;
  stats.allocations++;
  stats.cache_hits += hit;
  stats.live_blocks++;
  if (validating) validate_locked();
  return {address, b->size};
}

// ---------------------------------------------------------------------------
// Hot path

allocator::allocator(backend& device, allocator_options options)
    : state_(std::make_unique<state>(device, options)) {
  if (options.wired_limit) set_wired_limit(options.wired_limit);
  if (!options.record_path.empty()) start_recording(options.record_path);
}

allocator::~allocator() {
  state& s = *state_;
  s.detach_thread_caches();
  for (segment_pool* pool : {&s.small, &s.large}) {
    for (segment* seg : pool->get_segments()) {
      if (!seg->arena_block) s.device.free_segment(seg->base, seg->size);  // else the arena's
    }
  }
  s.vm.reset();  // unmaps and releases its pages, then its range
}

[[gnu::always_inline]] inline allocation allocator::allocate_unrecorded(std::size_t bytes,
                                                                        queue_id queue) {
  if (bytes == 0) return {};
  state& s = *state_;
  if (bytes > s.facts.max_buffer) [[unlikely]] {
    throw invalid_argument("[memkit::allocate] a request of " + std::to_string(bytes) +
                           " bytes exceeds the backend's largest buffer of " +
                           std::to_string(s.facts.max_buffer) + " bytes (" + s.facts.name + ")");
  }
  if (queue >= s.fences.get_queue_count()) [[unlikely]] {
    throw invalid_argument("[memkit::allocate] queue " + std::to_string(queue) +
                           " does not exist; the backend has " +
                           std::to_string(s.fences.get_queue_count()));
  }
  const std::size_t size = common::round_up(bytes, pools::kQuantum);
  thread_cache* cache = s.thread_caching ? s.get_thread_cache() : nullptr;
  bool remember = false;  // the thread cache learns the block, to park it when freed
  block* b = nullptr;
  address_t address = 0;
  if (cache && cache->is_holding_back()) [[unlikely]]
    b = s.take_held_back(*cache, size, bytes, queue, &address);
  if (!b && size <= s.small_max && cache) {
    if (cache->is_worth_trying()) {
      // Fastest: a block this thread freed, without the allocator's lock.
      cache->lock();
      b = cache->pop(size, queue, &address);
      if (b) cache->count_handed(b, bytes);
      cache->unlock();
      cache->count_try(b != nullptr);
    }
    remember = cache->is_trying();
  }
  if (b) {
    cache->remember(address, b, b->stamp.load(std::memory_order_relaxed));
    if (s.validating) validate();
    return {address, b->size};
  }
  remember = remember || (cache && s.uses_arena(size) && size <= thread_cache::kMaxHeldBack &&
                          cache->is_worth_holding_back());
  allocation a;
  block* handed = nullptr;
  if (!s.uses_arena(size)) {
    std::lock_guard lock(s.mutex);
    if (block* taken = s.pool_for(size).take(size, queue)) [[likely]] {
      a = s.on_allocated(taken, bytes, true);
      handed = taken;
    }
  }
  if (!handed) a = s.allocate_slow(bytes, size, queue, &handed);
  if (remember) cache->remember(a.address, handed, handed->stamp.load(std::memory_order_relaxed));
  return a;
}

[[gnu::always_inline]] inline void allocator::free_unrecorded(address_t address) {
  if (address == 0) return;
  state& s = *state_;
  if (s.thread_caching) {
    // Fastest: park a block this thread holds in its cache, without the lock.
    thread_cache* cache = s.get_thread_cache();
    // The block held back before goes to the arena first, for the order of frees.
    if (cache->is_holding_back()) [[unlikely]]
      s.free_held_back(*cache);
    if (block* b = cache->recall(address); b && !b->used_elsewhere) {
      cache->lock();
      const bool parked =
          b->owner->virtual_range ? cache->hold_back(b, address) : cache->push(b, address);
      if (parked) cache->count_parked(b);
      cache->unlock();
      if (parked) {
        if (s.validating) validate();
        return;
      }
    }
  }
  s.free_shared(address, nullptr);
}

// A free through the allocator's lock: of `known` (a block a thread cache gave up)
// or else of the live block at `address`.
void allocator::state::free_shared(address_t address, block* known) {
  bool over_cache_limit;
  bool idled_pages;
  queue_id queue;
  std::uint64_t serial;
  {
    std::lock_guard lock(mutex);
    block* b = known ? known : find_live(address);
    if (!b) [[unlikely]] {
      throw invalid_argument("[memkit::free] " + common::hex(address) + " is not a live block");
    }
    queue = b->queue;
    idled_pages = free_locked(b, address);
    serial = free_serial;
    over_cache_limit = stats.cached_bytes > cache_limit;
    if (validating) validate_locked();
  }
  if (idled_pages) record_fence(queue, serial);
  if (over_cache_limit) [[unlikely]]
    trim_cache();
}

// The public calls: the hot path above, then the recorder when one is on.
allocation allocator::allocate(std::size_t bytes, queue_id queue) {
  const allocation a = allocate_unrecorded(bytes, queue);
  if (state_->recording.load(std::memory_order_relaxed) && a.address) [[unlikely]]
    state_->record.on_allocate(a.address, bytes, queue);
  return a;
}

void allocator::free(address_t address) {
  // Recorded first: once freed, the address may be handed out again on another
  // thread, whose allocation must come after this free in the trace. (A bad address
  // was never recorded: the recorder writes nothing for it.)
  if (state_->recording.load(std::memory_order_relaxed) && address) [[unlikely]]
    state_->record.on_free(address);
  free_unrecorded(address);
}

void allocator::start_recording(const std::string& path) {
  state& s = *state_;
  s.record.start(path, s.facts.name);
  s.recording.store(true, std::memory_order_relaxed);
}

std::uint64_t allocator::stop_recording() {
  state_->recording.store(false, std::memory_order_relaxed);
  return state_->record.stop();
}

bool allocator::state::free_locked(block* b, address_t address) {
  live.erase(address);
  stats.requested_bytes -= close_requested_account(b);
  b->stamp.store(0, std::memory_order_release);
  stats.active_bytes -= b->size;
  stats.cached_bytes = stats.reserved_bytes - stats.active_bytes;
  stats.frees++;
  stats.live_blocks--;
  const std::uint64_t serial = ++free_serial;
  fences.note_free(b->queue, serial);
  segment_pool& p = owner_pool(b);
  if (b->used_elsewhere) [[unlikely]] {
    auto it = extra_uses.find(b);
    for (queue_id q : it->second) fences.note_free(q, serial);
    it->second.push_back(b->queue);
    deferred.push_back({b, std::move(it->second), serial});
    extra_uses.erase(it);
    b->used_elsewhere = false;
    p.defer(b);
    return false;
  }
  if (b->owner->virtual_range) return vm->free(b, serial);
  p.give_back(b, serial);
  return false;
}

// ---------------------------------------------------------------------------
// Limits, statistics, views

std::size_t allocator::set_memory_limit(std::size_t bytes) {
  state& s = *state_;
  std::size_t previous;
  state::released_memory released;
  s.refresh_fences();
  {
    std::lock_guard lock(s.mutex);
    s.flush_thread_caches_locked();
    previous = s.memory_limit;
    s.memory_limit = bytes;
    if (s.stats.reserved_bytes > bytes) s.release_until(bytes, released);
  }
  s.give_back(released);
  return previous;
}

std::size_t allocator::set_cache_limit(std::size_t bytes) {
  state& s = *state_;
  std::size_t previous;
  {
    std::lock_guard lock(s.mutex);
    previous = s.cache_limit;
    s.cache_limit = bytes;
  }
  s.trim_cache();
  return previous;
}

std::size_t allocator::set_wired_limit(std::size_t bytes) {
  state& s = *state_;
  if (bytes > s.facts.max_wired) {
    throw invalid_argument("[memkit::set_wired_limit] " + std::to_string(bytes) +
                           " bytes exceeds the backend's maximum of " +
                           std::to_string(s.facts.max_wired) + " bytes (" + s.facts.name + ")");
  }
  std::size_t previous;
  {
    std::lock_guard lock(s.mutex);
    previous = s.wired_limit;
    s.wired_limit = bytes;
  }
  s.device.set_wired_limit(bytes);
  return previous;
}

std::size_t allocator::get_memory_limit() const {
  std::lock_guard lock(state_->mutex);
  return state_->memory_limit;
}
std::size_t allocator::get_cache_limit() const {
  std::lock_guard lock(state_->mutex);
  return state_->cache_limit;
}
std::size_t allocator::get_wired_limit() const {
  std::lock_guard lock(state_->mutex);
  return state_->wired_limit;
}

void allocator::record_use(address_t address, queue_id queue) {
  state& s = *state_;
  std::lock_guard lock(s.mutex);
  block* b = s.find_live(address);
  if (!b)
    throw invalid_argument("[memkit::record_use] " + common::hex(address) + " is not a live block");
  if (queue >= s.fences.get_queue_count()) {
    throw invalid_argument("[memkit::record_use] queue " + std::to_string(queue) +
                           " does not exist");
  }
  if (queue == b->queue) return;
  b->used_elsewhere = true;
  auto& uses = s.extra_uses[b];
  if (std::find(uses.begin(), uses.end(), queue) == uses.end()) uses.push_back(queue);
}

std::size_t allocator::get_size(address_t address) const {
  std::lock_guard lock(state_->mutex);
  const block* b = state_->find_live(address);
  if (!b)
    throw invalid_argument("[memkit::get_size] " + common::hex(address) + " is not a live block");
  return b->size;
}

statistics allocator::get_statistics() const {
  std::lock_guard lock(state_->mutex);
  return state_->get_statistics_locked();
}

void allocator::reset_peak() {
  std::lock_guard lock(state_->mutex);
  state_->flush_thread_caches_locked();  // the peaks then count no parked bytes
  statistics& st = state_->stats;
  st.peak_active_bytes = st.active_bytes;
  st.peak_requested_bytes = st.requested_bytes;
  st.peak_reserved_bytes = st.reserved_bytes;
}

void allocator::clear_cache() {
  state& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    s.flush_thread_caches_locked();
    if (s.vm) s.vm->note_emptying();
  }
  // As torch.cuda.empty_cache does, every cached byte goes back, also where the host
  // runs ahead of the device and the blocks freed so far wait on queued work: that
  // work completes first. What is safe goes back at once, the rest fence by fence as
  // the device gets there, so that the unmaps and releases run beside the device's
  // work rather than after it.
  s.refresh_fences();  // records a fence covering every free so far
  std::vector<fence> until;
  {
    std::lock_guard lock(s.mutex);
    until = s.fences.get_newest(std::nullopt);
  }
  std::optional<fence> waited;
  for (;;) {
    state::released_memory released;
    std::optional<fence> next;
    {
      std::lock_guard lock(s.mutex);
      s.merge_unmerged_locked();
      s.release_until(0, released);
      next = s.fences.find_next(until);
    }
    s.give_back(released);
    if (!next) break;
    // A fence still outstanding after its wait (a simulated device whose queue is held
    // behind another's work that never comes) would have it loop for ever: what it
    // guards stays cached.
    if (waited && waited->queue == next->queue && waited->value == next->value) break;
    s.device.wait(*next);
    waited = next;
    s.refresh_fences();
  }
  // Blocks other threads parked meanwhile, and blocks freed behind fences not yet
  // recorded: one more pass.
  {
    std::lock_guard lock(s.mutex);
    s.flush_thread_caches_locked();
  }
  s.refresh_fences();
  state::released_memory released;
  {
    std::lock_guard lock(s.mutex);
    s.release_until(0, released);
  }
  s.give_back(released);
}

std::size_t allocator::calculate_largest_free_block() const {
  std::lock_guard lock(state_->mutex);
  return std::max(state_->small.calculate_largest_free(), state_->large.calculate_largest_free());
}

loop_report allocator::get_loop_report() const {
  std::lock_guard lock(state_->mutex);
  loop_report out;
  if (!state_->vm) return out;
  const placement::loop_plan& plan = state_->vm->get_loop_plan();
  out.period = plan.get_period();
  out.load_bytes = plan.get_load();
  out.height_bytes = plan.get_planned_height();
  out.placed = plan.get_placed();
  out.plans = plan.get_plans();
  out.searches = plan.get_searches();
  out.declined = plan.get_declines();
  out.declined_load_bytes = plan.get_declined_load();
  out.declined_height_bytes = plan.get_declined_height();
  out.losses = plan.get_losses();
  out.missed = plan.get_missed();
  out.revivals = plan.get_revivals();
  return out;
}

std::vector<segment_view> allocator::calculate_segments() const {
  std::lock_guard lock(state_->mutex);
  // Blocks parked in thread caches are free to the program, so that the live blocks
  // shown add up to active_bytes; they stay parked (a view changes nothing).
  const caches_locked guard(state_->caches);
  std::unordered_set<const block*> parked;
  for (const thread_cache* cache : state_->caches)
    cache->for_each_parked([&](const block* b) { parked.insert(b); });
  std::vector<segment_view> views;
  for (const segment_pool* pool : {&state_->small, &state_->large}) {
    for (const segment* seg : pool->get_segments()) {
      segment_view v{seg->base, seg->size, pool->is_small(), {}};
      for (const block* b = seg->first; b; b = static_cast<const block*>(b->next_range)) {
        if (parked.contains(b))
          v.blocks.push_back({b->offset, b->size, 0, false});
        else
          v.blocks.push_back({b->offset, b->size, b->requested, b->live});
      }
      views.push_back(std::move(v));
    }
  }
  if (state_->vm) state_->vm->add_views(views, parked);
  std::sort(views.begin(), views.end(),
            [](const segment_view& a, const segment_view& b) { return a.base < b.base; });
  return views;
}

statistics allocator::state::recount_locked() const {
  // Caches stay locked through the walk: their threads write the blocks they park.
  const caches_locked guard(caches);
  return recount_locked_caches();
}

statistics allocator::state::recount_locked_caches() const {
  statistics counted = get_statistics_locked_unlocked_caches();
  std::size_t live_bytes = 0, free_bytes = 0, live_blocks = 0, requested = 0;
  small.validate(&live_bytes, &free_bytes, &live_blocks, &requested);
  large.validate(&live_bytes, &free_bytes, &live_blocks, &requested);
  std::size_t reserved = live_bytes + free_bytes;
  for (const segment* seg : small.get_segments()) {
    if (seg->arena_block) reserved -= seg->size;  // the arena counts its page
  }
  if (vm) reserved += vm->recount(&live_bytes, &live_blocks, &requested);
  std::size_t parked_bytes = 0, parked_blocks = 0;
  for (thread_cache* cache : caches) {
    parked_bytes += cache->get_parked_bytes();
    parked_blocks += cache->get_parked_count();
  }
  counted.active_bytes = live_bytes - parked_bytes - in_flight_bytes;
  counted.requested_bytes = requested;
  counted.reserved_bytes = reserved;
  counted.cached_bytes = reserved - counted.active_bytes;
  counted.live_blocks = live_blocks - parked_blocks - in_flight_blocks;
  counted.segments = small.get_segments().size() + large.get_segments().size();
  return counted;
}

void allocator::state::validate_locked() const {
  // One snapshot: the caches' threads must not move blocks between the two reads.
  const caches_locked guard(caches);
  const statistics counted = recount_locked_caches();
  const statistics totals = get_statistics_locked_unlocked_caches();
  auto check = [](bool ok, const char* what) {
    if (!ok) throw invariant_violation(std::string("[memkit::validate] ") + what);
  };
  check(counted.active_bytes == totals.active_bytes, "active_bytes differs from the blocks");
  check(counted.requested_bytes == totals.requested_bytes, "requested_bytes differs");
  check(counted.reserved_bytes == totals.reserved_bytes, "reserved_bytes differs from segments");
  check(counted.cached_bytes == totals.cached_bytes, "cached_bytes differs from free blocks");
  check(counted.live_blocks == totals.live_blocks, "live_blocks differs");
  check(counted.segments == totals.segments, "segment count differs");
  check(live.size() == stats.live_blocks, "the address map and the live blocks disagree");
  check(totals.peak_active_bytes >= totals.active_bytes, "peak active below active");
  // The shared counters count parked blocks as live, with their requests' bytes.
  check(stats.requested_bytes <= stats.active_bytes, "shared requested bytes above active bytes");
  check(totals.peak_requested_bytes <= totals.peak_active_bytes,
        "peak requested above peak active");
  check(totals.peak_reserved_bytes >= totals.reserved_bytes, "peak reserved below reserved");
  live.for_each([&](address_t address, const block* b) {
    check(b->live && b->owner->base + b->offset == address, "a live entry points at a wrong block");
  });
  for (const deferred_block& d : deferred) check(d.b->deferred, "a deferred block is not marked");
  if (vm) vm->validate(in_flight_blocks + in_flight_segments > 0);
}

statistics allocator::calculate_statistics() const {
  std::lock_guard lock(state_->mutex);
  state_->validate_locked();
  return state_->recount_locked();
}

void allocator::set_validation(bool on) {
  std::lock_guard lock(state_->mutex);
  state_->validating = on;
}

void allocator::validate() const {
  std::lock_guard lock(state_->mutex);
  state_->validate_locked();
}

backend& allocator::get_backend() const noexcept { return state_->device; }

}  // namespace memkit
