// libFuzzer target: sequences of allocator API calls decoded from the input, run on a
// sim device behind a fault injection adaptor, checked call by call against the
// reference model (tests/reliability/reference_model.hpp) with validation on.
//
// Input: byte 0 picks the setup (queues, policy, fence lag), byte 1 the device
// (granularity, capacity); then each call is one opcode byte followed by the bytes
// its arguments need.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <stdexcept>
#include <string>

#include "reliability/reference_model.hpp"

namespace {

using namespace memkit;
using namespace memkit::reliability;

class input {
 public:
  input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::uint32_t u24() {
    return byte() | (std::uint32_t{byte()} << 8) | (std::uint32_t{byte()} << 16);
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

constexpr std::size_t MiB = std::size_t{1} << 20;

// API calls made over the whole run, printed at exit for docs/RELIABILITY.md.
std::uint64_t total_calls = 0;
std::uint64_t total_inputs = 0;
void print_totals() {
  std::fprintf(stderr, "api_fuzz: %llu inputs, %llu checked API calls\n",
               static_cast<unsigned long long>(total_inputs),
               static_cast<unsigned long long>(total_calls));
}

// Devices as odd as a user may describe: pages from one byte to 2 MiB, a size that
// is not a power of two (refused, with a clear error), capacities up to 2^60. Small
// pages make validation walk many more of them: one setup in four has them.
constexpr std::size_t kGranularities[] = {2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB,
                                          2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB, 2 * MiB, 64 << 10,
                                          4096,    1,       512,     3 * MiB};
constexpr std::size_t kCapacities[] = {48 * MiB, std::size_t{1} << 30, std::size_t{1} << 60};

void run(input& in) {
  const std::uint8_t setup = in.byte();
  const std::uint8_t device_setup = in.byte();
  sim_options o;
  o.capacity = kCapacities[(device_setup >> 4) % std::size(kCapacities)];
  o.granularity = kGranularities[device_setup % std::size(kGranularities)];
  o.queue_count = 1 + setup % 3;
  if (o.granularity & (o.granularity - 1)) {
    try {
      sim_backend refused(o);
    } catch (const invalid_argument& e) {
      if (std::string(e.what()).find("is not a power of two") != std::string::npos) return;
    }
    throw std::logic_error("a granularity that is not a power of two was not refused clearly");
  }
  sim_backend device(o);
  fault_injection_options fo;
  fo.completion_lag = (setup >> 3) & 3;
  fo.random_lag = (setup >> 5) & 1;
  fault_injection_adaptor faults(device, fo);
  allocator_options ao;
  ao.policy = (setup >> 2) & 1 ? pool_policy::arena : pool_policy::segments;
  ao.validate = true;
  allocator alloc(faults, ao);
  api_driver d(device, faults, alloc);
  // MEMKIT_EXACT_PEAKS=1: check the peaks exactly (known bug: see reference_model.hpp).
  static const bool exact_peaks = std::getenv("MEMKIT_EXACT_PEAKS") != nullptr;
  d.exact_peaks = exact_peaks;
  const queue_id queues = o.queue_count;
  int calls = 0;
  while (!in.empty() && calls++ < 4096) {
    const std::uint8_t op = in.byte();
    auto nth_live = [&](std::uint8_t k) -> address_t {
      if (d.get_live().empty()) return 0;
      auto it = d.get_live().begin();
      std::advance(it, static_cast<long>(k % d.get_live().size()));
      return it->first;
    };
    switch (op % 16) {
      case 0:
      case 1:
      case 2:
      case 3: {  // small allocation
        const std::uint32_t v = in.u24();
        d.allocate(v % (MiB + 1), static_cast<queue_id>(in.byte() % queues));
        break;
      }
      case 4: {  // large allocation, sometimes too large
        const std::uint32_t v = in.u24();
        d.allocate(std::size_t{v} * 4, static_cast<queue_id>(in.byte() % (queues + 1)));
        break;
      }
      case 5:
      case 6:
      case 7:
        if (address_t a = nth_live(in.byte())) d.free(a);
        break;
      case 8: {
        const address_t a = nth_live(in.byte());
        d.record_use(a, static_cast<queue_id>(in.byte() % (queues + 1)));
        break;
      }
      case 9: {
        const address_t a = nth_live(in.byte());
        d.free_bad(a + 256 * (1 + in.byte() % 8));
        break;
      }
      case 10:
        d.submit(static_cast<queue_id>(in.byte() % queues));
        break;
      case 11: {
        const auto q = static_cast<queue_id>(in.byte() % queues);
        d.complete(q, in.byte() % 4);
        break;
      }
      case 12:
        d.set_memory_limit((2 + in.byte() % 24) * 2 * MiB);
        break;
      case 13:
        d.set_cache_limit((in.byte() % 16) * 2 * MiB);
        break;
      case 14: {
        const std::uint8_t k = in.byte();
        if (k & 1)
          d.clear_cache();
        else
          d.reset_peak();
        break;
      }
      case 15: {  // fail the next few backend calls
        const std::uint8_t k = in.byte();
        fault_schedule s;
        for (std::uint64_t c = 1; c <= std::uint64_t{1} + k % 3; ++c) s.calls.push_back(c);
        if (k & 8)
          faults.set_vm_schedule(s, vm_create_page);
        else
          faults.set_segment_schedule(s);
        break;
      }
    }
  }
  d.drain();
  total_calls += d.get_counts().operations;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool registered = std::atexit(print_totals) == 0;
  (void)registered;
  ++total_inputs;
  input in(data, size);
  try {
    run(in);
  } catch (const std::exception& e) {
    // Any escape is a finding: a broken invariant, a model mismatch, an unclear error.
    std::fprintf(stderr, "api_fuzz: %s\n", e.what());
    std::abort();
  }
  return 0;
}
