// Loop planning: numbers only, no backend.
//
// Training and inference loops ask for the same sequence of large blocks, with the
// same lifetimes, step after step. An online allocator places each step a little
// differently, so under virtual memory its pages keep moving. loop_plan learns the
// repetition from the requests alone, plans one repetition offline with the
// planner (every block gets a fixed offset in a region about as high as the
// repetition's peak of live bytes), and from then on tells the arena where each
// request of the loop goes. The steady state then touches the same pages every step
// and moves none.
//
//   learning   every request's size and the event times of its allocation and
//              free are kept (the last kMaxHistory requests). A window of the last
//              kWindow sizes seen before proposes a period P (the windows looked
//              up are chosen by their sizes, one in every kWinnow at least); it
//              is accepted when the last P sizes equal the P before them, most of
//              their blocks live as long as their twins, and one repetition, cut
//              where the fewest of its bytes are live, leaves at most kMaxCrossing
//              of its load crossing the cut. Learning that finds no loop in
//              kRestAfter requests rests for kRest requests (records nothing).
//   planned    blocks of one repetition that are freed within it get an offset:
//                no two planned blocks live at one moment overlap
//                LOAD <= height <= 1.01 LOAD (a higher plan is declined)
//              greedy places them; where it ends within 1.01 LOAD but not near
//              LOAD, the search that lowers the plan waits until the plan is used
//              (finish_plan): most plans never get a region, and a search holds the
//              allocator's lock for up to kSearchSeconds.
//              blocks crossing the cut, or living longer than a repetition, are
//              left to online placement (offset kNone).
//   following  request n of the loop is at position (n - start) mod P; a size other
//              than the plan's at that position loses the loop; the loop is found
//              again when a request matches position 0 of the plan. A planned block
//              found still holding its place when a later request needs it (it
//              outlived the lifetime it was planned for: the program changed, or
//              keeps a result longer after its warm-up) is unplanned: its position
//              is placed online from then on. Once the unplanned blocks pass
//              kMaxUnplanned of the plan's load (their places in the region lie
//              unused), the loop is learned afresh, from its lifetimes now. Learning goes
//              on for kMaxHistory requests after each loss: a longer loop found
//              around the plan, which the plan failed to follow within it (the
//              plan was one of its layers), replaces it; once lost, any other loop
//              does.
//   stored     a plan that needed its region (a loop of one shape among a few:
//              batch sizes or resolutions drawn per step, say) is kept when another
//              replaces it, up to kStoredPlans, least recently used out: once the
//              last kRevivalMatch requests are its first ones, it is brought back,
//              asks for its region at once and follows from there; or at once, by
//              its first request alone, where the plan followed until then lost a
//              repetition at its first request (the next step is another shape's:
//              none of its blocks is then placed online in the region first). A
//              plan is searched once for each period and LOAD, so shapes of one
//              period are each searched.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "memkit/planner.hpp"
#include "memkit/types.hpp"

namespace memkit::placement {

class loop_plan {
 public:
  static constexpr std::uint64_t kNone = ~std::uint64_t{0};
  static constexpr std::size_t kWindow = 16;  // sizes that propose a period
  // Windows looked up: of every kWinnow consecutive windows, the one of lowest hash
  // (winnowing; about 2 in kWinnow + 1 are looked up). The choice depends on the
  // sizes only, so a repetition's windows are chosen alike each time it comes, and
  // every stretch of kWinnow windows has one: no loop goes unseen.
  static constexpr std::size_t kWinnow = 16;
  static constexpr std::size_t kMinPeriod = 8;  // shorter repetitions are not planned
  static constexpr std::size_t kMaxHistory = std::size_t{1} << 17;  // requests remembered
  // Learning that found no loop in kRestAfter requests (requests of sizes that do not
  // repeat, say) rests for kRest requests, then learns afresh: recording and looking
  // up every request costs the arena's calls about a tenth of their time.
  static constexpr std::uint64_t kRestAfter = 2 * kMaxHistory;
  static constexpr std::uint64_t kRest = 8 * kMaxHistory;
  // Requests a plan must follow without a miss before its region is made: a
  // repetition inside the loop (equal layers) rarely lasts this long.
  static constexpr std::size_t kMinHeld = 1024;
  // ... or, for a period this long (a whole step rather than a layer), this many
  // repetitions.
  static constexpr std::size_t kLongPeriod = 128;
  static constexpr std::uint64_t kLongPeriodCycles = 3;
  static constexpr std::int64_t kGoodEnough = 200;    // greedy within LOAD / 200: no search
  static constexpr double kSearchSeconds = 0.05;      // otherwise search this long, once a period
  static constexpr std::size_t kMaxSearches = 64;     // periods searched at most
  static constexpr double kMaxHeightOverLoad = 1.01;  // a higher plan is not used ...
  static constexpr std::uint64_t kDeclinedRepetitions = 16;  // ... for this many repetitions
  static constexpr double kMaxCrossing = 0.25;   // of the repetition's load, live across its cut
  static constexpr double kMaxUnplanned = 0.01;  // of the plan's load, then it is learned again
  static constexpr std::uint64_t kMaxRelearnSearches = 4;  // relearns that may search again
  static constexpr std::size_t kStoredPlans = 8;           // plans kept for their loop's return
  static constexpr std::size_t kRevivalMatch = 4;  // its first requests bring a stored plan back

