#include "integrations/vtable_fixture.hpp"

namespace memkit_fixture {

counter::~counter() = default;
int counter::first(int x) { return x + 1; }
int counter::second(int x) { return x + 2; }
int counter::third(int x) { return x + 3; }

}  // namespace memkit_fixture

extern "C" memkit_fixture::counter* memkit_fixture_make_counter() {
  return new memkit_fixture::counter;
}
