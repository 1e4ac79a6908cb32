// libFuzzer target: the trace readers (include/memkit/trace.hpp). The input is written
// to a temporary file and read back with trace::read (plain or gzip, any format);
// the text is also parsed in memory. A malformed trace must raise trace_error with a
// message naming the reader; a trace read must be self-consistent.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "memkit/trace.hpp"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "trace_fuzz: %s\n", what);
    std::abort();
  }
}

void check_trace(const memkit::trace::trace_data& t) {
  std::uint64_t allocations = 0;
  for (const memkit::trace::event& e : t.events) {
    if (e.kind == memkit::trace::action::allocate) {
      check(e.block == allocations, "allocation blocks are not dense and in order");
      check(e.stream < t.streams.size(), "a stream number beyond the stream list");
      ++allocations;
    } else {
      check(e.block < allocations, "a free of a block not yet allocated");
    }
  }
  check(allocations == t.allocations, "allocation count differs from the events");
  (void)memkit::trace::calculate_peak_live(t);
}

template <class F>
void expect_clear_errors(F&& read) {
  try {
    check_trace(read());
  } catch (const memkit::trace::trace_error& e) {
    check(std::string_view(e.what()).rfind("[memkit::trace", 0) == 0,
          "a trace_error whose message does not name the reader");
  }
  // Anything else escapes: libFuzzer reports it as a crash.
}

std::string temp_path() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/memkit_trace_fuzz_" + std::to_string(getpid()) +
         ".csv";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  expect_clear_errors([&] { return memkit::trace::parse(text, "fuzz.csv"); });
  static const std::string path = temp_path();
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, f);  // data may be null when size is 0
    std::fclose(f);
    expect_clear_errors([&] { return memkit::trace::read(path); });
    std::remove(path.c_str());
  }
  return 0;
}
