// memory_exporter: serves shared blocks on a Unix socket and keeps each one out of
// its allocator's hands while an owner or an importer holds it. One thread polls
// the listening socket and every connection; a connection's close (the importer
// closed it, exited or was killed) is an importer gone.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "devices/sharing_protocol.hpp"
#include "devices/unix_socket.hpp"
#include "memkit/errors.hpp"
#include "memkit/sharing.hpp"

namespace memkit {

using devices_detail::close_fd;
using devices_detail::import_reply;
using devices_detail::import_request;
using devices_detail::reply_status;

namespace {

memory_sharing* find_sharing(device_set& devices, std::uint32_t device, const char* function) {
  auto* sharing = find_capability<memory_sharing>(devices.get_backend(device));
  if (!sharing) {
    throw invalid_argument(std::string("[memkit::memory_exporter::") + function + "] device " +
                           std::to_string(device) + " (" +
                           devices.get_backend(device).get_facts().name +
                           ") cannot share memory (its backend does not implement "
                           "memkit::memory_sharing)");
  }
  return sharing;
}

}  // namespace

struct memory_exporter::state {
  device_set* devices = nullptr;
  std::string socket_path;
  int listener = -1;
  int wake[2] = {-1, -1};
  std::thread server;

  struct shared_block {
    device_allocation allocation;
    std::size_t importers = 0;  // connections that hold an import
    std::size_t pending = 0;    // imports being sent
    bool released = false;      // the owner is done with it
    bool returning = false;     // being freed to its allocator (then erased)
  };
  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  std::map<std::uint64_t, shared_block> blocks;
  std::uint64_t next_id = 1;

  struct connection {
    int fd = -1;
    std::uint64_t id = 0;  // 0 until the import is sent
  };
  std::vector<connection> connections;  // the server thread's alone

  // Marks the block returning if nobody holds it any more; the caller frees it
  // outside the lock, then calls give_back.
  bool take_if_unheld_locked(std::uint64_t id, device_allocation& out) {
    auto it = blocks.find(id);
    if (it == blocks.end()) return false;
    shared_block& b = it->second;
    if (!b.released || b.importers || b.pending || b.returning) return false;
    b.returning = true;
    out = b.allocation;
    return true;
  }
  void free_block(const device_allocation& allocation) {
    try {
      devices->free(allocation);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[memkit::memory_exporter] freeing a shared block failed: %s\n",
                   e.what());
    }
  }
  // Frees a block take_if_unheld_locked marked, then forgets it: waiters see it
  // gone only once the allocator has it back.
  void give_back(std::uint64_t id, const device_allocation& allocation) {
    free_block(allocation);
    {
      std::lock_guard lock(mutex);
      blocks.erase(id);
    }
    changed.notify_all();
  }

  void serve();
  void answer(connection& c);
  void drop(connection& c);
};

void memory_exporter::state::answer(connection& c) {
  import_request request;
  const long got = devices_detail::receive_message(c.fd, &request, sizeof(request));
  import_reply reply;
  shared_memory memory;
  device_allocation allocation;
  bool found = false;
  if (got != static_cast<long>(sizeof(request)) || request.magic != devices_detail::kSharingMagic) {
    reply.status = reply_status::failed;
    std::snprintf(reply.error, sizeof(reply.error), "malformed request");
  } else {
    std::lock_guard lock(mutex);
    auto it = blocks.find(request.id);
    if (it == blocks.end()) {
      reply.status = reply_status::unknown;
    } else if (it->second.released || it->second.returning) {
      reply.status = reply_status::released;
    } else {
      it->second.pending++;
      allocation = it->second.allocation;
      found = true;
    }
  }
  if (found) {
    try {
      memory = find_sharing(*devices, allocation.device, "serve")
                   ->export_memory(allocation.address, allocation.size);
    } catch (const std::exception& e) {
      reply.status = reply_status::failed;
      std::snprintf(reply.error, sizeof(reply.error), "%s", e.what());
    }
  }
  bool sent = false;
  if (reply.status == reply_status::ok) {
    reply.type = static_cast<std::uint32_t>(memory.type);
    reply.device = memory.device;
    reply.size = memory.size;
    reply.offset = memory.offset;
    reply.address = memory.address;
    reply.piece_count = static_cast<std::uint32_t>(memory.fds.size());
    std::memcpy(reply.handle, memory.handle, sizeof(reply.handle));
    sent = devices_detail::send_message(c.fd, &reply, sizeof(reply));
    for (std::size_t first = 0; sent && first < memory.fds.size();
         first += devices_detail::kFdsPerMessage) {
      const std::size_t n = std::min(devices_detail::kFdsPerMessage, memory.fds.size() - first);
      sent = devices_detail::send_message(c.fd, memory.piece_bytes.data() + first,
                                          n * sizeof(std::uint64_t),
                                          std::span<const int>(memory.fds.data() + first, n));
    }
  } else {
    devices_detail::send_message(c.fd, &reply, sizeof(reply));
  }
  memory.close_fds();  // the importer holds its own copies now
  device_allocation to_free;
  bool free_now = false;
  {
    std::lock_guard lock(mutex);
    if (found) {
      shared_block& b = blocks.at(request.id);
      b.pending--;
      if (sent) {
        b.importers++;
        c.id = request.id;
      }
      free_now = take_if_unheld_locked(request.id, to_free);
    }
  }
  changed.notify_all();
  if (free_now) give_back(request.id, to_free);
  if (!sent) {
    close_fd(c.fd);
    c.fd = -1;
  }
}