  enum class phase { learning, waiting, following, lost };

  // A request of `size` bytes (the arena's, rounded) on `queue`. Returns its serial,
  // which the caller passes to on_free; get_offset() then says where the plan puts it.
  std::uint64_t on_request(std::size_t size, queue_id queue = 0);
  void on_free(std::uint64_t serial);
  // Where the last request goes: an offset in the plan's region, or kNone (online).
  std::uint64_t get_offset() const { return offset_; }
  // The region the plan needs (bytes, 0 before a plan exists); made once by the
  // caller, which then calls set_region_ready().
  std::uint64_t get_region_bytes() const { return region_bytes_; }
  // The queue of the planned blocks: the one that carries most of the repetition's
  // bytes. Blocks of other queues are placed online, since a place one queue freed
  // is reusable on another only once that queue's work completed.
  queue_id get_plan_queue() const { return plan_queue_; }
  // Before the caller makes the region: completes the plan (the search put off at
  // planning runs now), so get_region_bytes() is the region's final size.
  void finish_plan();
  // The region exists: a plan waiting at its first position follows from this request.
  void set_region_ready();
  bool is_region_ready() const { return region_ready_; }
  // A planned request the caller could not place at its offset (still in use).
  void on_missed() { ++missed_; }
  // A planned request the caller placed at its offset.
  void on_placed() { ++placed_; }
  // The planned block of request `serial` was live where a later request was planned:
  // its position goes online from now on (a serial from before the loop was last
  // found, or of a request not planned, changes nothing).
  void unplan(std::uint64_t serial);

  phase get_phase() const { return phase_; }
  // The last request began a repetition of a learned loop (its cut).
  bool is_at_start() const {
    return (phase_ == phase::waiting || phase_ == phase::following) && position_ == 0;
  }
  std::size_t get_period() const { return sizes_.size(); }
  // The LOAD and height of the plan followed or waited for (0 without one).
  std::uint64_t get_load() const { return sizes_.empty() ? 0 : load_; }
  std::uint64_t get_planned_height() const { return sizes_.empty() ? 0 : planned_height_; }
  std::uint64_t get_missed() const { return missed_; }
  std::uint64_t get_losses() const { return losses_; }
  std::uint64_t get_checks() const { return checks_; }        // periods checked (try_plan calls)
  std::uint64_t get_unplanned() const { return unplanned_; }  // positions unplanned
  std::uint64_t get_revivals() const { return revivals_; }    // stored plans brought back
  std::uint64_t get_plans() const { return plans_; }          // plans made (not brought back)
  std::uint64_t get_searches() const { return searches_; }    // plans searched
  std::uint64_t get_placed() const { return placed_; }        // requests placed as planned
  std::uint64_t get_declines() const { return declines_; }    // plans too high to use
  // Of the plans declined, the lowest over its LOAD: its LOAD and height (0 before any).
  std::uint64_t get_declined_load() const { return declined_load_; }
  std::uint64_t get_declined_height() const { return declined_height_; }
  // The plan was stored and brought back: it needed its region before, so the
  // region is made as soon as it is asked for, not at the cut.
  bool is_revived() const { return revived_; }
  // The height of the highest plan, current or stored.
  std::uint64_t calculate_highest_plan() const {
    std::uint64_t highest = sizes_.empty() ? 0 : planned_height_;
    for (const stored_plan& p : stored_) highest = std::max(highest, p.height);
    return highest;
  }
  // The last request found learning at rest (see kRestAfter).
  bool is_resting() const {
    return phase_ == phase::learning && resting_until_ > 0 && next_serial_ <= resting_until_;
  }

