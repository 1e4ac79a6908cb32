// Exceptions as C API statuses (memkit/capi.hpp).
#include <new>

#include "memkit/capi.hpp"

namespace memkit::capi {

failure get_current_failure() noexcept {
  try {
    throw;
  } catch (const out_of_memory& e) {
    return {MEMKIT_OUT_OF_MEMORY, e.what(), e.get_details()};
  } catch (const invalid_argument& e) {
    return {MEMKIT_INVALID_ARGUMENT, e.what(), {}};
  } catch (const unavailable& e) {
    return {MEMKIT_UNAVAILABLE, e.what(), {}};
  } catch (const std::bad_alloc&) {
    return {MEMKIT_OUT_OF_MEMORY, "[memkit] the host ran out of memory", {}};
  } catch (const std::exception& e) {
    return {MEMKIT_INTERNAL_ERROR, e.what(), {}};
  } catch (...) {
    return {MEMKIT_INTERNAL_ERROR, "[memkit] an unknown exception", {}};
  }
}

}  // namespace memkit::capi
