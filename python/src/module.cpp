// memkit._memkit: the compiled half of the Python package (python/memkit). The
// allocator over any backend of this build, replay and plan; the package's
// __init__.py adds the Python-side conveniences. memkit's C++ exceptions become the
// exceptions of memkit.errors, with their details.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "memkit/allocator.hpp"
#include "memkit/backends/cpu.hpp"
#include "memkit/backends/sim.hpp"
#include "memkit/capi.hpp"
#include "memkit/errors.hpp"
#include "memkit/planner.hpp"
#include "memkit/pytorch_snapshot.hpp"
#include "memkit/replay.hpp"
#include "memkit/report_html.hpp"
#include "memkit/trace.hpp"
#include "memkit/version.hpp"
#include "reports/reports.hpp"
#if MEMKIT_HAVE_CUDA
#include "memkit/backends/cuda.hpp"
#endif
#if MEMKIT_HAVE_VULKAN
#include "memkit/backends/vulkan.hpp"
#endif

namespace py = pybind11;

namespace {

// An error raised by the Python API itself, named by its Python function.
memkit::invalid_argument bad_argument(const char* function, const std::string& what) {
  return memkit::invalid_argument(std::string("[") + function + "] " + what);
}

// Text for Python from bytes that may not be UTF-8 (a path in a message).
py::str to_text(const std::string& text) {
  PyObject* object =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (!object) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(object);
}

// Sets the Python error to memkit.errors.<name>(message, **details).
void raise(const char* name, const std::string& message, const py::dict& details = py::dict()) {
  try {
    const py::object type = py::module_::import("memkit.errors").attr(name);
    const py::object error = type(to_text(message), **details);
    PyErr_SetObject(type.ptr(), error.ptr());
  } catch (py::error_already_set& e) {
    e.restore();  // memkit.errors could not be imported: that error instead
  }
}

void translate_exception(std::exception_ptr pointer) {
  try {
    if (pointer) std::rethrow_exception(pointer);
  } catch (const memkit::out_of_memory& e) {
    const memkit::out_of_memory::details& d = e.get_details();
    py::dict details;
    details["requested_bytes"] = d.requested_bytes;
    details["active_bytes"] = d.active_bytes;
    details["cached_bytes"] = d.cached_bytes;
    details["reserved_bytes"] = d.reserved_bytes;
    details["limit_bytes"] = d.limit_bytes;
    details["largest_free_bytes"] = d.largest_free_bytes;
    raise("OutOfMemoryError", e.what(), details);
  } catch (const memkit::invalid_argument& e) {
    raise("InvalidArgument", e.what());
  } catch (const memkit::trace::trace_error& e) {
    raise("TraceError", e.what());
  } catch (const memkit::planner::planner_error& e) {
    raise("PlannerError", e.what());
  } catch (const memkit::invariant_violation& e) {
    raise("InvariantViolation", e.what());
  } catch (const memkit::unavailable& e) {
    raise("UnavailableError", e.what());
  }
}

memkit::pool_policy parse_policy(const std::string& name, const char* function) {
  if (name == "automatic") return memkit::pool_policy::automatic;
  if (name == "segments") return memkit::pool_policy::segments;
  if (name == "arena") return memkit::pool_policy::arena;
  throw bad_argument(function, "policy " + memkit::quote_input(name) +
                                   ": expected 'automatic', 'segments' or 'arena'");
}

void check_slack(double arena_slack, const char* function) {
  if (!std::isfinite(arena_slack) || arena_slack < 0 || arena_slack > 10) {
    throw bad_argument(
        function, "arena_slack " + std::to_string(arena_slack) + " is not a number from 0 to 10");
  }
}

std::vector<std::string> available_backends() {
  std::vector<std::string> names = {"cpu", "sim"};
#if MEMKIT_HAVE_CUDA
  names.push_back("cuda");
#endif
#if MEMKIT_HAVE_VULKAN
  names.push_back("vulkan");
#endif
  return names;
}

// What Allocator(backend=..., ...) takes besides the allocator's own options.
struct backend_settings {
  std::string name;
  std::size_t capacity = 0;     // sim: 0 is the default (80 GiB)
  std::size_t granularity = 0;  // sim: 0 is the default (2 MiB)
  int device = 0;               // cuda: the device; vulkan: -1 picks one
  std::string cuda_memory = "device";
  bool webgpu_compatible = false;  // vulkan
};

std::unique_ptr<memkit::backend> make_backend(const backend_settings& s) {
  const char* function = "memkit.Allocator";
  if (s.name != "sim" && (s.capacity || s.granularity)) {
    throw bad_argument(function, "capacity and granularity are options of the sim backend");
  }
  if (s.name == "cpu") return std::make_unique<memkit::cpu_backend>();
  if (s.name == "sim") {
    memkit::sim_options options;
    if (s.capacity) options.capacity = s.capacity;
    if (s.granularity) {
      if ((s.granularity & (s.granularity - 1)) != 0) {
        throw bad_argument(
            function, "granularity " + std::to_string(s.granularity) + " is not a power of two");
      }
      options.granularity = s.granularity;
    }
    return std::make_unique<memkit::sim_backend>(options);
  }
  if (s.name == "cuda") {
#if MEMKIT_HAVE_CUDA
    memkit::cuda_options options;
    options.device = s.device;
    if (s.cuda_memory == "device") {
      options.memory = memkit::cuda_memory::device;
    } else if (s.cuda_memory == "managed") {
      options.memory = memkit::cuda_memory::unified;
    } else if (s.cuda_memory == "pinned_host") {
      options.memory = memkit::cuda_memory::pinned_host;
    } else {
      throw bad_argument(function, "cuda_memory " + memkit::quote_input(s.cuda_memory) +
                                       ": expected 'device', 'managed' or 'pinned_host'");
    }
    const memkit::cuda_availability availability = memkit::check_cuda_device(s.device);
    if (!availability.available)
      throw memkit::unavailable("[memkit.Allocator] " + availability.reason);
    return std::make_unique<memkit::cuda_backend>(options);
#else
    throw memkit::unavailable("[memkit.Allocator] this build of memkit has no CUDA backend");
#endif
  }
  if (s.name == "vulkan") {
#if MEMKIT_HAVE_VULKAN
    memkit::vulkan_options options;
    options.device_index = s.device;
    options.webgpu_compatible = s.webgpu_compatible;
    try {
      return std::make_unique<memkit::vulkan_backend>(options);
    } catch (const memkit::vulkan_unavailable& e) {
      throw memkit::unavailable(std::string("[memkit.Allocator] ") + e.what());
    }
#else
    throw memkit::unavailable("[memkit.Allocator] this build of memkit has no Vulkan backend");
#endif
  }
  throw bad_argument(function, "backend " + memkit::quote_input(s.name) +
                                   ": expected 'cpu', 'sim', 'cuda' or 'vulkan'");
}

// The fields of the C API's memkit_statistics, by the same names and in its order.
py::dict to_dict(const memkit::statistics& s) {
  py::dict out;
  for (const auto& field : memkit::capi::statistics_fields) out[field.name] = field.get(s);
  return out;
}

// The allocator and the backend under it, destroyed together (the allocator first).
struct allocator_state {
  std::unique_ptr<memkit::backend> backend;
  std::unique_ptr<memkit::allocator> allocator;
};

class py_allocator {
 public:
  py_allocator(const backend_settings& settings, const std::string& policy,
               std::optional<std::size_t> memory_limit, std::optional<std::size_t> cache_limit,
               std::optional<std::size_t> wired_limit, double arena_slack, bool validate,
               bool thread_cache, bool plan_loops, bool order_queues) {
    const char* function = "memkit.Allocator";
    memkit::allocator_options options;
    options.policy = parse_policy(policy, function);
    check_slack(arena_slack, function);
    options.arena_slack = arena_slack;
    options.validate = validate;
    options.thread_cache = thread_cache;
    options.plan_loops = plan_loops;
    options.order_queues = order_queues;
    // In the options 0 means "the default"; a 0 given here means none at all, as the
    // setters take it, and is set once the allocator exists.
    if (memory_limit.value_or(0) > 0) options.memory_limit = *memory_limit;
    if (cache_limit.value_or(0) > 0) options.cache_limit = *cache_limit;
    if (wired_limit.value_or(0) > 0) options.wired_limit = *wired_limit;
    auto state = std::make_shared<allocator_state>();
    state->backend = make_backend(settings);
    state->allocator = std::make_unique<memkit::allocator>(*state->backend, options);
    if (memory_limit == std::size_t{0}) state->allocator->set_memory_limit(0);
    if (cache_limit == std::size_t{0}) state->allocator->set_cache_limit(0);
    state_ = std::move(state);
  }

