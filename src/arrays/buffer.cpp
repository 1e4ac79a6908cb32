// Lazy host and device copies (the table at the top of memkit/arrays/buffer.hpp).
#include "memkit/arrays/buffer.hpp"

#include <limits>
#include <new>
#include <string>
#include <utility>

#include "memkit/errors.hpp"

namespace memkit::arrays {

namespace {
constexpr std::align_val_t kHostAlignment{64};

device_data& require_data(backend& device) {
  device_data* data = find_capability<device_data>(device);
  if (!data) {
    throw invalid_argument("[memkit::buffer_allocator] " + device.get_facts().name +
                           " has no data interface (transfers, host pointer)");
  }
  return *data;
}
}  // namespace

buffer_allocator::buffer_allocator(allocator& memory, buffer_allocator_options options)
    : memory_(memory),
      device_(memory.get_backend()),
      data_(require_data(device_)),
      rules_(options.rules ? *options.rules : get_storage_rules(device_.get_facts(), data_)) {}

storage_layout buffer_allocator::get_layout(dtype type) const noexcept {
  return get_storage_layout(type, rules_);
}

bool buffer_allocator::is_zero_copy(dtype type) const noexcept {
  return device_.get_facts().unified && get_layout(type).is_identity();
}

buffer_statistics buffer_allocator::get_statistics() const {
  std::lock_guard lock(mutex_);
  return statistics_;
}

buffer buffer_allocator::allocate(dtype type, std::size_t count, queue_id queue) {
  const storage_layout layout = get_layout(type);
  const device_facts& facts = device_.get_facts();
  const bool overflows = count > std::numeric_limits<std::size_t>::max() / 8;
  if (overflows || layout.get_stored_bytes(count) > facts.max_buffer) {
    throw invalid_argument("[memkit::buffer_allocator::allocate] " + std::to_string(count) + " " +
                           get_name(type) + " elements need " +
                           (overflows ? std::string("more than 2^61")
                                      : std::to_string(layout.get_stored_bytes(count))) +
                           " stored bytes (" + std::to_string(layout.device_element_bytes) +
                           " an element, " + rules_.name + " layout), over " + facts.name +
                           "'s largest binding of " + std::to_string(facts.max_buffer) + " bytes");
  }
  if (queue >= facts.queue_count) {
    throw invalid_argument("[memkit::buffer_allocator::allocate] queue " + std::to_string(queue) +
                           " does not exist on " + facts.name);
  }
  {
    std::lock_guard lock(mutex_);
    statistics_.buffers++;
  }
  return buffer(*this, layout, count, queue);
}

buffer::buffer(buffer_allocator& owner, storage_layout layout, std::size_t count, queue_id queue)
    : owner_(&owner),
      layout_(layout),
      count_(count),
      queue_(queue),
      write_queue_(queue),
      zero_copy_(owner.is_zero_copy(layout.type)) {}

buffer::buffer(buffer&& other) noexcept { *this = std::move(other); }

buffer& buffer::operator=(buffer&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    layout_ = other.layout_;
    count_ = std::exchange(other.count_, 0);
    queue_ = other.queue_;
    write_queue_ = other.write_queue_;
    used_queues_ = std::exchange(other.used_queues_, 0);
    pending_queues_ = std::exchange(other.pending_queues_, 0);
    device_ = std::exchange(other.device_, 0);
    host_ = std::exchange(other.host_, nullptr);
    zero_copy_ = other.zero_copy_;
    host_current_ = std::exchange(other.host_current_, false);
    device_current_ = std::exchange(other.device_current_, false);
  }
  return *this;
}

buffer::~buffer() { release(); }

void buffer::release() noexcept {
  if (!owner_) return;
  const std::size_t stored = device_ ? get_stored_bytes() : 0;
  const std::size_t host = host_ ? get_host_bytes() : 0;
  if (device_) owner_->memory_.free(device_);
  if (host_) ::operator delete[](host_, kHostAlignment);
  {
    std::lock_guard lock(owner_->mutex_);
    owner_->statistics_.device_bytes -= stored;
    owner_->statistics_.host_bytes -= host;
    owner_->statistics_.buffers--;
  }
  owner_ = nullptr;
  device_ = 0;
  host_ = nullptr;
}

