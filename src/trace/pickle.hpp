// A writer of Python pickles for the few kinds of values a PyTorch memory snapshot
// holds: dicts, lists, strings, integers, None and booleans (docs/TRACES.md, "Writing
// PyTorch snapshots").
//
// Protocol 4 without frames, and only the opcodes that both Python's unpickler and
// the JavaScript one in PyTorch's memory_viz page read: PROTO, EMPTY_DICT,
// EMPTY_LIST, MARK, SETITEMS, APPENDS, SHORT_BINUNICODE, BINUNICODE, BININT1,
// BININT2, BININT, LONG1, NONE, NEWTRUE, NEWFALSE, MEMOIZE, BINGET, LONG_BINGET and
// STOP. Containers are filled in batches of 1,000 items, as Python's pickler does
// (memory_viz spreads a batch into one call's arguments). Strings that are not UTF-8
// have each bad byte replaced by U+FFFD, so Python can decode them.
//
// Values are written in order, as a document is read: begin_dict, then key and value
// alternately, then end_dict; begin_list, values, end_list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace memkit::trace {

class pickle_writer {
 public:
  pickle_writer();

  void begin_dict();
  void end_dict();
  void begin_list();
  void end_list();

  void string(std::string_view text);
  // A string written once and referred to after (a dict key, an action name).
  void shared_string(std::string_view text);
  void integer(std::int64_t value);
  void unsigned_integer(std::uint64_t value);
  void none();
  void boolean(bool value);

  // Remembers the container just begun, so that `repeat` can put the same object
  // again (a call stack that many events share); returns its memo index.
  std::uint32_t remember();
  void repeat(std::uint32_t memo_index);

  // The pickle, with its STOP; the writer is empty after.
  std::string finish();

 private:
  struct container {
    bool dict = false;
    bool expecting_value = false;  // dict: a key was written
    std::uint32_t batch = 0;       // items since the last MARK
  };
  void before_value();
  void after_value();
  void flush_batch(container& c);
  void put_get(std::uint32_t memo_index);
  void put_text(std::string_view utf8);

  std::string out_;
  std::vector<container> open_;
  std::uint32_t memo_count_ = 0;
  std::unordered_map<std::string, std::uint32_t> shared_;
};

}  // namespace memkit::trace
