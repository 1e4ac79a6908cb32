#include "allocator/recorder.hpp"

#include <cerrno>
#include <cstring>

#include "memkit/errors.hpp"

namespace memkit {

namespace {
constexpr std::size_t kFileBuffer = std::size_t{1} << 20;  // lines reach the disk in MiBs
}  // namespace

void recorder::start(const std::string& path, const std::string& device_name) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (!file) {
    throw invalid_argument("[memkit::allocator::start_recording] " + path +
                           ": cannot open for writing (" + std::strerror(errno) + ")");
  }
  std::setvbuf(file, nullptr, _IOFBF, kFileBuffer);
  stop();
  std::lock_guard lock(mutex_);
  file_ = file;
  path_ = path;
  recorded_.clear();
  events_ = 0;
  write_failed_ = false;
  start_ = std::chrono::steady_clock::now();
  std::fprintf(file_,
               "# source: memkit recorder (%s)\n"
               "# a,<address>,<bytes>,<queue>,<ns since the start> / f,<address>,<ns>\n",
               device_name.c_str());
}

std::uint64_t recorder::stop() {
  std::lock_guard lock(mutex_);
  if (!file_) return 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  recorded_.clear();
  if (write_failed_ || !closed) {
    std::fprintf(stderr, "[memkit::allocator::stop_recording] %s: a write failed (disk full?)\n",
                 path_.c_str());
  }
  return events_;
}

std::uint64_t recorder::get_ns() const {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now() - start_)
                                        .count());
}

void recorder::on_allocate(address_t address, std::size_t bytes, queue_id queue) {
  std::lock_guard lock(mutex_);
  if (!file_) return;
  recorded_.insert(address);
  ++events_;
  write_failed_ |=
      std::fprintf(file_, "a,%llu,%zu,%u,%llu\n", static_cast<unsigned long long>(address), bytes,
                   queue, static_cast<unsigned long long>(get_ns())) < 0;
}

void recorder::on_free(address_t address) {
  std::lock_guard lock(mutex_);
  if (!file_ || recorded_.erase(address) == 0) return;
  ++events_;
  write_failed_ |= std::fprintf(file_, "f,%llu,%llu\n", static_cast<unsigned long long>(address),
                                static_cast<unsigned long long>(get_ns())) < 0;
}

}  // namespace memkit