 private:
  struct request {
    std::uint64_t size;
    std::uint64_t allocated;  // event time
    std::uint64_t freed;      // event time; kNone while live
    queue_id queue;
  };
  // Requests in arrival order, at most kSlots (the caller forgets the older half
  // once it holds that many), in a ring of chunks made as needed: forgetting moves
  // the head only, and growing copies nothing (a vector moved ~3 MB at each).
  class request_ring {
   public:
    static constexpr std::size_t kSlots = 2 * kMaxHistory;
    std::size_t size() const { return size_; }
    request& operator[](std::size_t k) {
      const std::size_t slot = (head_ + k) % kSlots;
      return chunks_[slot / kChunk][slot % kChunk];
    }
    const request& operator[](std::size_t k) const {
      const std::size_t slot = (head_ + k) % kSlots;
      return chunks_[slot / kChunk][slot % kChunk];
    }
    void push_back(const request& r) {
      const std::size_t slot = (head_ + size_) % kSlots;
      std::unique_ptr<request[]>& chunk = chunks_[slot / kChunk];
      if (!chunk) chunk.reset(new request[kChunk]);
      chunk[slot % kChunk] = r;
      ++size_;
    }
    void drop_front(std::size_t count) {
      head_ = (head_ + count) % kSlots;
      size_ -= count;
    }
    void clear() { head_ = size_ = 0; }  // keeps the chunks
    void release() {
      clear();
      for (auto& chunk : chunks_) chunk.reset();
    }

   private:
    static constexpr std::size_t kChunk = 4096;  // requests a chunk
    static_assert(kSlots % kChunk == 0);
    std::array<std::unique_ptr<request[]>, kSlots / kChunk> chunks_;
    std::size_t head_ = 0;  // slot of the oldest request
    std::size_t size_ = 0;
  };
  // Window hash -> serial of the window last looked up with it: open addressing
  // with linear probing, at most half full (a node-based map allocated a node for
  // nearly every window and chased pointers on each lookup).
  class window_table {
   public:
    // The serial kept for `hash`; when there is none, `serial` is inserted and
    // *fresh set. The reference holds until the next call or clear.
    std::uint64_t& find_or_insert(std::uint64_t hash, std::uint64_t serial, bool* fresh);
    void clear();

   private:
    struct slot {
      std::uint64_t hash = 0;
      std::uint64_t serial = kNone;  // kNone: empty
    };
    void grow();
    static constexpr std::size_t kInitialSlots = 1024;
    std::vector<slot> slots_ = std::vector<slot>(kInitialSlots);  // a power of two
    std::size_t count_ = 0;
  };
  void learn(std::uint64_t serial);
  void lose(std::uint64_t serial, std::size_t size, queue_id queue);
  void follow();  // the plan matched the last request: its offset, its region
  // Whether requests are kept for learning: always while learning, and under a plan
  // for kMaxHistory requests after it was lost.
  bool is_recording(std::uint64_t serial) const {
    return (phase_ == phase::learning && serial >= resting_until_) || serial < record_until_;
  }

  // Back to learning from this request, for periods of at least min_period.
  void restart(std::uint64_t serial, std::size_t size, queue_id queue, std::size_t min_period);
  bool try_plan(std::uint64_t serial, std::size_t period);
  // Whether a plan of this period and LOAD may still be searched (once each, so that
  // shapes of one period, a clip length drawn per step say, are each searched;
  // kMaxSearches in all).
  bool may_search(std::size_t period, std::uint64_t load) const;
  // Lowers `plan` by a search of kSearchSeconds where it finds a lower one, and notes
  // the period and LOAD searched; returns the plan's height.
  std::int64_t search(std::size_t period, std::uint64_t load, const planner::instance& inst,
                      planner::plan& plan);
  void drop_deferred_search() {
    deferred_search_.buffers.clear();
    deferred_positions_.clear();
  }
  // A plan learned before, kept for when its loop comes back (see "stored").
  struct stored_plan {
    std::vector<std::uint64_t> sizes;
    std::vector<queue_id> queues;
    std::vector<std::uint64_t> offsets;
    std::uint64_t height = 0;
    std::uint64_t load = 0;
    queue_id queue = 0;
  };
  // Keeps the current plan if it asked for its region (it held, and pages moved).
  void store_current();
  // A stored plan whose first `first_requests` requests were the last ones becomes the
  // current one, waiting for its region; false when none is.
  bool revive(std::uint64_t serial, std::size_t first_requests = kRevivalMatch);
  const request& at(std::uint64_t serial) const { return history_[serial - first_serial_]; }