  // The state for one call; a closed allocator is an error naming the call. The
  // shared pointer keeps it alive through a call that released the GIL.
  std::shared_ptr<allocator_state> get(const char* function) const {
    if (!state_) throw bad_argument(function, "the allocator is closed");
    return state_;
  }
  memkit::allocator& use(const char* function) const { return *get(function)->allocator; }

  void close() { state_.reset(); }
  bool closed() const { return !state_; }

 private:
  std::shared_ptr<allocator_state> state_;
};

// An address given as an int or as anything with an `address` (an Allocation).
memkit::address_t to_address(const py::handle& value) {
  if (py::isinstance<py::int_>(value)) return value.cast<memkit::address_t>();
  return py::getattr(value, "address").cast<memkit::address_t>();
}

py::list to_list(const std::vector<memkit::segment_view>& segments) {
  py::list out;
  for (const memkit::segment_view& s : segments) {
    py::list blocks;
    for (const memkit::block_view& b : s.blocks) {
      py::dict block;
      block["offset"] = b.offset;
      block["size"] = b.size;
      block["requested"] = b.requested;
      block["live"] = b.live;
      blocks.append(std::move(block));
    }
    py::dict segment;
    segment["base"] = s.base;
    segment["size"] = s.size;
    segment["small"] = s.small;
    segment["blocks"] = std::move(blocks);
    out.append(std::move(segment));
  }
  return out;
}

std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// memkit replay: one JSON object per trace, as `memkit replay --json` prints it, and
// the HTML report when asked for; the PyTorch snapshot written to snapshot_path when it
// is not empty.
std::pair<std::string, std::string> replay(const std::vector<std::string>& paths,
                                           const std::string& backend, const std::string& policy,
                                           std::size_t capacity, std::size_t granularity,
                                           double arena_slack, bool plan_loops,
                                           std::uint32_t device_lag, std::uint64_t lag_seed,
                                           bool min_capacity, bool at_peak, bool validate,
                                           bool html, const std::string& snapshot_path) {
  const char* function = "memkit.replay";
  memkit::trace::replay_options options;
  if (backend == "cpu") {
    options.device = memkit::trace::backend_kind::cpu;
  } else if (backend != "sim") {
    throw bad_argument(function,
                       "backend " + memkit::quote_input(backend) + ": expected 'sim' or 'cpu'");
  }
  const bool sim = options.device == memkit::trace::backend_kind::sim;
  if (min_capacity && !sim) throw bad_argument(function, "min_capacity needs backend='sim'");
  if (device_lag > 0 && !sim) throw bad_argument(function, "device_lag needs backend='sim'");
  if (capacity == 0) throw bad_argument(function, "capacity is 0");
  if (granularity == 0 || (granularity & (granularity - 1)) != 0) {
    throw bad_argument(function,
                       "granularity " + std::to_string(granularity) + " is not a power of two");
  }
  check_slack(arena_slack, function);
  options.policy = parse_policy(policy, function);
  options.capacity = capacity;
  options.granularity = granularity;
  options.arena_slack = arena_slack;
  options.plan_loops = plan_loops;
  options.device_lag = device_lag;
  options.lag_seed = lag_seed;
  options.validate = validate;

  py::gil_scoped_release unlocked;
  // Every trace is read first: a bad one stops the call before any replay.
  std::vector<std::unique_ptr<memkit::trace::trace_data>> traces;
  for (const std::string& path : paths) {
    traces.push_back(std::make_unique<memkit::trace::trace_data>(memkit::trace::read(path)));
  }
  std::vector<memkit::trace::report_section> sections;
  nlohmann::json out = nlohmann::json::array();
  for (const auto& trace : traces) {
    memkit::trace::report_section section;
    section.trace = trace.get();
    section.options = options;
    section.result = memkit::trace::replay(*trace, options);
    if (min_capacity && section.result.completed) {
      section.min_capacity = memkit::trace::find_min_capacity(
          *trace, options, section.result.peak_live_bytes, section.result.peak_reserved_bytes);
    }
    if (at_peak) section.at_peak = memkit::trace::calculate_peak_breakdown(*trace, options);
    if (html) section.observation = memkit::trace::observe(*trace, options);
    out.push_back(memkit::reports::replay_json(section));
    sections.push_back(std::move(section));
  }
  if (!snapshot_path.empty()) {
    std::vector<memkit::trace::allocator_history> histories;
    histories.reserve(traces.size());
    std::vector<memkit::trace::snapshot_device> devices;
    for (const auto& trace : traces) {
      histories.push_back(memkit::trace::record_history(*trace, options));
      devices.push_back({trace.get(), &histories.back()});
    }
    const std::string pickle = memkit::trace::write_pytorch_snapshot(devices);
    std::FILE* file = std::fopen(snapshot_path.c_str(), "wb");
    const bool written =
        file && std::fwrite(pickle.data(), 1, pickle.size(), file) == pickle.size();
    if (file && std::fclose(file) != 0) file = nullptr;
    if (!written || !file) {
      throw bad_argument(
          function, "pytorch_snapshot " + memkit::quote_input(snapshot_path) + ": cannot write it");
    }
  }
  return {dump(out), html ? memkit::trace::render_html(sections) : std::string()};
}

// memkit plan: the JSON object `memkit plan --json` prints, and the offsets.
std::string plan(const std::string& source, const std::optional<std::string>& instance_text,
                 bool from_trace, std::optional<std::int64_t> capacity, double time_limit,
                 bool minimize, const std::optional<std::string>& output, bool offsets) {
  const char* function = "memkit.plan";
  if (capacity && (*capacity < 1 || *capacity > memkit::planner::kMaxTotalBytes)) {
    throw bad_argument(function, "capacity " + std::to_string(*capacity) +
                                     " is not a whole number of bytes from 1 to 2^62");
  }
  if (!std::isfinite(time_limit) || time_limit < 0) {
    throw bad_argument(
        function, "time_limit " + std::to_string(time_limit) + " is not a number of seconds >= 0");
  }
  if (output && (*output == source)) {
    throw bad_argument(function, "output " + *output + " is the input");
  }
  py::gil_scoped_release unlocked;
  memkit::planner::instance inst;
  if (instance_text) {
    std::istringstream in(*instance_text);
    inst = memkit::planner::parse_instance(in, source);
  } else {
    inst = from_trace ? memkit::planner::instance_from_trace(source)
                      : memkit::planner::read_instance(source);
  }
  memkit::planner::options opts;
  opts.capacity = capacity;
  opts.time_limit_seconds = time_limit;
  opts.minimize_within_capacity = minimize;
  const memkit::planner::result res = memkit::planner::solve(inst, opts);
  const memkit::planner::validation check = memkit::planner::validate(inst, res.best, capacity);
  if (res.fits && !check) {
    throw memkit::invariant_violation("[memkit.plan] the plan is invalid: " + check.message);
  }
  const bool write_file = res.fits && output;
  if (write_file) memkit::planner::write_plan(*output, inst, res.best);
  nlohmann::json out = memkit::reports::plan_json({.source = source,
                                                   .from_trace = from_trace,
                                                   .buffers = inst.buffers.size(),
                                                   .result = &res,
                                                   .capacity = capacity,
                                                   .time_limit_seconds = time_limit,
                                                   .fits = res.fits,
                                                   .output = write_file ? output : std::nullopt});
  if (offsets) out["offsets"] = res.best.offsets;
  return dump(out);
}

}  // namespace

