// Submitted batches as a JSON plan for runners outside the process.
#include <nlohmann/json.hpp>
#include <set>

#include "memkit/arrays/plan.hpp"

namespace memkit::arrays {

std::string export_plan(const context& source, std::span<const batch> batches,
                        std::span<const handle> results) {
  nlohmann::json plan;
  plan["rule"] = to_string(source.get_rule());
  std::set<std::uint32_t> buffers;
  nlohmann::json batch_list = nlohmann::json::array();
  for (const batch& b : batches) {
    nlohmann::json dispatches = nlohmann::json::array();
    for (const dispatch_record& d : b.dispatches) {
      nlohmann::json bindings = nlohmann::json::array();
      for (const bound_range& r : d.bindings) {
        buffers.insert(r.buffer);
        bindings.push_back({{"handle", r.handle},
                            {"buffer", r.buffer},
                            {"offset", r.offset},
                            {"size", r.size},
                            {"access", to_string(r.use)}});
      }
      dispatches.push_back({{"kernel", d.work.name},
                            {"arguments", d.work.arguments},
                            {"relocation", d.relocation},
                            {"bindings", std::move(bindings)}});
    }
    batch_list.push_back({{"fence", b.fence}, {"dispatches", std::move(dispatches)}});
  }
  nlohmann::json result_list = nlohmann::json::array();
  for (const handle& h : results) {
    const std::optional<buffer_range> range = h.get_range();
    if (!range) continue;
    buffers.insert(range->buffer);
    result_list.push_back({{"handle", h.get_id()},
                           {"buffer", range->buffer},
                           {"offset", range->offset},
                           {"size", range->size}});
  }
  nlohmann::json buffer_list = nlohmann::json::array();
  for (std::uint32_t id : buffers) {
    buffer_list.push_back({{"id", id}, {"size", source.get_buffer_size(id)}});
  }
  plan["buffers"] = std::move(buffer_list);
  plan["batches"] = std::move(batch_list);
  plan["results"] = std::move(result_list);
  return plan.dump();
}

}  // namespace memkit::arrays
