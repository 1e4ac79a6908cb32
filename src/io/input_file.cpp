#include "io/input_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace memkit::io {

namespace {
constexpr std::size_t kRawChunk = std::size_t{1} << 17;
constexpr unsigned char kGzipMagic[2] = {0x1f, 0x8b};
}  // namespace

input_file::input_file(const std::string& path, std::uint64_t max_bytes)
    : raw_(kRawChunk), max_bytes_(max_bytes) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) {
    error_number_ = errno;
    status_ = status::cannot_open;
    return;
  }
  zlib_.next_in = raw_.data();
  zlib_.avail_in = 0;
  refill();
  gzip_ =
      zlib_.avail_in >= 2 && zlib_.next_in[0] == kGzipMagic[0] && zlib_.next_in[1] == kGzipMagic[1];
  // 15 + 16: a gzip wrapper around a deflate stream with the largest window.
  if (gzip_ && inflateInit2(&zlib_, 15 + 16) != Z_OK) status_ = status::corrupt;
}

input_file::~input_file() {
  if (gzip_) inflateEnd(&zlib_);
  if (file_) std::fclose(file_);
}

bool input_file::refill() {
  if (at_eof_) return false;
  // Keep the unread bytes at the front.
  const std::size_t kept = zlib_.avail_in;
  std::memmove(raw_.data(), zlib_.next_in, kept);
  const std::size_t got = std::fread(raw_.data() + kept, 1, raw_.size() - kept, file_);
  if (got == 0) {
    if (std::ferror(file_)) {
      error_number_ = errno;
      status_ = status::read_error;
    }
    at_eof_ = true;
  }
  zlib_.next_in = raw_.data();
  zlib_.avail_in = static_cast<uInt>(kept + got);
  return got > 0;
}

std::size_t input_file::read(char* out, std::size_t capacity) {
  if (status_ != status::ok || capacity == 0) return 0;
  std::size_t got = 0;
  if (gzip_) {
    got = read_gzip(out, capacity);
  } else {
    if (zlib_.avail_in == 0 && !refill()) return status_ == status::ok ? fail(status::end) : 0;
    got = std::min<std::size_t>(capacity, zlib_.avail_in);
    std::memcpy(out, zlib_.next_in, got);
    zlib_.next_in += got;
    zlib_.avail_in -= static_cast<uInt>(got);
  }
  if (got > max_bytes_ - produced_) return fail(status::too_large);
  produced_ += got;
  return got;
}

std::size_t input_file::read_gzip(char* out, std::size_t capacity) {
  for (;;) {
    if (zlib_.avail_in == 0) refill();
    if (status_ != status::ok) return 0;
    if (between_members_) {
      if (zlib_.avail_in < 2 && !at_eof_ && refill()) continue;
      if (zlib_.avail_in == 0) return fail(status::end);
      // After a member only another member may follow (zlib's gzread would skip
      // anything else in silence).
      if (zlib_.avail_in < 2 || zlib_.next_in[0] != kGzipMagic[0] ||
          zlib_.next_in[1] != kGzipMagic[1])
        return fail(status::trailing_data);
      inflateReset(&zlib_);
      between_members_ = false;
    }
    zlib_.next_out = reinterpret_cast<Bytef*>(out);
    zlib_.avail_out = static_cast<uInt>(std::min<std::size_t>(capacity, 1u << 30));
    const uInt before_out = zlib_.avail_out;
    const int result = inflate(&zlib_, Z_NO_FLUSH);
    const std::size_t produced = before_out - zlib_.avail_out;
    if (result == Z_STREAM_END) {
      between_members_ = true;
    } else if (result == Z_BUF_ERROR || (result == Z_OK && produced == 0)) {
      // No progress: it needs more input than the file has.
      if (zlib_.avail_in == 0 && at_eof_) return fail(status::truncated);
    } else if (result != Z_OK) {
      zlib_message_ = zlib_.msg ? zlib_.msg : "inflate failed";
      return fail(status::corrupt);
    }
    if (produced > 0) return produced;
  }
}

std::string input_file::describe() const {
  switch (status_) {
    case status::ok:
    case status::end:
      return "";
    case status::cannot_open:
      return std::string("cannot open: ") + std::strerror(error_number_);
    case status::read_error:
      return std::string("read error: ") + std::strerror(error_number_);
    case status::truncated:
      return "truncated gzip stream";
    case status::corrupt:
      return "corrupt gzip stream (" + zlib_message_ + ")";
    case status::trailing_data:
      return "data after the end of the gzip stream that is not another gzip stream";
    case status::too_large:
      return "more than " + std::to_string(max_bytes_) +
             " bytes once decompressed: not read further";
  }
  return "";
}

whole_text read_whole_text(const std::string& path, const std::string& nul_problem) {
  input_file file(path);
  whole_text out;
  std::vector<char> chunk(std::size_t{1} << 16);
  const auto stop = [&](std::string problem) {
    out.problem = std::move(problem);
    out.line = static_cast<std::uint64_t>(std::count(out.text.begin(), out.text.end(), '\n')) + 1;
    return out;
  };
  while (const std::size_t count = file.read(chunk.data(), chunk.size())) {
    // Stop at once on binary input (/dev/zero, a gzip bomb of zeros) rather than read
    // it whole: no text format memkit reads has a NUL byte.
    if (const void* nul = std::memchr(chunk.data(), 0, count)) {
      out.text.append(chunk.data(),
                      static_cast<std::size_t>(static_cast<const char*>(nul) - chunk.data()));
      return stop(nul_problem);
    }
    out.text.append(chunk.data(), count);
  }
  out.cannot_open = file.get_status() == input_file::status::cannot_open;
  if (file.get_status() != input_file::status::end) return stop(file.describe());
  return out;
}

}  // namespace memkit::io
