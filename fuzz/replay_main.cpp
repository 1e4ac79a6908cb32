// Without libFuzzer (gcc builds): runs a fuzz target over the files and folders given,
// so the seed corpus is a regression test under ctest.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::size_t runs = 0;
  auto run_file = [&](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ++runs;
  };
  for (int i = 1; i < argc; ++i) {
    const fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file()) run_file(e.path());
    } else if (fs::is_regular_file(p)) {
      run_file(p);
    } else {
      std::fprintf(stderr, "[memkit::fuzz_replay] %s: no such file or folder\n", argv[i]);
      return 2;
    }
  }
  std::printf("replayed %zu inputs, no finding\n", runs);
  return runs > 0 ? 0 : 2;
}
