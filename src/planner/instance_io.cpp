// Reading instances and traces, writing plans (include/memkit/planner.hpp).

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <istream>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/helpers.hpp"
#include "io/input_file.hpp"
#include "memkit/errors.hpp"
#include "memkit/planner.hpp"
#include "memkit/trace.hpp"

namespace memkit::planner {
namespace {

using common::split;
using common::trim;

constexpr const char* kTotalTooLarge = "the buffers' sizes sum past 2^62 bytes";
const std::string kTooManyBuffers =
    "more than " + std::to_string(kMaxBuffers) + " buffers: not an instance the planner takes";
constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;  // a trace line is far shorter

// Parses a whole field as a signed decimal integer.
bool parse_integer(std::string_view text, std::int64_t& value) {
  if (text.empty()) return false;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (*first == '+') ++first;  // from_chars does not take a leading plus
  const auto [end, error] = std::from_chars(first, last, value);
  return error == std::errc() && end == last;
}

// Builds "[memkit::planner::<function>] <where>:<line>: <what>".
planner_error located_error(std::string_view function, const std::string& where, std::uint64_t line,
                            const std::string& what) {
  return planner_error("[memkit::planner::" + std::string(function) + "] " + where + ":" +
                       std::to_string(line) + ": " + what);
}

instance parse_instance_as(std::istream& in, const std::string& name, std::string_view function) {
  static constexpr const char* kFieldNames[] = {"id", "lower", "upper", "size"};
  instance result;
  std::unordered_map<std::int64_t, std::uint64_t> line_of_id;
  std::int64_t total = 0;  // bytes of the buffers so far
  std::string line;
  std::uint64_t line_number = 0;
  bool seen_header = false;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find('\0') != std::string::npos)
      throw located_error(function, name, line_number, "a NUL byte: not an instance");
    if (line.size() > kMaxLineBytes)
      throw located_error(function, name, line_number, "a line longer than 1 MiB");
    const std::string_view text = trim(line);
    if (text.empty()) continue;
    if (!seen_header) {
      if (text != "id,lower,upper,size") {
        throw located_error(function, name, line_number,
                            "expected the header 'id,lower,upper,size', got " + quote_input(text));
      }
      seen_header = true;
      continue;
    }
    const std::vector<std::string_view> fields = split(text, ',');
    if (fields.size() != 4) {
      throw located_error(function, name, line_number,
                          "expected 4 fields, got " + std::to_string(fields.size()));
    }
    std::int64_t values[4] = {};
    for (std::size_t k = 0; k < 4; ++k) {
      if (!parse_integer(fields[k], values[k])) {
        throw located_error(function, name, line_number,
                            std::string("field '") + kFieldNames[k] +
                                "' is not an integer: " + quote_input(fields[k]));
      }
      if (values[k] < 0) {
        throw located_error(function, name, line_number,
                            std::string("field '") + kFieldNames[k] +
                                "' is negative: " + std::to_string(values[k]));
      }
    }
    const buffer b{values[0], values[1], values[2], values[3]};
    if (b.upper <= b.lower) {
      throw located_error(function, name, line_number,
                          "empty lifetime: lower " + std::to_string(b.lower) +
                              " is not below upper " + std::to_string(b.upper));
    }
    if (b.size == 0) throw located_error(function, name, line_number, "size is 0");
    if (b.size > kMaxTotalBytes - total) {
      throw located_error(function, name, line_number, kTotalTooLarge);
    }
    total += b.size;
    const auto [it, inserted] = line_of_id.emplace(b.id, line_number);
    if (!inserted) {
      throw located_error(function, name, line_number,
                          "duplicate id " + std::to_string(b.id) + " (first on line " +
                              std::to_string(it->second) + ")");
    }
    if (result.buffers.size() == kMaxBuffers)
      throw located_error(function, name, line_number, kTooManyBuffers);
    result.buffers.push_back(b);
  }
  if (in.bad()) throw located_error(function, name, line_number, "read error");
  if (!seen_header) {
    throw located_error(function, name, line_number + 1,
                        "missing the header 'id,lower,upper,size' (empty input)");
  }
  return result;
}

}  // namespace

instance parse_instance(std::istream& in, const std::string& name) {
  return parse_instance_as(in, name, "parse_instance");
}

instance read_instance(const std::string& path) {
  // Whole, within io::input_file's bounds (and gzip is read too).
  io::whole_text file = io::read_whole_text(path, "a NUL byte: not an instance");
  if (file.cannot_open) {
    throw planner_error("[memkit::planner::read_instance] " + path + ": " + file.problem);
  }
  if (!file.problem.empty()) throw located_error("read_instance", path, file.line, file.problem);
  std::istringstream in(std::move(file.text));
  return parse_instance_as(in, path, "read_instance");
}

void write_plan(std::ostream& out, const instance& inst, const plan& p) {
  if (p.offsets.size() != inst.buffers.size()) {
    throw planner_error("[memkit::planner::write_plan] the plan has " +
                        std::to_string(p.offsets.size()) + " offsets for " +
                        std::to_string(inst.buffers.size()) + " buffers");
  }
  std::string text = "id,lower,upper,size,offset\n";
  for (std::size_t i = 0; i < inst.buffers.size(); ++i) {
    const buffer& b = inst.buffers[i];
    text += std::to_string(b.id) + ',' + std::to_string(b.lower) + ',' + std::to_string(b.upper) +
            ',' + std::to_string(b.size) + ',' + std::to_string(p.offsets[i]) + '\n';
  }
  out << text;
}

void write_plan(const std::string& path, const instance& inst, const plan& p) {
  std::ofstream out(path);
  if (!out)
    throw planner_error("[memkit::planner::write_plan] " + path + ": cannot open for writing");
  write_plan(out, inst, p);
  out.close();
  if (!out) throw planner_error("[memkit::planner::write_plan] " + path + ": write failed");
}

// The trace layer's readers (every format `memkit replay` reads, with its errors);
// here only the conversion: one buffer per allocation of more than 0 bytes, live
// from its event to its free's (or to the end), one moment per event.
instance instance_from_trace(const std::string& path) {
  const trace::trace_data trace = trace::read(path);
  static constexpr std::size_t kNoBuffer = ~std::size_t{0};
  std::vector<std::size_t> buffer_of(trace.allocations, kNoBuffer);  // by block
  instance result;
  std::int64_t total = 0;
  std::int64_t moment = 0;
  for (const trace::event& e : trace.events) {
    if (e.kind == trace::action::allocate && e.size > 0) {
      if (e.size > static_cast<std::uint64_t>(kMaxTotalBytes - total))
        throw located_error("instance_from_trace", path, e.line, kTotalTooLarge);
      total += static_cast<std::int64_t>(e.size);
      buffer_of[e.block] = result.buffers.size();
      result.buffers.push_back(buffer{static_cast<std::int64_t>(result.buffers.size()), moment, -1,
                                      static_cast<std::int64_t>(e.size)});
    } else if (e.kind == trace::action::free && buffer_of[e.block] != kNoBuffer) {
      result.buffers[buffer_of[e.block]].upper = moment;
    }
    ++moment;
  }
  for (buffer& b : result.buffers) {
    if (b.upper < 0) b.upper = moment;  // never freed: live to the end
  }
  return result;
}

}  // namespace memkit::planner
