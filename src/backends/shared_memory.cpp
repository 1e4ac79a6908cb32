// shared_memory (include/memkit/capabilities.hpp): the value a backend's export_memory
// returns, so it belongs with the backend interface, below every layer that uses it.
#include <unistd.h>

#include <cstring>
#include <utility>

#include "memkit/capabilities.hpp"

namespace memkit {

shared_memory::shared_memory(shared_memory&& other) noexcept { *this = std::move(other); }

shared_memory& shared_memory::operator=(shared_memory&& other) noexcept {
  if (this == &other) return *this;
  close_fds();
  type = other.type;
  device = other.device;
  size = other.size;
  offset = other.offset;
  address = other.address;
  piece_bytes = std::move(other.piece_bytes);
  fds = std::move(other.fds);
  other.fds.clear();
  std::memcpy(handle, other.handle, sizeof(handle));
  return *this;
}

shared_memory::~shared_memory() { close_fds(); }

void shared_memory::close_fds() noexcept {
  for (const int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  fds.clear();
}

}  // namespace memkit
