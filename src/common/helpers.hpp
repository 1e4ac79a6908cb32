// Small helpers every layer may use, written once: header only, so a layer that
// includes them links nothing for them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace memkit::common {

// The multiple of `unit` (> 0) at or above `value`.
template <class Integer>
constexpr Integer round_up(Integer value, std::type_identity_t<Integer> unit) {
  return (value + unit - 1) / unit * unit;
}

// A number as 0x followed by lowercase hex digits, as messages show addresses.
inline std::string hex(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// Text without the blanks around it: spaces and tabs before, and line ends after.
inline std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r' ||
                           text.back() == '\n')) {
    text.remove_suffix(1);
  }
  return text;
}

// The fields of a line between separators, each trimmed; one field when there is none.
inline std::vector<std::string_view> split(std::string_view line, char separator) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = line.find(separator, start);
    fields.push_back(trim(line.substr(start, end - start)));
    if (end == std::string_view::npos) return fields;
    start = end + 1;
  }
}

}  // namespace memkit::common