void memory_exporter::state::drop(connection& c) {
  close_fd(c.fd);
  c.fd = -1;
  if (!c.id) return;
  device_allocation to_free;
  bool free_now = false;
  {
    std::lock_guard lock(mutex);
    auto it = blocks.find(c.id);
    if (it != blocks.end()) {
      it->second.importers--;
      free_now = take_if_unheld_locked(c.id, to_free);
    }
  }
  changed.notify_all();
  if (free_now) give_back(c.id, to_free);
}

void memory_exporter::state::serve() {
  std::vector<pollfd> polled;
  for (;;) {
    polled.clear();
    polled.push_back({wake[0], POLLIN, 0});
    polled.push_back({listener, POLLIN, 0});
    for (const connection& c : connections) polled.push_back({c.fd, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      std::perror("[memkit::memory_exporter] poll");
      return;
    }
    if (polled[0].revents) return;  // stop
    for (std::size_t i = 0; i < connections.size(); ++i) {
      const short events = polled[i + 2].revents;
      if (!events) continue;
      connection& c = connections[i];
      if (c.id == 0 && (events & POLLIN)) {
        answer(c);
      } else {
        // An importer sends nothing after its request: data, a hang-up or an
        // error all end the import.
        drop(c);
      }
    }
    std::erase_if(connections, [](const connection& c) { return c.fd < 0; });
    if (polled[1].revents & POLLIN) {
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) connections.push_back({fd, 0});
    }
  }
}

memory_exporter::memory_exporter(device_set& devices, std::string socket_path)
    : state_(std::make_unique<state>()) {
  state& s = *state_;
  s.devices = &devices;
  s.socket_path = std::move(socket_path);
  s.listener = devices_detail::listen_unix(s.socket_path);
  if (::pipe2(s.wake, O_CLOEXEC) != 0) {
    close_fd(s.listener);
    throw os_error("[memkit::memory_exporter] pipe2", errno);
  }
  s.server = std::thread([&s] { s.serve(); });
}

memory_exporter::~memory_exporter() {
  state& s = *state_;
  const char stop = 1;
  if (::write(s.wake[1], &stop, 1) != 1) std::perror("[memkit::memory_exporter] stopping");
  s.server.join();
  for (const state::connection& c : s.connections) close_fd(c.fd);
  close_fd(s.listener);
  close_fd(s.wake[0]);
  close_fd(s.wake[1]);
  if (!s.socket_path.empty() && s.socket_path[0] != '@') ::unlink(s.socket_path.c_str());
  for (const auto& entry : s.blocks) s.free_block(entry.second.allocation);
}

std::uint64_t memory_exporter::share(const device_allocation& allocation) {
  state& s = *state_;
  // Export once here, so that memory that cannot be shared fails in the owner's call.
  find_sharing(*s.devices, allocation.device, "share")
      ->export_memory(allocation.address, allocation.size);
  std::lock_guard lock(s.mutex);
  const std::uint64_t id = s.next_id++;
  s.blocks.emplace(id, state::shared_block{allocation, 0, 0, false});
  return id;
}

void memory_exporter::release(std::uint64_t id) {
  state& s = *state_;
  device_allocation to_free;
  bool free_now = false;
  {
    std::lock_guard lock(s.mutex);
    auto it = s.blocks.find(id);
    if (it == s.blocks.end() || it->second.released || it->second.returning) {
      throw invalid_argument("[memkit::memory_exporter::release] block " + std::to_string(id) +
                             " is not shared or was released already");
    }
    it->second.released = true;
    free_now = s.take_if_unheld_locked(id, to_free);
  }
  if (free_now) s.give_back(id, to_free);
}

std::size_t memory_exporter::get_importer_count(std::uint64_t id) const {
  std::lock_guard lock(state_->mutex);
  auto it = state_->blocks.find(id);
  return it == state_->blocks.end() ? 0 : it->second.importers;
}

bool memory_exporter::is_held(std::uint64_t id) const {
  std::lock_guard lock(state_->mutex);
  return state_->blocks.contains(id);
}

std::size_t memory_exporter::get_held_count() const {
  std::lock_guard lock(state_->mutex);
  return state_->blocks.size();
}

bool memory_exporter::wait_until_unimported(std::uint64_t id,
                                            std::chrono::milliseconds timeout) const {
  const state& s = *state_;
  std::unique_lock lock(s.mutex);
  return s.changed.wait_for(lock, timeout, [&] {
    auto it = s.blocks.find(id);
    return it == s.blocks.end() ||
           (it->second.importers == 0 && it->second.pending == 0 && !it->second.returning);
  });
}

bool memory_exporter::wait_for_importers(std::uint64_t id, std::size_t count,
                                         std::chrono::milliseconds timeout) const {
  const state& s = *state_;
  std::unique_lock lock(s.mutex);
  return s.changed.wait_for(lock, timeout, [&] {
    auto it = s.blocks.find(id);
    return it != s.blocks.end() && it->second.importers >= count;
  });
}

const std::string& memory_exporter::get_socket_path() const noexcept { return state_->socket_path; }

}  // namespace memkit