void buffer::allocate_device() {
  const std::size_t stored = get_stored_bytes();
  const allocation block = owner_->memory_.allocate(stored, queue_);
  if (block.address % layout_.offset_alignment != 0) {
    owner_->memory_.free(block.address);
    throw invariant_violation("[memkit::buffer::get_device] block at offset " +
                              std::to_string(block.address % layout_.offset_alignment) +
                              " from a binding boundary of " +
                              std::to_string(layout_.offset_alignment) + " bytes");
  }
  device_ = block.address;
  std::lock_guard lock(owner_->mutex_);
  buffer_statistics& s = owner_->statistics_;
  s.device_allocations++;
  s.device_bytes += stored;
  if (s.device_bytes > s.peak_device_bytes) s.peak_device_bytes = s.device_bytes;
}

void buffer::allocate_host() {
  const std::size_t bytes = get_host_bytes();
  host_ = static_cast<unsigned char*>(::operator new[](bytes, kHostAlignment));
  std::lock_guard lock(owner_->mutex_);
  buffer_statistics& s = owner_->statistics_;
  s.host_allocations++;
  s.host_bytes += bytes;
  if (s.host_bytes > s.peak_host_bytes) s.peak_host_bytes = s.host_bytes;
}

void buffer::wait_for_device() {
  backend& device = owner_->device_;
  for (queue_id q = 0; pending_queues_ != 0; ++q, pending_queues_ >>= 1) {
    if (pending_queues_ & 1) device.wait({q, device.get_submitted(q)});
  }
}

void* buffer::get_host(access mode) {
  if (!owner_ || count_ == 0) return nullptr;
  device_data& data = owner_->data_;
  if (zero_copy_) {
    if (!device_) allocate_device();
    // Device work may still write or read these bytes: let it finish first.
    wait_for_device();
    return data.get_host_pointer(device_);
  }
  if (!host_) allocate_host();
  if (mode != access::write && !host_current_ && device_current_) {
    // Ordered after the last device write; the download returns with the data.
    data.copy_to_host(host_, device_, get_host_bytes(), write_queue_, layout_.conversion);
    std::lock_guard lock(owner_->mutex_);
    owner_->statistics_.copies_to_host++;
    owner_->statistics_.bytes_to_host += count_ * layout_.device_element_bytes;
  }
  host_current_ = true;
  if (mode != access::read) device_current_ = false;
  return host_;
}

address_t buffer::get_device(access mode, queue_id queue) {
  if (!owner_ || count_ == 0) return 0;
  backend& device = owner_->device_;
  if (queue >= device.get_facts().queue_count || queue >= 64) {
    throw invalid_argument("[memkit::buffer::get_device] queue " + std::to_string(queue) +
                           " does not exist on " + device.get_facts().name +
                           " (buffers track queues 0..63)");
  }
  if (!device_) allocate_device();
  if (queue != queue_ && !(used_queues_ >> queue & 1)) {
    owner_->memory_.record_use(device_, queue);
    used_queues_ |= std::uint64_t{1} << queue;
  }
  pending_queues_ |= std::uint64_t{1} << queue;
  if (mode != access::read) write_queue_ = queue;
  if (zero_copy_) return device_;
  if (mode != access::write && !device_current_ && host_current_) {
    owner_->data_.copy_to_device(device_, host_, get_host_bytes(), queue, layout_.conversion);
    std::lock_guard lock(owner_->mutex_);
    owner_->statistics_.copies_to_device++;
    owner_->statistics_.bytes_to_device += count_ * layout_.device_element_bytes;
  }
  device_current_ = true;
  if (mode != access::read) host_current_ = false;
  return device_;
}

}  // namespace memkit::arrays
