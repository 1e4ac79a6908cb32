// Input files read in chunks, plain or gzip (one or more members), within bounds:
// at most kMaxBytes once decompressed, and nothing but gzip members after the
// first one. The readers of traces and planning instances share it; each turns a
// failed status into its own error, with the file and line.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace memkit::io {

class input_file {
 public:
  // Decompressed bytes a file may hold: far past any real trace (the largest the
  // project knows is ~100 MB), short of what a gzip bomb would take from memory.
  static constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 30;

  enum class status {
    ok,
    end,
    cannot_open,
    read_error,
    truncated,
    corrupt,
    trailing_data,
    too_large
  };

  explicit input_file(const std::string& path, std::uint64_t max_bytes = kMaxBytes);
  ~input_file();
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;

  // Up to `capacity` bytes into `out`. 0 once the file has ended or failed: then
  // get_status() says which.
  std::size_t read(char* out, std::size_t capacity);
  status get_status() const { return status_; }
  // What went wrong, in words ("truncated gzip stream", ...); empty while ok or at the end.
  std::string describe() const;
  bool is_gzip() const { return gzip_; }

 private:
  bool refill();  // more raw bytes behind what is left; false at the end of the file
  std::size_t read_gzip(char* out, std::size_t capacity);
  std::size_t fail(status s) {
    status_ = s;
    return 0;
  }

  std::FILE* file_ = nullptr;
  int error_number_ = 0;            // errno of a failed open or read
  bool gzip_ = false;               // the file starts with gzip's magic bytes
  bool at_eof_ = false;             // no raw bytes left in the file
  bool between_members_ = false;    // a gzip member ended; another may follow
  z_stream zlib_{};                 // inflate state (gzip_ only)
  std::vector<unsigned char> raw_;  // raw bytes read, from zlib_.next_in on unused
  std::uint64_t produced_ = 0;      // bytes handed out so far
  std::uint64_t max_bytes_;         // at most this many
  std::string zlib_message_;        // zlib's words for a corrupt stream
  status status_ = status::ok;
};

// A whole file as text, within input_file's bounds. Binary input ends the reading at
// its first NUL byte. When the text is not whole, `problem` says why (the NUL byte
// as `nul_problem`, else input_file::describe()) and `line` is where (from 1);
// `cannot_open` tells a file that could not be opened at all.
struct whole_text {
  std::string text;
  std::string problem;  // empty when the file was read whole
  std::uint64_t line = 0;
  bool cannot_open = false;
};
whole_text read_whole_text(const std::string& path, const std::string& nul_problem);

}  // namespace memkit::io
