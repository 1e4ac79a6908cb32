#include "memkit/write_csv.hpp"

#include <cstdint>
#include <vector>

namespace memkit::trace {
namespace {

// A frame's file or function as one CSV field: `%`, `,` and control bytes as %XX, and
// spaces at either end too (the reader trims them otherwise).
std::string escape_field(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const bool at_end = i == 0 || i + 1 == text.size();
    if (byte == '%' || byte == ',' || byte < 0x20 || byte == 0x7f || (at_end && byte == ' ')) {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += static_cast<char>(byte);
    }
  }
  return out;
}

}  // namespace

std::string write_memkit_csv(const trace_data& trace) {
  std::string out;
  out.reserve(trace.events.size() * 16);
  if (trace.get_metadata("workload").empty()) {
    std::string name = trace.name;
    for (char& c : name) {
      if (c == '\n' || c == '\r') c = '?';
    }
    out += "# workload: " + name + "\n";
  }
  for (const auto& [key, value] : trace.metadata) out += "# " + key + ": " + value + "\n";
  std::vector<bool> stack_written(trace.stacks.size());
  std::size_t marker = 0;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    for (; marker < trace.step_starts.size() && trace.step_starts[marker] == i; ++marker) {
      out += "s\n";
    }
    const event& e = trace.events[i];
    if (e.kind == action::free) {
      out += "f," + std::to_string(e.block) + "\n";
      continue;
    }
    const std::uint32_t stack =
        e.block < trace.block_stacks.size() ? trace.block_stacks[e.block] : 0;
    if (stack != 0 && !stack_written[stack - 1]) {
      stack_written[stack - 1] = true;
      for (const frame& f : trace.stacks[stack - 1]) {
        out += "@" + std::to_string(stack - 1) + "," + escape_field(f.filename) + "," +
               std::to_string(f.line) + "," + escape_field(f.name) + "\n";
      }
    }
    out += "a," + std::to_string(e.block) + "," + std::to_string(e.size) + "," +
           trace.streams[e.stream];
    if (stack != 0) out += ",@" + std::to_string(stack - 1);
    out += "\n";
  }
  for (; marker < trace.step_starts.size(); ++marker) out += "s\n";
  return out;
}

}  // namespace memkit::trace
