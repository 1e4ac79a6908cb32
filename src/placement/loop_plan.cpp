#include "placement/loop_plan.hpp"

#include <algorithm>
#include <utility>

#include "memkit/planner.hpp"

namespace memkit::placement {

std::uint64_t loop_plan::on_request(std::size_t size, queue_id queue) {
  const std::uint64_t serial = next_serial_++;
  ++time_;
  offset_ = kNone;
  if (phase_ == phase::learning) {
    if (serial < resting_until_) return serial;
    if (serial == resting_until_ && serial > 0) {
      // The rest is over: learn afresh from this request.
      first_serial_ = serial;
      learning_since_ = serial;
    } else if (serial - learning_since_ >= kRestAfter) {
      resting_until_ = serial + kRest;
      history_.release();
      forget_windows();
      return serial;
    }
  }
  const bool recording = is_recording(serial);
  if (recording) history_.push_back({size, time_, kNone, queue});
  switch (phase_) {
    case phase::learning:
      revive(serial);
      break;
    case phase::waiting:
    case phase::following:
      if (relearn_) {  // blocks outlived the plan widely (see unplan)
        restart(serial, size, queue, 0);
        break;
      }
      position_ = position_ + 1 == sizes_.size() ? 0 : position_ + 1;
      if (sizes_[position_] != size || queues_[position_] != queue) {
        const bool at_start = position_ == 0;
        lose(serial, size, queue);
        // A repetition that begins unlike the loop's is another shape's (a clip
        // length drawn per step, say): its stored plan comes back at this first
        // request, before any of its blocks is placed online in the region.
        if (at_start) revive(serial, 1);
        break;
      }
      if (position_ == 0) ++cycles_;
      follow();
      break;
    case phase::lost:
      if (sizes_[0] != size || queues_[0] != queue) {
        if (revive(serial)) break;
        // Lost for long, and no loop found since: learn afresh, for as long as it takes.
        if (!is_recording(serial)) restart(serial, size, queue, 0);
        break;
      }
      position_ = 0;  // a request like the loop's first: follow it again from there
      synced_serial_ = serial;
      synced_position_ = 0;
      phase_ = phase::waiting;
      follow();
      break;
  }
  if (is_recording(serial)) {
    learn(serial);
    if (history_.size() >= 2 * kMaxHistory) {
      // Forget the older half; a period longer than what is left is not planned.
      history_.drop_front(kMaxHistory);
      first_serial_ += kMaxHistory;
      forget_windows();
    }
  } else if (recording) {
    // Recording ended (a plan was made, or it held for long since its last loss).
    history_.release();
    forget_windows();
  }
  return serial;
}

bool loop_plan::may_search(std::size_t period, std::uint64_t load) const {
  return searched_.size() < kMaxSearches &&
         std::find(searched_.begin(), searched_.end(), std::pair{period, load}) == searched_.end();
}

std::int64_t loop_plan::search(std::size_t period, std::uint64_t load,
                               const planner::instance& inst, planner::plan& plan) {
  searched_.push_back({period, load});
  ++searches_;
  planner::options options;
  options.time_limit_seconds = kSearchSeconds;
  planner::result searched = planner::solve(inst, options);
  const std::int64_t height = planner::height(inst, plan);
  if (searched.height_bytes >= height) return height;
  plan = std::move(searched.best);
  return searched.height_bytes;
}

void loop_plan::finish_plan() {
  if (deferred_positions_.empty()) return;
  planner::instance inst;
  std::vector<std::size_t> positions;
  inst.buffers.reserve(deferred_positions_.size());
  for (std::size_t b = 0; b < deferred_positions_.size(); ++b) {
    // A position unplanned since (its block outlived the plan) stays online.
    if (offsets_[deferred_positions_[b]] == kNone) continue;
    inst.buffers.push_back(deferred_search_.buffers[b]);
    positions.push_back(deferred_positions_[b]);
  }
  drop_deferred_search();
  if (!may_search(sizes_.size(), load_)) return;
  // The plan as greedy left it, replaced where the search finds a lower one.
  planner::plan plan;
  for (const std::size_t p : positions)
    plan.offsets.push_back(static_cast<std::int64_t>(offsets_[p]));
  planned_height_ = static_cast<std::uint64_t>(search(sizes_.size(), load_, inst, plan));
  for (std::size_t b = 0; b < positions.size(); ++b)
    offsets_[positions[b]] = static_cast<std::uint64_t>(plan.offsets[b]);
  if (region_bytes_ > 0) region_bytes_ = planned_height_;
}

void loop_plan::set_region_ready() {
  region_ready_ = true;
  // A plan brought back follows at once, from where it is in its repetition (the
  // region is fresh: every planned place is free).
  if (revived_ && phase_ == phase::waiting) {
    phase_ = phase::following;
    offset_ = offsets_[position_];
  }
}

void loop_plan::store_current() {
  // A plan that asked for its region (a revived one asks at once); not one whose
  // blocks outlived it widely.
  drop_deferred_search();  // a stored plan keeps the offsets it has
  if (region_bytes_ == 0 || relearn_) return;
  if (stored_.size() == kStoredPlans) stored_.erase(stored_.begin());
  stored_.push_back({std::move(sizes_), std::move(queues_), std::move(offsets_), planned_height_,
                     load_, plan_queue_});
  region_bytes_ = 0;
}

bool loop_plan::revive(std::uint64_t serial, std::size_t first_requests) {
  if (stored_.empty() || !is_recording(serial)) return false;
  const std::size_t n = history_.size();
  for (auto it = stored_.rbegin(); it != stored_.rend(); ++it) {
    // The last k requests are the plan's first k.
    const std::size_t k = std::min(first_requests, it->sizes.size());
    bool match = n >= k;
    for (std::size_t j = 0; j < k && match; ++j) {
      const request& r = history_[n - k + j];
      match = r.size == it->sizes[j] && r.queue == it->queues[j];
    }
    if (!match) continue;
    stored_plan revived = std::move(*it);
    stored_.erase(std::next(it).base());
    store_current();
    sizes_ = std::move(revived.sizes);
    queues_ = std::move(revived.queues);
    offsets_ = std::move(revived.offsets);
    planned_height_ = revived.height;
    load_ = revived.load;
    plan_queue_ = revived.queue;
    region_bytes_ = planned_height_;  // it held before: its region at once
    region_ready_ = false;
    revived_ = true;
    ++revivals_;
    cycles_ = 0;
    unplanned_bytes_ = 0;
    relearn_ = false;
    declined_ = 0;
    position_ = k - 1;
    synced_serial_ = serial;
    synced_position_ = position_;
    record_until_ = 0;
    phase_ = phase::waiting;
    follow();
    return true;
  }
  return false;
}

void loop_plan::follow() {
  // The region is asked for once the plan held for a whole repetition, and
  // followed from a repetition's start once it exists.
  if (region_bytes_ == 0 && cycles_ >= 2 &&
      ((cycles_ - 1) * sizes_.size() >= kMinHeld ||
       (sizes_.size() >= kLongPeriod && cycles_ >= kLongPeriodCycles)))
    region_bytes_ = planned_height_;
  if (phase_ == phase::waiting && position_ == 0 && region_ready_) phase_ = phase::following;
  if (phase_ == phase::following) offset_ = offsets_[position_];
}

void loop_plan::lose(std::uint64_t serial, std::size_t size, queue_id queue) {
  ++losses_;
  synced_serial_ = kNone;
  // A plan lost before its region was asked for was a repetition inside the loop
  // (a stack of equal layers, say): learn again, looking for a longer one.
  if (region_bytes_ == 0) {
    restart(serial, size, queue, sizes_.size() + 1);
    return;
  }
  phase_ = phase::lost;
  if (!is_recording(serial)) {
    // Look for a longer loop around this one from here on (see is_recording).
    history_.clear();
    history_.push_back({size, time_, kNone, queue});
    first_serial_ = serial;
    forget_windows();
  }
  record_until_ = serial + kMaxHistory;
  lost_at_ = serial;
}

void loop_plan::unplan(std::uint64_t serial) {
  if (synced_serial_ == kNone || serial < synced_serial_ || sizes_.empty()) return;
  const std::size_t position = (synced_position_ + (serial - synced_serial_)) % sizes_.size();
  if (offsets_[position] == kNone) return;
  offsets_[position] = kNone;
  ++unplanned_;
  unplanned_bytes_ += sizes_[position];
  if (static_cast<double>(unplanned_bytes_) <= kMaxUnplanned * static_cast<double>(load_)) return;
  relearn_ = true;
  // The new lifetimes may need the search the old ones did not (a few times at most:
  // each search holds the allocator's lock).
  if (relearns_++ < kMaxRelearnSearches) {
    std::erase(searched_, std::pair{sizes_.size(), load_});
  }
}

void loop_plan::restart(std::uint64_t serial, std::size_t size, queue_id queue,
                        std::size_t min_period) {
  store_current();
  min_period_ = std::max(min_period, kMinPeriod);
  learning_since_ = serial;
  revived_ = false;
  synced_serial_ = kNone;
  unplanned_bytes_ = 0;
  relearn_ = false;
  declined_ = 0;
  sizes_.clear();
  offsets_.clear();
  queues_.clear();
  region_bytes_ = 0;
  region_ready_ = false;
  cycles_ = 0;
  if (!is_recording(serial)) {
    history_.clear();
    history_.push_back({size, time_, kNone, queue});
    forget_windows();
    first_serial_ = serial;
  }
  phase_ = phase::learning;
}

void loop_plan::on_free(std::uint64_t serial) {
  ++time_;
  if (serial < first_serial_ || serial - first_serial_ >= history_.size()) return;
  history_[serial - first_serial_].freed = time_;
}

std::uint64_t& loop_plan::window_table::find_or_insert(std::uint64_t hash, std::uint64_t serial,
                                                       bool* fresh) {
  if (2 * (count_ + 1) > slots_.size()) grow();
  // The hashes are mixed already: their low bits index.
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = hash & mask;
  while (slots_[i].serial != kNone && slots_[i].hash != hash) i = (i + 1) & mask;
  *fresh = slots_[i].serial == kNone;
  if (*fresh) {
    slots_[i] = {hash, serial};
    ++count_;
  }
  return slots_[i].serial;
}

void loop_plan::window_table::grow() {
  const std::vector<slot> previous = std::exchange(slots_, std::vector<slot>(2 * slots_.size()));
  const std::size_t mask = slots_.size() - 1;
  for (const slot& s : previous) {
    if (s.serial == kNone) continue;
    std::size_t i = s.hash & mask;
    while (slots_[i].serial != kNone) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void loop_plan::window_table::clear() {
  if (count_ == 0) return;
  // Back to the first size: a clear after a short learning stays cheap.
  slots_ = std::vector<slot>(kInitialSlots);
  count_ = 0;
}

namespace {
constexpr std::uint64_t kHashBase = 0x9e3779b97f4a7c15ull;  // odd

constexpr std::uint64_t power(std::uint64_t base, std::size_t exponent) {
  std::uint64_t p = 1;
  for (std::size_t k = 0; k < exponent; ++k) p *= base;
  return p;
}

std::uint64_t mix(std::uint64_t h) {
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}
}  // namespace

void loop_plan::learn(std::uint64_t serial) {
  const std::size_t n = history_.size();
  if (n < kWindow) return;
  const bool same_run = window_end_ + 1 == serial;  // the last request was learned too
  window_end_ = serial;
  // The window's hash rolls from the last one's (sum of size_k * base^(kWindow-1-k)).
  if (same_run && n > kWindow) {
    constexpr std::uint64_t kOut = power(kHashBase, kWindow);
    window_hash_ =
        window_hash_ * kHashBase + history_[n - 1].size - history_[n - 1 - kWindow].size * kOut;
  } else {
    window_hash_ = 0;
    for (std::size_t k = n - kWindow; k < n; ++k)
      window_hash_ = window_hash_ * kHashBase + history_[k].size;
  }
  if (!same_run) {
    lowest_count_ = 0;
    run_start_ = serial;
  }
  // Most windows are not looked up (each lookup is a likely cache miss): only the
  // lowest hash of the last kWinnow windows (the latest of equals), once. The
  // candidates for it, oldest first, with rising hashes: a monotonic queue.
  const window fresh_window{mix(window_hash_), serial};
  while (lowest_count_ > 0 && lowest_back().hash >= fresh_window.hash) --lowest_count_;
  lowest_[(lowest_head_ + lowest_count_++) % kWinnow] = fresh_window;
  while (lowest_[lowest_head_].serial + kWinnow <= serial) {
    lowest_head_ = (lowest_head_ + 1) % kWinnow;
    --lowest_count_;
  }
  if (serial - run_start_ + 1 < kWinnow) return;  // fewer than kWinnow windows yet
  const window* lowest = &lowest_[lowest_head_];
  if (lowest->serial == chosen_) return;
  chosen_ = lowest->serial;
  std::uint64_t previous;
  if (chosen_slot_ && lowest->hash == chosen_hash_) {
    // The same window again (a run of equal sizes chooses each new one): no lookup.
    previous = *chosen_slot_;
    *chosen_slot_ = lowest->serial;
  } else {
    bool fresh = false;
    std::uint64_t& slot = windows_.find_or_insert(lowest->hash, lowest->serial, &fresh);
    chosen_hash_ = lowest->hash;
    chosen_slot_ = &slot;  // no other window is inserted before it is used (or cleared)
    if (fresh) return;
    previous = slot;
    slot = lowest->serial;
  }
  const std::uint64_t period = lowest->serial - previous;
  // Under a plan, only a longer loop around it; once it is lost, any other loop (its
  // own is found again by its first request, before two copies of it are seen).
  const std::size_t min_period = phase_ == phase::learning || phase_ == phase::lost
                                     ? min_period_
                                     : std::max(min_period_, sizes_.size() + 1);
  if (period < min_period || 2 * period > serial + 1 - first_serial_) return;
  // A period that failed is tried again only after an eighth of it (twice that each
  // time it fails again); one whose plan was too high, after kDeclinedRepetitions
  // (lifetimes may settle by then).
  if (period == declined_ && serial < declined_until_) return;
  if (serial < next_check_ && period == last_rejected_) return;
  if (try_plan(serial, static_cast<std::size_t>(period))) return;
  // Each check costs O(period log period): a period rejected again and again (sizes
  // that repeat, lifetimes that do not) is checked ever more rarely.
  rejections_ = period == last_rejected_ ? std::min(rejections_ + 1, kMaxBackoff) : 0;
  last_rejected_ = period;
  next_check_ = serial + (std::max<std::uint64_t>(period / 8, 1) << rejections_);
}

bool loop_plan::try_plan(std::uint64_t last, std::size_t period) {
  ++checks_;
  // Two copies of the repetition: A = [first, first + period), B right after it.
  const std::uint64_t first = last + 1 - 2 * period;
  // Under a plan, only by a loop around it that it failed to follow; once lost, by
  // any loop (the lost plan is stored, if it needed a region).
  if ((phase_ == phase::waiting || phase_ == phase::following) && lost_at_ < first) return false;
  // Sizes that repeat while lifetimes do not (requests of a fixed list of sizes freed
  // at random) make no loop: most blocks of copy A must live as long as their twins
  // in copy B (those B still holds are not compared). Cheap, before the sort below.
  std::size_t compared = 0, differing = 0;
  for (std::size_t k = 0; k < period; ++k) {
    const request& a = at(first + k);
    const request& b = at(first + period + k);
    if (a.size != b.size || a.queue != b.queue) return false;
    if (b.freed == kNone) continue;
    ++compared;
    differing += a.freed == kNone || a.freed - a.allocated != b.freed - b.allocated;
  }
  if (2 * differing > compared) return false;
  // Copy A, with times relative to its first request; `span` is one repetition.
  const std::uint64_t start = at(first).allocated;
  const std::uint64_t span = at(first + period).allocated - start;
  std::vector<std::uint64_t> begin(period), life(period);
  std::int64_t long_lived = 0;  // bytes of blocks that outlive a repetition
  for (std::size_t k = 0; k < period; ++k) {
    const request& r = at(first + k);
    begin[k] = r.allocated - start;
    life[k] = r.freed == kNone || r.freed - r.allocated >= span ? kNone : r.freed - r.allocated;
    if (life[k] == kNone) long_lived += static_cast<std::int64_t>(r.size);
  }
  // Bytes live at each request's moment, the repetition seen as a circle: the cut
  // goes where they are fewest (blocks live across it are left to online placement).
  std::vector<std::pair<std::uint64_t, std::int64_t>> changes;  // (time, +size / -size)
  std::int64_t live = 0;  // at time 0: the blocks of the repetition before still live
  for (std::size_t k = 0; k < period; ++k) {
    if (life[k] == kNone) continue;
    const auto bytes = static_cast<std::int64_t>(at(first + k).size);
    const std::uint64_t end = begin[k] + life[k];
    changes.push_back({begin[k], bytes});
    if (end <= span) {
      changes.push_back({end, -bytes});
    } else {
      changes.push_back({span, -bytes});
      live += bytes;
      changes.push_back({end - span, -bytes});
    }
  }
  std::sort(changes.begin(), changes.end());  // at equal times, ends before starts
  std::uint64_t best_cut = 0;
  std::int64_t best_crossing = -1;
  std::size_t next_change = 0;
  // begin[] is increasing: the requests' moments in order.
  for (std::size_t k = 0; k < period; ++k) {
    while (next_change < changes.size() && changes[next_change].first < begin[k]) {
      live += changes[next_change++].second;
    }
    // Live just before request k: changes at this very moment are ends only
    // (a start at begin[k] is request k's own).
    std::int64_t crossing = live;
    for (std::size_t c = next_change; c < changes.size() && changes[c].first == begin[k]; ++c) {
      if (changes[c].second < 0) crossing += changes[c].second;
    }
    if (best_crossing < 0 || crossing < best_crossing) {
      best_crossing = crossing;
      best_cut = k;
    }
  }
  // The queue whose blocks are planned: the one with the most bytes.
  std::vector<std::pair<queue_id, std::uint64_t>> queue_bytes;
  for (std::size_t k = 0; k < period; ++k) {
    const request& r = at(first + k);
    auto it = std::find_if(queue_bytes.begin(), queue_bytes.end(),
                           [&](const auto& q) { return q.first == r.queue; });
    if (it == queue_bytes.end()) it = queue_bytes.insert(queue_bytes.end(), {r.queue, 0});
    it->second += r.size;
  }
  const queue_id plan_queue =
      std::max_element(queue_bytes.begin(), queue_bytes.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  // The planned blocks: lifetimes within one repetition starting at the cut.
  planner::instance inst;
  std::vector<std::size_t> planned_at;  // position of each buffer of inst
  for (std::size_t p = 0; p < period; ++p) {
    const std::size_t k = (best_cut + p) % period;
    if (life[k] == kNone) continue;
    const std::uint64_t lower = (begin[k] + span - begin[best_cut]) % span;
    if (lower + life[k] > span) continue;  // crosses the cut
    if (at(first + k).queue != plan_queue) continue;
    inst.buffers.push_back({static_cast<std::int64_t>(p), static_cast<std::int64_t>(lower),
                            static_cast<std::int64_t>(lower + life[k]),
                            static_cast<std::int64_t>(at(first + k).size)});
    planned_at.push_back(p);
  }
  if (inst.buffers.size() < kMinPeriod) return false;
  const std::int64_t load = planner::load(inst);
  // A repetition inside the loop (one layer of many, say) leaves much live across
  // any cut: what it allocates outlives it.
  if (static_cast<double>(best_crossing + long_lived) > kMaxCrossing * static_cast<double>(load))
    return false;
  planner::plan plan = planner::greedy_best_fit(inst);
  std::int64_t height = planner::height(inst, plan);
  // A plan much above LOAD would hold more memory than online placement does.
  auto too_high = [&] {
    return static_cast<double>(height) > kMaxHeightOverLoad * static_cast<double>(load);
  };
  // Greedy is far from LOAD (blocks of staggered lifetimes, a growing cache): a
  // search, brief and once per period, as it runs under the allocator's lock; now
  // when it decides whether the plan is used, else once the plan is (finish_plan).
  const bool worth_search =
      height > load + load / kGoodEnough && may_search(period, static_cast<std::uint64_t>(load));
  const bool search_later = worth_search && !too_high();
  if (worth_search && too_high())
    height = search(period, static_cast<std::uint64_t>(load), inst, plan);

  if (too_high()) {
    declined_ = period;
    declined_until_ = last + kDeclinedRepetitions * period;
    ++declines_;
    // The one nearest to being used: the lowest height over LOAD declined so far.
    const double over = static_cast<double>(height) / static_cast<double>(load);
    if (declined_load_ == 0 ||
        over < static_cast<double>(declined_height_) / static_cast<double>(declined_load_)) {
      declined_load_ = static_cast<std::uint64_t>(load);
      declined_height_ = static_cast<std::uint64_t>(height);
    }
    return false;
  }
  if (phase_ != phase::learning) store_current();
  ++plans_;
  revived_ = false;
  sizes_.assign(period, 0);
  offsets_.assign(period, kNone);
  queues_.assign(period, 0);
  for (std::size_t p = 0; p < period; ++p) {
    sizes_[p] = at(first + (best_cut + p) % period).size;
    queues_[p] = at(first + (best_cut + p) % period).queue;
  }
  plan_queue_ = plan_queue;
  for (std::size_t b = 0; b < planned_at.size(); ++b) {
    offsets_[planned_at[b]] = static_cast<std::uint64_t>(plan.offsets[b]);
  }
  planned_height_ = static_cast<std::uint64_t>(height);
  drop_deferred_search();
  if (search_later) {
    deferred_search_ = std::move(inst);
    deferred_positions_ = std::move(planned_at);
  }
  region_bytes_ = 0;
  region_ready_ = false;
  cycles_ = 0;
  load_ = static_cast<std::uint64_t>(load);
  // The last request was copy B's last, at position period - 1 - best_cut.
  position_ = period - 1 - best_cut;
  synced_serial_ = last;
  synced_position_ = position_;
  unplanned_bytes_ = 0;
  offset_ = kNone;
  record_until_ = 0;  // until the plan is lost (see is_recording)
  phase_ = phase::waiting;
  return true;
}

}  // namespace memkit::placement
