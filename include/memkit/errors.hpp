// Errors memkit raises. Every one derives from memkit::error (a std::runtime_error),
// so `catch (const memkit::error&)` takes whatever the library throws but the
// standard library's own (std::bad_alloc). Every message starts with the function
// that raised it, e.g. "[memkit::allocate] ...". The C API maps them to its statuses
// in one place (memkit::capi::get_current_failure, memkit/capi.hpp).
//
//   error                  the base
//     invalid_argument     bad input; nothing changed
//     out_of_memory        no room; nothing changed; details say where memory stood
//     invariant_violation  a broken invariant: a bug in memkit
//     unavailable          a backend this build lacks or whose device is absent
//     os_error             a call to the operating system failed (its errno)
//   and, next to what throws them: cuda_error, vulkan_error (memkit/backends/),
//   vulkan_unavailable (an unavailable), injected_fault (memkit/adaptors/),
//   trace::trace_error (memkit/trace.hpp), planner::planner_error (memkit/planner.hpp).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

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

class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad input: a size above the device's largest buffer, an unknown address, a
// limit the backend cannot honour. Nothing changed.
class invalid_argument : public error {
 public:
  using error::error;
};

// The request cannot be met within the memory limit or the device's capacity,
// after releasing the cache and waiting for queued work. Nothing changed.
class out_of_memory : public error {
 public:
  struct details {
    std::size_t requested_bytes = 0;     // the request that failed
    std::size_t active_bytes = 0;        // bytes in live blocks
    std::size_t cached_bytes = 0;        // bytes reserved but not live
    std::size_t reserved_bytes = 0;      // bytes held from the backend
    std::size_t limit_bytes = 0;         // the memory limit in force
    std::size_t largest_free_bytes = 0;  // the largest free block
  };
  out_of_memory(const std::string& message, details d) : error(message), details_(d) {}
  const details& get_details() const noexcept { return details_; }

 private:
  details details_;
};

// The validation mode found a broken invariant: a bug in memkit.
class invariant_violation : public error {
 public:
  using error::error;
};

// A backend this build lacks, or whose device is not present here.
class unavailable : public error {
 public:
  using error::error;
};

// A call to the operating system failed; get_code() is its errno.
class os_error : public error {
 public:
  os_error(const std::string& message, int errno_value)
      : error(message + ": " + std::generic_category().message(errno_value)),
        code_(errno_value, std::generic_category()) {}
  std::error_code get_code() const noexcept { return code_; }

 private:
  std::error_code code_;
};

}  // namespace memkit
