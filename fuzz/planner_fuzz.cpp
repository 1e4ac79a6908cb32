// libFuzzer target: the planner's instance reader (include/memkit/planner.hpp). The
// input is parsed from memory and read from a temporary file. A malformed instance
// must raise planner_error naming the reader; an accepted one must satisfy what the
// reader promises, and a greedy plan of it must validate.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "memkit/planner.hpp"
#include "memkit/trace.hpp"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "planner_fuzz: %s\n", what);
    std::abort();
  }
}

void check_instance(const memkit::planner::instance& inst) {
  std::set<std::int64_t> ids;
  for (const memkit::planner::buffer& b : inst.buffers) {
    check(b.lower < b.upper, "an empty lifetime was accepted");
    check(b.size > 0, "a size <= 0 was accepted");
    check(b.lower >= 0, "a negative time was accepted");
    check(ids.insert(b.id).second, "a duplicate id was accepted");
  }
  if (inst.buffers.size() <= 256) {
    const memkit::planner::plan p = memkit::planner::greedy_best_fit(inst);
    check(static_cast<bool>(memkit::planner::validate(inst, p)), "the greedy plan is invalid");
    check(memkit::planner::height(inst, p) >= memkit::planner::load(inst), "height below LOAD");
  }
  // The whole solve, with no time (every pass cut short) or a little: a valid plan.
  if (inst.buffers.size() <= 4096) {
    for (const double seconds : {0.0, 0.002}) {
      memkit::planner::options opts;
      opts.time_limit_seconds = seconds;
      const memkit::planner::result r = memkit::planner::solve(inst, opts);
      check(static_cast<bool>(memkit::planner::validate(inst, r.best)), "solve's plan is invalid");
      check(r.height_bytes == memkit::planner::height(inst, r.best), "solve misstates the height");
      check(r.height_bytes >= r.load_bytes, "solve's height below LOAD");
    }
  }
}

template <class F>
void expect_clear_errors(F&& read) {
  try {
    check_instance(read());
  } catch (const memkit::planner::planner_error& e) {
    check(std::string_view(e.what()).rfind("[memkit::planner::", 0) == 0,
          "a planner_error whose message does not name the reader");
  }
}

std::string temp_path() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/memkit_planner_fuzz_" + std::to_string(getpid()) +
         ".csv";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  expect_clear_errors([&] {
    std::istringstream in(text);
    return memkit::planner::parse_instance(in, "fuzz.csv");
  });
  static const std::string path = temp_path();
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, f);  // data may be null when size is 0
    std::fclose(f);
    expect_clear_errors([&] { return memkit::planner::read_instance(path); });
    // The same bytes as a trace (plan --from-trace): the trace reader's errors too.
    try {
      expect_clear_errors([&] { return memkit::planner::instance_from_trace(path); });
    } catch (const memkit::trace::trace_error& e) {
      check(std::string_view(e.what()).rfind("[memkit::trace", 0) == 0,
            "a trace_error whose message does not name the reader");
    }
    std::remove(path.c_str());
  }
  return 0;
}
