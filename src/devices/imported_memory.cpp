// imported_memory: asks an exporter for a block, maps it, and holds the connection
// for as long as the import lives; closing it is how the exporter learns it is gone.
#include <cstring>
#include <string>

#include "devices/sharing_protocol.hpp"
#include "devices/unix_socket.hpp"
#include "memkit/errors.hpp"
#include "memkit/sharing.hpp"

namespace memkit {

using devices_detail::import_reply;
using devices_detail::import_request;
using devices_detail::reply_status;

namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw invalid_argument("[memkit::imported_memory] " + what);
}

shared_memory receive_description(int connection, std::uint64_t id, const std::string& path) {
  import_request request;
  request.id = id;
  if (!devices_detail::send_message(connection, &request, sizeof(request))) {
    refuse("the exporter at '" + path + "' closed the connection");
  }
  import_reply reply;
  if (devices_detail::receive_message(connection, &reply, sizeof(reply)) !=
          static_cast<long>(sizeof(reply)) ||
      reply.magic != devices_detail::kSharingMagic) {
    refuse("no valid reply from the exporter at '" + path + "'");
  }
  switch (reply.status) {
    case reply_status::ok:
      break;
    case reply_status::unknown:
      refuse("block " + std::to_string(id) + " is not shared at '" + path + "'");
    case reply_status::released:
      refuse("block " + std::to_string(id) + " at '" + path + "' was released by its owner");
    default:
      reply.error[sizeof(reply.error) - 1] = '\0';
      refuse("the exporter at '" + path + "' could not export block " + std::to_string(id) + ": " +
             reply.error);
  }
  shared_memory memory;
  memory.type = static_cast<shared_memory::kind>(reply.type);
  memory.device = reply.device;
  memory.size = reply.size;
  memory.offset = reply.offset;
  memory.address = reply.address;
  std::memcpy(memory.handle, reply.handle, sizeof(memory.handle));
  while (memory.fds.size() < reply.piece_count) {
    std::uint64_t sizes[devices_detail::kFdsPerMessage];
    const std::size_t before = memory.fds.size();
    const long got = devices_detail::receive_message(connection, sizes, sizeof(sizes), &memory.fds);
    const std::size_t carried = memory.fds.size() - before;
    if (got <= 0 || static_cast<std::size_t>(got) != carried * sizeof(std::uint64_t) ||
        carried == 0) {
      refuse("the exporter at '" + path + "' sent " + std::to_string(memory.fds.size()) + " of " +
             std::to_string(reply.piece_count) + " pieces of block " + std::to_string(id));
    }
    memory.piece_bytes.insert(memory.piece_bytes.end(), sizes, sizes + carried);
  }
  return memory;
}

}  // namespace

imported_memory::imported_memory(backend& device, const std::string& socket_path, std::uint64_t id)
    : sharing_(find_capability<memory_sharing>(device)) {
  if (!sharing_) {
    refuse(device.get_facts().name +
           " cannot import memory (its backend does not implement memkit::memory_sharing)");
  }
  connection_ = devices_detail::connect_unix(socket_path);
  try {
    description_ = receive_description(connection_, id, socket_path);
    address_ = sharing_->import_memory(description_);
  } catch (...) {
    devices_detail::close_fd(connection_);
    connection_ = -1;
    throw;
  }
}

imported_memory::~imported_memory() {
  try {
    close();
  } catch (const std::exception&) {
    // The mapping is gone with the process anyway; the connection closes below.
    devices_detail::close_fd(connection_);
  }
}

address_t imported_memory::get_address() const noexcept { return address_; }
std::size_t imported_memory::get_size() const noexcept { return description_.size; }
const shared_memory& imported_memory::get_description() const noexcept { return description_; }

void imported_memory::close() {
  if (address_) {
    const address_t address = address_;
    address_ = 0;
    sharing_->close_import(address);
  }
  devices_detail::close_fd(connection_);
  connection_ = -1;
}

}  // namespace memkit
