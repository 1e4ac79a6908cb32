// Files the commands write: whole or not at all, and never over one of their inputs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace memkit::tools {

// Writes `text` to a temporary file beside `path` and renames it over `path` once
// it is complete: a failed write (a full disk) leaves no truncated file and
// whatever was at `path` before. Throws std::runtime_error naming `function` and
// the path.
void write_whole_file(const std::string& path, std::string_view text, const char* function);

// Throws std::runtime_error, naming `function`, when `output` is one of `inputs`
// (the same file, by any path).
void check_not_an_input(const std::string& output, const std::vector<std::string>& inputs,
                        const char* function);

}  // namespace memkit::tools
