#include "output_file.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace memkit::tools {

void write_whole_file(const std::string& path, std::string_view text, const char* function) {
  // A device or a pipe (/dev/stdout) is written in place: renaming over it would
  // replace the device node with a file.
  std::error_code error;
  const auto type = std::filesystem::status(path, error).type();
  const bool in_place = !error && type != std::filesystem::file_type::regular &&
                        type != std::filesystem::file_type::not_found;
  const std::string temporary = in_place ? path : path + ".tmp-" + std::to_string(::getpid());
  auto fail = [&](const std::string& what) {
    if (!in_place) std::remove(temporary.c_str());
    throw std::runtime_error(std::string("[") + function + "] " + path + ": " + what);
  };
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  if (!file) fail("cannot open for writing");
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const bool flushed = std::fflush(file) == 0 && (in_place || ::fsync(::fileno(file)) == 0);
  if (std::fclose(file) != 0 || !written || !flushed) fail("write failed (disk full?)");
  if (!in_place && std::rename(temporary.c_str(), path.c_str()) != 0)
    fail("cannot replace the file");
}

void check_not_an_input(const std::string& output, const std::vector<std::string>& inputs,
                        const char* function) {
  for (const std::string& input : inputs) {
    std::error_code error;
    if (input == output || std::filesystem::equivalent(input, output, error)) {
      throw std::runtime_error(std::string("[") + function + "] " + output +
                               " is an input; an output never overwrites one");
    }
  }
}

}  // namespace memkit::tools
