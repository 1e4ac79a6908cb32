// integrations/pytorch/torch_abi: the vtable copy and the version file, on a class of a
// library of its own (PyTorch's calls themselves are tested on the GPU machine:
// python/tests/test_torch.py).
#include "torch_abi.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "integrations/vtable_fixture.hpp"

namespace {

using memkit_fixture::counter;

int times_ten(void*, int x) { return x * 10; }
int times_hundred(void*, int x) { return x * 100; }

constexpr const char* kVtable = "_ZTVN14memkit_fixture7counterE";
constexpr const char* kFirst = "_ZN14memkit_fixture7counter5firstEi";
constexpr const char* kThird = "_ZN14memkit_fixture7counter5thirdEi";

void* open_fixture(const std::string& path) {
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(library, nullptr) << dlerror();
  return library;
}

counter* make_counter(void* library) {
  auto* make = reinterpret_cast<counter* (*)()>(dlsym(library, "memkit_fixture_make_counter"));
  return make();
}

// One test: override_methods works once per process.
TEST(torch_abi, one_object_answers_with_the_given_functions_and_its_class_does_not) {
  void* library = open_fixture(MEMKIT_VTABLE_FIXTURE);
  ASSERT_NE(library, nullptr);
  counter* changed = make_counter(library);
  counter* other = make_counter(library);
  const void* vtable = dlsym(library, kVtable);
  ASSERT_NE(vtable, nullptr);

  const std::vector<std::string> missing = memkit::torch_abi::override_methods(
      changed, vtable, {library},
      {{kFirst, reinterpret_cast<void*>(&times_ten)},
       {kThird, reinterpret_cast<void*>(&times_hundred), -1},  // the slot before third's
       {"_ZN14memkit_fixture7counter6fourthEi", reinterpret_cast<void*>(&times_ten)}});
  EXPECT_EQ(missing, std::vector<std::string>{"_ZN14memkit_fixture7counter6fourthEi"});
  EXPECT_EQ(changed->first(2), 20);
  EXPECT_EQ(changed->second(2), 200);
  EXPECT_EQ(changed->third(2), 5);
  EXPECT_EQ(other->first(2), 3);
  EXPECT_EQ(other->second(2), 4);
  EXPECT_TRUE(memkit::torch_abi::has_overridden_vtable(changed));
  EXPECT_FALSE(memkit::torch_abi::has_overridden_vtable(other));
  EXPECT_NE(dynamic_cast<counter*>(changed), nullptr);  // the type entry is copied

  // Once only: a second call changes nothing and names every method.
  EXPECT_EQ(memkit::torch_abi::override_methods(other, vtable, {library},
                                                {{kFirst, reinterpret_cast<void*>(&times_ten)}})
                .size(),
            1u);
  EXPECT_EQ(other->first(2), 3);
  delete changed;  // the destructor's slot is the class's
  delete other;
}

TEST(torch_abi, the_version_is_read_beside_the_library_and_is_zero_without_one) {
  namespace fs = std::filesystem;
  const fs::path root =
      fs::temp_directory_path() / ("memkit_torch_abi_" + std::to_string(getpid()));
  fs::create_directories(root / "torch" / "lib");
  const fs::path copy = root / "torch" / "lib" / "libfixture_copy.so";
  fs::copy_file(MEMKIT_VTABLE_FIXTURE, copy, fs::copy_options::overwrite_existing);
  std::ofstream(root / "torch" / "version.py") << "from typing import Optional\n"
                                               << "__version__ = '2.11.0+cu130'\n";
  void* library = open_fixture(copy.string());
  ASSERT_NE(library, nullptr);
  EXPECT_EQ(memkit::torch_abi::get_torch_version(dlsym(library, kVtable)),
            (std::pair<int, int>{2, 11}));
  void* plain = open_fixture(MEMKIT_VTABLE_FIXTURE);
  EXPECT_EQ(memkit::torch_abi::get_torch_version(dlsym(plain, kVtable)),
            (std::pair<int, int>{0, 0}));
  dlclose(library);
  dlclose(plain);
  fs::remove_all(root);
}

TEST(torch_abi, an_out_of_memory_is_left_to_the_caller_without_pytorch) {
  EXPECT_NO_THROW(memkit::torch_abi::throw_out_of_memory("[memkit::test] out of memory"));
}

}  // namespace
