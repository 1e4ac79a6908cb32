// Unix sequenced-packet sockets that carry file descriptors (SCM_RIGHTS): the
// transport of memory_exporter and imported_memory. A path that starts with '@'
// names a socket in the abstract namespace (no file).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace memkit::devices_detail {

// Most descriptors one message carries (the kernel's limit is 253).
constexpr std::size_t kFdsPerMessage = 200;

int listen_unix(const std::string& path);   // throws os_error
int connect_unix(const std::string& path);  // throws os_error
// Sends one message with `fds` attached; false when the peer is gone.
bool send_message(int socket, const void* data, std::size_t bytes, std::span<const int> fds = {});
// Receives one message into `data`; appends the descriptors it carried to `fds`.
// Returns its length, 0 when the peer has closed, -1 on an error.
long receive_message(int socket, void* data, std::size_t capacity, std::vector<int>* fds = nullptr);
void close_fd(int fd) noexcept;

}  // namespace memkit::devices_detail
