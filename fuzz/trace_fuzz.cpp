// libFuzzer target: the trace readers (include/memkit/trace.hpp). The input is written
// to a temporary file and read back with trace::read (plain or gzip, any format);
// the text is also parsed in memory. A malformed trace must raise trace_error with a
// message naming the reader; a trace read must be self-consistent.
#include <unistd.h>
#include <zlib.h>

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
  check(t.block_stacks.empty() || t.block_stacks.size() == t.allocations,
        "call stacks for some blocks only");
  for (const std::uint32_t stack : t.block_stacks) {
    check(stack <= t.stacks.size(), "a block's call stack beyond the stack list");
  }
  for (const auto& stack : t.stacks) check(!stack.empty(), "an empty call stack stored");
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

std::string gzip(const std::uint8_t* data, std::size_t size) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&z, static_cast<uLong>(size)) + 32, '\0');
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string frame_as_gzip(const std::uint8_t* data, std::size_t size, std::uint8_t how) {
  std::string framed = gzip(data, size);
  switch (how % 4) {
    case 1:  // truncated
      framed.resize(framed.size() * (how >> 2) / 64);
      break;
    case 2:  // stray bytes after the member
      framed += std::string(1 + how % 7, static_cast<char>(how));
      break;
    case 3:  // two members: the same text twice
      framed += gzip(data, size);
      break;
  }
  return framed;
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
    if (size > 1 && data[0] == 'Z') {
      // Gzip framing: the rest compressed, then cut or followed by stray bytes or
      // a second member, as byte 1 says.
      const std::string framed = frame_as_gzip(data + 2, size - 2, data[1]);
      std::fwrite(framed.data(), 1, framed.size(), f);
    } else if (size > 0) {
      std::fwrite(data, 1, size, f);  // data may be null when size is 0
    }
    std::fclose(f);
    expect_clear_errors([&] { return memkit::trace::read(path); });
    std::remove(path.c_str());
  }
  return 0;
}
