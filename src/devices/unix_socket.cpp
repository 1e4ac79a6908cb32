#include "devices/unix_socket.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "memkit/errors.hpp"

namespace memkit::devices_detail {

namespace {

socklen_t make_address(const std::string& path, sockaddr_un& address, const char* function) {
  std::memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    throw invalid_argument(std::string("[memkit::") + function + "] socket path '" + path +
                           "' is empty or longer than " +
                           std::to_string(sizeof(address.sun_path) - 1) + " bytes");
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  if (path[0] == '@') address.sun_path[0] = '\0';  // abstract namespace
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                (path[0] == '@' ? 0 : 1));
}

[[noreturn]] void throw_errno(const std::string& what) { throw os_error(what, errno); }

}  // namespace

int listen_unix(const std::string& path) {
  sockaddr_un address;
  const socklen_t length = make_address(path, address, "memory_exporter");
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("[memkit::memory_exporter] socket");
  if (path[0] != '@') ::unlink(path.c_str());  // a socket file left by an earlier run
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0 ||
      ::listen(fd, 64) != 0) {
    const int error = errno;
    ::close(fd);
    errno = error;
    throw_errno("[memkit::memory_exporter] listening on '" + path + "'");
  }
  return fd;
}

int connect_unix(const std::string& path) {
  sockaddr_un address;
  const socklen_t length = make_address(path, address, "imported_memory");
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("[memkit::imported_memory] socket");
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    const int error = errno;
    ::close(fd);
    errno = error;
    throw_errno("[memkit::imported_memory] connecting to '" + path + "'");
  }
  return fd;
}

bool send_message(int socket, const void* data, std::size_t bytes, std::span<const int> fds) {
  iovec part{const_cast<void*>(data), bytes};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(int) * kFdsPerMessage)];
  if (!fds.empty()) {
    if (fds.size() > kFdsPerMessage) {
      throw invalid_argument("[memkit::send_message] more than " + std::to_string(kFdsPerMessage) +
                             " descriptors in one message");
    }
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    const ssize_t sent = ::sendmsg(socket, &message, MSG_NOSIGNAL);
    if (sent >= 0) return static_cast<std::size_t>(sent) == bytes;
    if (errno != EINTR) return false;
  }
}

long receive_message(int socket, void* data, std::size_t capacity, std::vector<int>* fds) {
  iovec part{data, capacity};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(int) * kFdsPerMessage)];
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  ssize_t received;
  do {
    received = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  if (received < 0) return -1;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      if (fds) {
        fds->push_back(fd);
      } else {
        ::close(fd);
      }
    }
  }
  if (message.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) return -1;
  return static_cast<long>(received);
}

void close_fd(int fd) noexcept {
  if (fd >= 0) ::close(fd);
}

}  // namespace memkit::devices_detail
