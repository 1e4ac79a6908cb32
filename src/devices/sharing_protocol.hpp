// The messages between memory_exporter and imported_memory, over one
// SOCK_SEQPACKET connection per import:
//   importer -> exporter   request {id}
//   exporter -> importer   reply header {status, the description, piece_count}
//   exporter -> importer   ceil(piece_count / kFdsPerMessage) messages, each the
//                          pieces' byte counts with their fds attached
// after which the connection stays open, silent, until the importer closes it.
#pragma once

#include <cstdint>

namespace memkit::devices_detail {

constexpr std::uint32_t kSharingMagic = 0x6d6b6970;  // "mkip"

enum class reply_status : std::int32_t { ok = 0, unknown = 1, released = 2, failed = 3 };

struct import_request {
  std::uint32_t magic = kSharingMagic;
  std::uint32_t reserved = 0;
  std::uint64_t id = 0;
};

struct import_reply {
  std::uint32_t magic = kSharingMagic;
  reply_status status = reply_status::ok;
  std::uint32_t type = 0;
  std::uint32_t device = 0;
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
  std::uint64_t address = 0;
  std::uint32_t piece_count = 0;
  std::uint32_t reserved = 0;
  unsigned char handle[64] = {};
  char error[256] = {};  // why, when status is not ok
};

}  // namespace memkit::devices_detail
