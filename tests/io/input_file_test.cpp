// Input files: plain or gzip, one member or several, and every way a file can be
// wrong said in words; nothing read past the ceiling.
#include "io/input_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <fstream>
#include <string>

namespace memkit::io {
namespace {

using status = input_file::status;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "memkit-input-" + std::to_string(::getpid()) + "-" + name;
}

std::string gzip(const std::string& text) {
  const std::string path = temp_path("gzip-scratch.gz");
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  return bytes;
}

std::string write(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Reads the whole file in small chunks; the status it ended with.
status read_all(const std::string& path, std::string& text, std::uint64_t max_bytes = 1 << 20) {
  input_file file(path, max_bytes);
  char chunk[7];
  while (const std::size_t n = file.read(chunk, sizeof(chunk))) text.append(chunk, n);
  return file.get_status();
}

TEST(input_file, reads_plain_and_gzip_alike) {
  const std::string text = "a,1,100,0\nf,1\n";
  std::string plain, zipped;
  EXPECT_EQ(read_all(write("plain", text), plain), status::end);
  EXPECT_EQ(read_all(write("one.gz", gzip(text)), zipped), status::end);
  EXPECT_EQ(plain, text);
  EXPECT_EQ(zipped, text);
  std::string empty;
  EXPECT_EQ(read_all(write("empty", ""), empty), status::end);
  EXPECT_EQ(empty, "");
}

TEST(input_file, reads_every_member_of_a_concatenation) {
  std::string text;
  EXPECT_EQ(read_all(write("two.gz", gzip("first\n") + gzip("second\n")), text), status::end);
  EXPECT_EQ(text, "first\nsecond\n");
}

TEST(input_file, names_what_is_wrong) {
  const std::string whole = gzip(std::string(5000, 'x'));
  std::string text;
  input_file missing(temp_path("no-such-file"));
  EXPECT_EQ(missing.get_status(), status::cannot_open);
  EXPECT_NE(missing.describe().find("No such file"), std::string::npos);

  EXPECT_EQ(read_all(write("cut.gz", whole.substr(0, whole.size() / 2)), text), status::truncated);
  std::string corrupt = whole;
  corrupt[12] = static_cast<char>(corrupt[12] ^ 0x55);
  corrupt[13] = static_cast<char>(corrupt[13] ^ 0x55);
  text.clear();
  const status s = read_all(write("corrupt.gz", corrupt), text);
  EXPECT_TRUE(s == status::corrupt || s == status::truncated) << static_cast<int>(s);

  text.clear();
  EXPECT_EQ(read_all(write("trailing.gz", whole + "garbage"), text), status::trailing_data);
  EXPECT_EQ(text, std::string(5000, 'x'));  // what came before is read
  input_file trailing(temp_path("trailing.gz"));
  char chunk[8192];
  while (trailing.read(chunk, sizeof(chunk))) {
  }
  EXPECT_NE(trailing.describe().find("not another gzip stream"), std::string::npos);
}

TEST(input_file, stops_at_the_ceiling) {
  std::string text;
  // A small bomb: 4 MiB of one byte, a few KiB compressed.
  const std::string bomb = gzip(std::string(4 << 20, 'a'));
  EXPECT_LT(bomb.size(), 64u << 10);
  EXPECT_EQ(read_all(write("bomb.gz", bomb), text, 1 << 20), status::too_large);
  EXPECT_LE(text.size(), 1u << 20);
  text.clear();
  EXPECT_EQ(read_all(write("big", std::string((1 << 20) + 1, 'a')), text, 1 << 20),
            status::too_large);
  text.clear();
  EXPECT_EQ(read_all(write("fits", std::string(1 << 20, 'a')), text, 1 << 20), status::end);
}

}  // namespace
}  // namespace memkit::io
