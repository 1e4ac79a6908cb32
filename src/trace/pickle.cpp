#include "trace/pickle.hpp"

#include <stdexcept>

namespace memkit::trace {
namespace {

// Opcodes (Python's Lib/pickletools.py documents each).
constexpr char kProto = '\x80';
constexpr char kEmptyDict = '}';
constexpr char kEmptyList = ']';
constexpr char kMark = '(';
constexpr char kSetItems = 'u';
constexpr char kAppends = 'e';
constexpr char kShortBinUnicode = '\x8c';
constexpr char kBinUnicode = 'X';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kBinInt = 'J';
constexpr char kLong1 = '\x8a';
constexpr char kNone = 'N';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kMemoize = '\x94';
constexpr char kBinGet = 'h';
constexpr char kLongBinGet = 'j';
constexpr char kStop = '.';

constexpr std::uint32_t kBatch = 1000;  // items per SETITEMS / APPENDS, as Python writes them

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// The length of the valid UTF-8 sequence at text[at], or 0 when it is not one.
std::size_t utf8_sequence(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;   // no overlong forms
    if (lead == 0xed) high = 0x9f;  // no surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;  // not above U+10FFFF
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  if (byte(at + 1) < low || byte(at + 1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(at + i) < 0x80 || byte(at + i) > 0xbf) return 0;
  }
  return length;
}

}  // namespace

pickle_writer::pickle_writer() {
  out_ += kProto;
  out_ += '\x04';
}

void pickle_writer::before_value() {
  if (open_.empty()) return;
  const container& c = open_.back();
  if (c.batch == 0 && (!c.dict || !c.expecting_value)) out_ += kMark;
}

void pickle_writer::after_value() {
  if (open_.empty()) return;
  container& c = open_.back();
  if (c.dict && !c.expecting_value) {
    c.expecting_value = true;  // the key is written; its value comes next
    return;
  }
  c.expecting_value = false;
  if (++c.batch == kBatch) flush_batch(c);
}

void pickle_writer::flush_batch(container& c) {
  if (c.batch == 0) return;
  out_ += c.dict ? kSetItems : kAppends;
  c.batch = 0;
}

void pickle_writer::begin_dict() {
  before_value();
  out_ += kEmptyDict;
  open_.push_back({true, false, 0});
}

void pickle_writer::end_dict() {
  if (open_.empty() || !open_.back().dict || open_.back().expecting_value) {
    throw std::logic_error("[memkit::trace::pickle_writer] end_dict without an open dict");
  }
  flush_batch(open_.back());
  open_.pop_back();
  after_value();
}

void pickle_writer::begin_list() {
  before_value();
  out_ += kEmptyList;
  open_.push_back({false, false, 0});
}

void pickle_writer::end_list() {
  if (open_.empty() || open_.back().dict) {
    throw std::logic_error("[memkit::trace::pickle_writer] end_list without an open list");
  }
  flush_batch(open_.back());
  open_.pop_back();
  after_value();
}

void pickle_writer::put_text(std::string_view text) {
  std::string valid;
  valid.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = utf8_sequence(text, at);
    if (length == 0) {
      valid += "\xEF\xBF\xBD";  // U+FFFD for the byte that starts no valid sequence
      ++at;
    } else {
      valid.append(text.substr(at, length));
      at += length;
    }
  }
  if (valid.size() < 256) {
    out_ += kShortBinUnicode;
    put_le(out_, valid.size(), 1);
  } else {
    out_ += kBinUnicode;
    put_le(out_, valid.size(), 4);
  }
  out_ += valid;
}

void pickle_writer::string(std::string_view text) {
  before_value();
  put_text(text);
  after_value();
}

void pickle_writer::shared_string(std::string_view text) {
  before_value();
  const auto it = shared_.find(std::string(text));
  if (it != shared_.end()) {
    put_get(it->second);
  } else {
    put_text(text);
    out_ += kMemoize;
    shared_.emplace(std::string(text), memo_count_++);
  }
  after_value();
}

void pickle_writer::unsigned_integer(std::uint64_t value) {
  before_value();
  if (value < 0x100) {
    out_ += kBinInt1;
    put_le(out_, value, 1);
  } else if (value < 0x10000) {
    out_ += kBinInt2;
    put_le(out_, value, 2);
  } else if (value <= 0x7fffffff) {
    out_ += kBinInt;
    put_le(out_, value, 4);
  } else {
    // Little-endian two's complement, as short as it goes; a zero byte on top keeps a
    // value whose top bit is set positive.
    int bytes = 0;
    for (std::uint64_t rest = value; rest != 0; rest >>= 8) ++bytes;
    const bool sign_byte = (value >> (8 * bytes - 1)) & 1;
    out_ += kLong1;
    put_le(out_, static_cast<std::uint64_t>(bytes + (sign_byte ? 1 : 0)), 1);
    put_le(out_, value, bytes);
    if (sign_byte) out_ += '\0';
  }
  after_value();
}

void pickle_writer::integer(std::int64_t value) {
  if (value >= 0) {
    unsigned_integer(static_cast<std::uint64_t>(value));
    return;
  }
  before_value();
  const auto bits = static_cast<std::uint64_t>(value);
  if (value >= -0x80000000LL) {
    out_ += kBinInt;
    put_le(out_, bits, 4);
  } else {
    // The fewest bytes whose top bit still reads negative.
    int bytes = 8;
    while (bytes > 1 && ((bits >> (8 * (bytes - 1))) & 0xff) == 0xff &&
           ((bits >> (8 * (bytes - 1) - 1)) & 1)) {
      --bytes;
    }
    out_ += kLong1;
    put_le(out_, static_cast<std::uint64_t>(bytes), 1);
    put_le(out_, bits, bytes);
  }
  after_value();
}

void pickle_writer::none() {
  before_value();
  out_ += kNone;
  after_value();
}

void pickle_writer::boolean(bool value) {
  before_value();
  out_ += value ? kNewTrue : kNewFalse;
  after_value();
}

std::uint32_t pickle_writer::remember() {
  out_ += kMemoize;
  return memo_count_++;
}

void pickle_writer::put_get(std::uint32_t memo_index) {
  if (memo_index < 0x100) {
    out_ += kBinGet;
    put_le(out_, memo_index, 1);
  } else {
    out_ += kLongBinGet;
    put_le(out_, memo_index, 4);
  }
}

void pickle_writer::repeat(std::uint32_t memo_index) {
  before_value();
  put_get(memo_index);
  after_value();
}

std::string pickle_writer::finish() {
  if (!open_.empty()) {
    throw std::logic_error("[memkit::trace::pickle_writer] finish with a container still open");
  }
  out_ += kStop;
  std::string done = std::move(out_);
  out_.clear();
  out_ += kProto;
  out_ += '\x04';
  memo_count_ = 0;
  shared_.clear();
  return done;
}

}  // namespace memkit::trace