PYBIND11_MODULE(_memkit, m) {
  m.doc() = "memkit's compiled core; use the package memkit.";
  m.attr("__version__") = memkit::version_string;
  py::register_exception_translator(translate_exception);

  m.def("available_backends", &available_backends,
        "The backends this build has: 'cpu', 'sim' and, where built, 'cuda' and 'vulkan'.");

  const memkit::allocator_options defaults;
  py::class_<py_allocator>(m, "Allocator")
      .def(py::init([](const std::string& backend, const std::string& policy,
                       std::optional<std::size_t> memory_limit,
                       std::optional<std::size_t> cache_limit,
                       std::optional<std::size_t> wired_limit, double arena_slack, bool validate,
                       bool thread_cache, bool plan_loops, bool order_queues, std::size_t capacity,
                       std::size_t granularity, int device, const std::string& cuda_memory,
                       bool webgpu_compatible) {
             const backend_settings settings{backend, capacity,    granularity,
                                             device,  cuda_memory, webgpu_compatible};
             return std::make_unique<py_allocator>(settings, policy, memory_limit, cache_limit,
                                                   wired_limit, arena_slack, validate, thread_cache,
                                                   plan_loops, order_queues);
           }),
           py::arg("backend") = "cpu", py::kw_only(), py::arg("policy") = "automatic",
           py::arg("memory_limit") = py::none(), py::arg("cache_limit") = py::none(),
           py::arg("wired_limit") = py::none(), py::arg("arena_slack") = defaults.arena_slack,
           py::arg("validate") = defaults.validate, py::arg("thread_cache") = defaults.thread_cache,
           py::arg("plan_loops") = defaults.plan_loops,
           py::arg("order_queues") = defaults.order_queues, py::arg("capacity") = 0,
           py::arg("granularity") = 0, py::arg("device") = 0, py::arg("cuda_memory") = "device",
           py::arg("webgpu_compatible") = false)
      .def(
          "allocate",
          [](const py_allocator& self, std::size_t nbytes, memkit::queue_id queue) {
            const auto state = self.get("memkit.Allocator.allocate");
            memkit::allocation a;
            {
              py::gil_scoped_release unlocked;  // it may wait for queued work
              a = state->allocator->allocate(nbytes, queue);
            }
            return std::make_pair(a.address, a.size);
          },
          py::arg("nbytes"), py::arg("queue") = 0)
      .def(
          "free",
          [](const py_allocator& self, const py::handle& address) {
            const memkit::address_t at = to_address(address);
            const auto state = self.get("memkit.Allocator.free");
            py::gil_scoped_release unlocked;
            state->allocator->free(at);
          },
          py::arg("address"))
      .def(
          "record_use",
          [](const py_allocator& self, const py::handle& address, memkit::queue_id queue) {
            self.use("memkit.Allocator.record_use").record_use(to_address(address), queue);
          },
          py::arg("address"), py::arg("queue"))
      .def(
          "size",
          [](const py_allocator& self, const py::handle& address) {
            return self.use("memkit.Allocator.size").get_size(to_address(address));
          },
          py::arg("address"))
      .def("statistics",
           [](const py_allocator& self) {
             return to_dict(self.use("memkit.Allocator.statistics").get_statistics());
           })
      .def("calculate_statistics",
           [](const py_allocator& self) {
             return to_dict(
                 self.use("memkit.Allocator.calculate_statistics").calculate_statistics());
           })
      .def(
          "set_memory_limit",
          [](const py_allocator& self, std::size_t bytes) {
            return self.use("memkit.Allocator.set_memory_limit").set_memory_limit(bytes);
          },
          py::arg("nbytes"))
      .def(
          "set_cache_limit",
          [](const py_allocator& self, std::size_t bytes) {
            return self.use("memkit.Allocator.set_cache_limit").set_cache_limit(bytes);
          },
          py::arg("nbytes"))
      .def(
          "set_wired_limit",
          [](const py_allocator& self, std::size_t bytes) {
            return self.use("memkit.Allocator.set_wired_limit").set_wired_limit(bytes);
          },
          py::arg("nbytes"))
      .def("get_memory_limit",
           [](const py_allocator& self) {
             return self.use("memkit.Allocator.get_memory_limit").get_memory_limit();
           })
      .def("get_cache_limit",
           [](const py_allocator& self) {
             return self.use("memkit.Allocator.get_cache_limit").get_cache_limit();
           })
      .def("get_wired_limit",
           [](const py_allocator& self) {
             return self.use("memkit.Allocator.get_wired_limit").get_wired_limit();
           })
      .def("clear_cache",
           [](const py_allocator& self) {
             const auto state = self.get("memkit.Allocator.clear_cache");
             py::gil_scoped_release unlocked;
             state->allocator->clear_cache();
           })
      .def("reset_peak",
           [](const py_allocator& self) { self.use("memkit.Allocator.reset_peak").reset_peak(); })
      .def(
          "start_recording",
          [](const py_allocator& self, const std::string& path) {
            self.use("memkit.Allocator.start_recording").start_recording(path);
          },
          py::arg("path"))
      .def("stop_recording",
           [](const py_allocator& self) {
             return self.use("memkit.Allocator.stop_recording").stop_recording();
           })
      .def("largest_free_block",
           [](const py_allocator& self) {
             return self.use("memkit.Allocator.largest_free_block").calculate_largest_free_block();
           })
      .def("snapshot",
           [](const py_allocator& self) {
             return to_list(self.use("memkit.Allocator.snapshot").calculate_segments());
           })
      .def("validate",
           [](const py_allocator& self) { self.use("memkit.Allocator.validate").validate(); })
      .def("device",
           [](const py_allocator& self) {
             const memkit::device_facts& facts =
                 self.get("memkit.Allocator.device")->backend->get_facts();
             py::dict out;
             out["name"] = facts.name;
             out["capacity"] = facts.capacity;
             out["granularity"] = facts.granularity;
             out["max_buffer"] = facts.max_buffer;
             out["alignment"] = facts.alignment;
             out["max_wired"] = facts.max_wired;
             out["queue_count"] = facts.queue_count;
             out["unified"] = facts.unified;
             out["virtual_memory"] = facts.virtual_memory;
             return out;
           })
      .def("close", &py_allocator::close)
      .def_property_readonly("closed", &py_allocator::closed);

  m.def("allocator_defaults", [] {
    const memkit::allocator_options d;
    py::dict out;
    out["policy"] = memkit::reports::policy_name(d.policy);
    out["arena_slack"] = d.arena_slack;
    out["validate"] = d.validate;
    out["thread_cache"] = d.thread_cache;
    out["plan_loops"] = d.plan_loops;
    out["order_queues"] = d.order_queues;
    return out;
  });
  m.def("replay", &replay, py::arg("paths"), py::kw_only(), py::arg("backend"), py::arg("policy"),
        py::arg("capacity"), py::arg("granularity"), py::arg("arena_slack"), py::arg("plan_loops"),
        py::arg("device_lag"), py::arg("lag_seed"), py::arg("min_capacity"), py::arg("at_peak"),
        py::arg("validate"), py::arg("html"), py::arg("pytorch_snapshot"));
  m.def("replay_defaults", [] {
    const memkit::trace::replay_options replay_defaults;
    py::dict out;
    out["policy"] = memkit::reports::policy_name(replay_defaults.policy);
    out["capacity"] = replay_defaults.capacity;
    out["granularity"] = replay_defaults.granularity;
    out["arena_slack"] = replay_defaults.arena_slack;
    out["plan_loops"] = replay_defaults.plan_loops;
    return out;
  });
  m.def("plan", &plan, py::arg("source"), py::kw_only(), py::arg("instance_text"),
        py::arg("from_trace"), py::arg("capacity"), py::arg("time_limit"), py::arg("minimize"),
        py::arg("output"), py::arg("offsets"));
}
