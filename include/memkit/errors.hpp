// Errors memkit raises. Every message starts with the function that raised it,
// e.g. "[memkit::allocate] ...".
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace memkit {

// Input text quoted for a message: at most 40 bytes, anything but printable ASCII
// shown as '?', so that a binary or hostile line neither floods nor drives the
// terminal.
inline std::string quote_input(std::string_view text) {
  constexpr std::size_t kMax = 40;
  std::string quoted = "'";
  for (const char c : text.substr(0, kMax)) quoted += (c >= 32 && c < 127) ? c : '?';
  if (text.size() > kMax) quoted += "...";
  return quoted + "'";
}

// Bad input: a size above the device's largest buffer, an unknown address, a
// limit the backend cannot honour. Nothing changed.
class invalid_argument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The request cannot be met within the memory limit or the device's capacity,
// after releasing the cache and waiting for queued work. Nothing changed.
class out_of_memory : public std::runtime_error {
 public:
  struct details {
    std::size_t requested_bytes = 0;     // the request that failed
    std::size_t active_bytes = 0;        // bytes in live blocks
    std::size_t cached_bytes = 0;        // bytes reserved but not live
    std::size_t reserved_bytes = 0;      // bytes held from the backend
    std::size_t limit_bytes = 0;         // the memory limit in force
    std::size_t largest_free_bytes = 0;  // the largest free block
  };
  out_of_memory(const std::string& message, details d) : std::runtime_error(message), details_(d) {}
  const details& get_details() const noexcept { return details_; }

 private:
  details details_;
};

// The validation mode found a broken invariant: a bug in memkit.
class invariant_violation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace memkit
