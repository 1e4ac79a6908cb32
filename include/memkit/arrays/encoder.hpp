// The encoder: batches dispatches before they go to the queue, binds memory for
// the handles they use, and never emits a dispatch that breaks the backend's
// aliasing rule.
//
// dispatch() records a kernel and its bindings and pins the handles (no memory
// yet). submit() places the whole batch in order, each unbound handle at its
// first use, excluding every buffer that would conflict with any later use in
// the batch ("zero it, then write it while reading a, b, c" places the output
// away from a, b and c at the zero-fill). A conflict with memory bound in an
// earlier batch is fixed by moving the side with fewer bytes to copy: the writable
// binding (rebound at once for access::write, through a copy kernel inserted
// before the dispatch for access::read_write) or the read-only bindings in its
// buffer (each through a copy). Handles whose last owner is gone are released
// right after their last use in the batch, so later dispatches of the same batch
// reuse their memory (queue order makes that safe). Then the batch runs through
// the submit function, and the pins are dropped: memory of dropped handles is
// released after its kernels are submitted, never before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "memkit/arrays/binding.hpp"
#include "memkit/arrays/context.hpp"

namespace memkit::arrays {

// A batch as it goes to the queue.
struct batch {
  std::vector<dispatch_record> dispatches;
  std::uint64_t fence = 0;  // the queue's fence value covering the batch
};

struct encoder_options {
  std::string relocation_kernel = "copy";  // bindings: [source read, destination write]
};

class encoder {
 public:
  // Runs a placed batch on the device and returns the fence value covering it.
  using submit_function = std::function<std::uint64_t(const batch&)>;

  // Without a submit function the batch is only placed, and the fence is the
  // backend's get_submitted(queue).
  explicit encoder(context& target, submit_function submit = {}, encoder_options options = {});
  ~encoder();  // submits what is pending
  encoder(const encoder&) = delete;
  encoder& operator=(const encoder&) = delete;

  // Records one dispatch. Throws invalid_argument for an empty handle, or, under
  // the WebGPU rule, one handle bound twice with a writable use (no placement can
  // make that valid: bind it once as read_write).
  void dispatch(kernel work, std::span<const binding> bindings);
  void dispatch(kernel work, std::initializer_list<binding> bindings) {
    dispatch(std::move(work), std::span<const binding>(bindings.begin(), bindings.size()));
  }

  // Places, runs and releases the pending batch; returns it (valid until the
  // next submit).
  const batch& submit();

  std::size_t get_pending() const noexcept { return pending_.size(); }
  context& get_context() const noexcept { return context_; }

 private:
  struct pending_binding {
    detail::handle_state* state;
    access use;
  };
  struct pending_dispatch {
    kernel work;
    std::vector<pending_binding> bindings;
  };

  context& context_;
  submit_function submit_;
  encoder_options options_;
  std::vector<pending_dispatch> pending_;
  batch last_;
};

}  // namespace memkit::arrays
