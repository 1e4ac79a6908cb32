// A class with virtual methods in a shared library of its own (vtable_fixture.cpp),
// standing in for PyTorch's allocator class in torch_abi_test.cpp.
#pragma once

namespace memkit_fixture {

class counter {
 public:
  virtual ~counter();
  virtual int first(int x);   // x + 1
  virtual int second(int x);  // x + 2
  virtual int third(int x);   // x + 3
};

}  // namespace memkit_fixture

extern "C" memkit_fixture::counter* memkit_fixture_make_counter();