  // What every request and free reads, together (the calls find them cold: each
  // cache line is a fetch).
  std::uint64_t next_serial_ = 0;     // serial of the next request
  std::uint64_t time_ = 0;            // requests and frees so far
  std::uint64_t first_serial_ = 0;    // serial of history_[0]
  std::uint64_t record_until_ = 0;    // under a plan, requests before it are kept
  std::uint64_t resting_until_ = 0;   // learning rests before this serial
  std::uint64_t learning_since_ = 0;  // serial from which learning found no loop yet
  std::size_t position_ = 0;          // position of the last request
  std::uint64_t offset_ = kNone;      // where the last request goes
  std::uint64_t region_bytes_ = 0;    // the region asked for: the height, once the plan held
  std::uint64_t cycles_ = 0;          // repetitions started since the plan was made
  phase phase_ = phase::learning;
  bool region_ready_ = false;
  bool relearn_ = false;                // too many unplanned: learn again at the next request
  std::vector<std::uint64_t> sizes_;    // the plan, per position of the loop: its size
  std::vector<queue_id> queues_;        // ... the request's queue
  std::vector<std::uint64_t> offsets_;  // ... offset in the region, or kNone

  // Learning.
  request_ring history_;              // requests first_serial_ .. next_serial_ - 1
  window_table windows_;              // window hash -> last serial
  std::uint64_t window_hash_ = 0;     // polynomial hash of the kWindow sizes ...
  std::uint64_t window_end_ = kNone;  // ... up to this serial (kNone: none yet)
  struct window {
    std::uint64_t hash = 0;  // mixed
    std::uint64_t serial = kNone;
  };
  // Of the last kWinnow windows, those no later one has a hash as low as: oldest
  // first (the lowest), in a ring.
  std::array<window, kWinnow> lowest_{};
  std::size_t lowest_head_ = 0;
  std::size_t lowest_count_ = 0;
  const window& lowest_back() const {
    return lowest_[(lowest_head_ + lowest_count_ - 1) % kWinnow];
  }
  std::uint64_t run_start_ = 0;           // serial of the first window of this run
  std::uint64_t chosen_ = kNone;          // serial of the window looked up last ...
  std::uint64_t chosen_hash_ = 0;         // ... its hash ...
  std::uint64_t* chosen_slot_ = nullptr;  // ... and its entry in windows_ (null after a clear)
  void forget_windows() {
    windows_.clear();
    chosen_slot_ = nullptr;
  }
  std::uint64_t next_check_ = 0;     // last_rejected_ is not checked before this serial
  std::uint64_t last_rejected_ = 0;  // the last period that failed ...
  std::uint32_t rejections_ = 0;     // ... times in a row (backoff: 2^this)
  static constexpr std::uint32_t kMaxBackoff = 10;
  std::size_t min_period_ = kMinPeriod;  // shorter periods are not looked for
  std::uint64_t declined_ = 0;           // a period whose plan was too high ...
  std::uint64_t declined_until_ = 0;     // ... not tried again before this serial
  std::vector<std::pair<std::size_t, std::uint64_t>> searched_;  // (period, LOAD) searched
  // The plan.
  queue_id plan_queue_ = 0;          // see get_plan_queue
  std::vector<stored_plan> stored_;  // least recently used first
  bool revived_ = false;             // see is_revived
  std::uint64_t revivals_ = 0;
  planner::instance deferred_search_;            // the plan's buffers, while its search waits
  std::vector<std::size_t> deferred_positions_;  // ... and each one's position
  std::uint64_t planned_height_ = 0;             // height of the plan
  std::uint64_t lost_at_ = 0;                    // serial of the request that lost the loop
  std::uint64_t load_ = 0;                       // LOAD of the planned blocks
  std::uint64_t missed_ = 0;                     // planned requests placed online
  std::uint64_t losses_ = 0;                     // times the loop was lost
  std::uint64_t checks_ = 0;                     // periods checked
  std::uint64_t plans_ = 0;                      // plans made
  std::uint64_t searches_ = 0;                   // searches run
  std::uint64_t declines_ = 0;                   // plans declined as too high ...
  std::uint64_t declined_load_ = 0;              // ... the lowest over its LOAD: its LOAD
  std::uint64_t declined_height_ = 0;            // ... and height
  std::uint64_t placed_ = 0;                     // planned requests placed at their offsets
  std::uint64_t unplanned_ = 0;                  // positions unplanned
  std::uint64_t unplanned_bytes_ = 0;            // their sizes, under this plan
  std::uint64_t relearns_ = 0;                   // times relearn_ was set
  // A request known to be at a position: every later one is at the next, until a loss.
  std::uint64_t synced_serial_ = kNone;  // kNone: no plan followed since the last loss
  std::size_t synced_position_ = 0;      // the position of synced_serial_
};

}  // namespace memkit::placement
