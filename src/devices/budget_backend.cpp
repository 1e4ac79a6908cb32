#include "devices/budget_backend.hpp"

namespace memkit::devices_detail {

bool shared_budget::claim(std::size_t bytes) {
  std::size_t now = held.load(std::memory_order_relaxed);
  for (;;) {
    const std::size_t cap = limit.load(std::memory_order_relaxed);
    if (cap != 0 && (now > cap || bytes > cap - now)) {
      refusals.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (held.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed)) break;
  }
  const std::size_t after = now + bytes;
  std::size_t peak = peak_held.load(std::memory_order_relaxed);
  while (after > peak && !peak_held.compare_exchange_weak(peak, after, std::memory_order_relaxed)) {
  }
  return true;
}

address_t budget_backend::allocate_segment(std::size_t bytes) {
  if (!budget_.claim(bytes)) return 0;
  address_t address = 0;
  try {
    address = upstream_.allocate_segment(bytes);
  } catch (...) {
    budget_.give_back(bytes);
    throw;
  }
  if (!address) budget_.give_back(bytes);
  return address;
}

void budget_backend::free_segment(address_t address, std::size_t bytes) {
  upstream_.free_segment(address, bytes);
  budget_.give_back(bytes);
}

page_id budget_backend::create_page(std::size_t bytes) {
  if (!budget_.claim(bytes)) return 0;
  page_id page = 0;
  try {
    page = upstream_.create_page(bytes);
  } catch (...) {
    budget_.give_back(bytes);
    throw;
  }
  if (!page) budget_.give_back(bytes);
  return page;
}

void budget_backend::release_page(page_id page, std::size_t bytes) {
  upstream_.release_page(page, bytes);
  budget_.give_back(bytes);
}

}  // namespace memkit::devices_detail
