#include "reports/reports.hpp"

#include <string>
#include <utility>

namespace memkit::reports {

const char* policy_name(pool_policy policy) noexcept {
  return policy == pool_policy::segments ? "segments"
         : policy == pool_policy::arena  ? "arena"
                                         : "automatic";
}

const char* backend_name(trace::backend_kind device) noexcept {
  return device == trace::backend_kind::cpu ? "cpu" : "sim";
}

double ratio(std::size_t numerator, std::size_t denominator) noexcept {
  return denominator == 0 ? 0.0 : static_cast<double>(numerator) / static_cast<double>(denominator);
}

double height_over_load(std::int64_t height, std::int64_t load) noexcept {
  return load > 0 ? static_cast<double>(height) / static_cast<double>(load) : 1.0;
}

double per_step(std::uint64_t count, std::uint64_t steps) noexcept {
  return steps == 0 ? 0.0 : static_cast<double>(count) / static_cast<double>(steps);
}

std::optional<std::size_t> metadata_bytes(const trace::trace_data& trace, std::string_view key) {
  const std::string_view text = trace.get_metadata(key);
  if (text.empty()) return std::nullopt;
  try {
    std::size_t used = 0;
    const unsigned long long value = std::stoull(std::string(text), &used);
    if (used != text.size()) return std::nullopt;
    return static_cast<std::size_t>(value);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

nlohmann::json replay_json(const trace::report_section& section) {
  const trace::trace_data& trace = *section.trace;
  const trace::replay_result& result = section.result;
  const bool sim = section.options.device == trace::backend_kind::sim;
  // The steps the "after the warm-up" figures count (read only with has_unmaps_after_warmup).
  const std::uint64_t steps_after_warmup = trace.step_starts.size() - trace.warmup_steps;
  nlohmann::json out;
  out["trace"] = trace.name;
  out["path"] = trace.path;
  out["format"] = std::string(trace::to_string(trace.source_format));
  out["backend"] = backend_name(section.options.device);
  out["policy"] = policy_name(section.options.policy);
  out["arena_slack"] = section.options.arena_slack;
  out["plan_loops"] = section.options.plan_loops;
  out["small_segments_in_arena"] = section.options.small_segments_in_arena;
  out["order_queues"] = section.options.order_queues;
  if (sim) {
    out["capacity_bytes"] = section.options.capacity;
    out["granularity_bytes"] = section.options.granularity;
  }
  out["completed"] = result.completed;
  if (!result.completed) {
    out["error"] = result.failure;
    out["failed_line"] = result.failed_line;
  }
  out["events"] = result.events;
  out["allocations"] = result.allocations;
  out["streams"] = trace.streams.size();
  out["peak_live_bytes"] = result.peak_live_bytes;
  out["peak_reserved_bytes"] = result.peak_reserved_bytes;
  out["peak_active_bytes"] = result.peak_active_bytes;
  out["reserved_over_live"] = ratio(result.peak_reserved_bytes, result.peak_live_bytes);
  out["backend_allocs"] = result.backend_allocs;
  out["backend_frees"] = result.backend_frees;
  out["maps"] = result.maps;
  out["unmaps"] = result.unmaps;
  out["moves"] = result.final_statistics.moves;
  out["returns"] = result.final_statistics.returns;
  if (trace.steps > 0) {
    out["steps"] = trace.steps;
    out["warmup_steps"] = trace.warmup_steps;
    if (result.completed) {
      out["maps_per_step"] = per_step(result.maps, trace.steps);
      out["unmaps_per_step"] = per_step(result.unmaps, trace.steps);
      if (!result.unmaps_by_step.empty()) out["unmaps_by_step"] = result.unmaps_by_step;
    }
  }
  if (result.has_unmaps_after_warmup) {
    out["unmaps_after_warmup_per_step"] = per_step(result.unmaps_after_warmup, steps_after_warmup);
    out["maps_after_warmup_per_step"] = per_step(result.maps_after_warmup, steps_after_warmup);
    out["moves_after_warmup_per_step"] = per_step(result.moves_after_warmup, steps_after_warmup);
    out["returns_after_warmup_per_step"] =
        per_step(result.returns_after_warmup, steps_after_warmup);
  }
  if (section.options.device_lag > 0) {
    out["device_lag"] = section.options.device_lag;
    if (section.options.lag_seed) out["lag_seed"] = section.options.lag_seed;
    out["unfinished_waits"] = result.waits;
  }
  out["queue_orders"] = result.final_statistics.queue_orders;
  if (section.options.empty_cache_each_step) out["empty_cache_each_step"] = true;
  const loop_report& loop = result.loop;
  out["loop_plan"] = {{"period", loop.period},
                      {"load_bytes", loop.load_bytes},
                      {"height_bytes", loop.height_bytes},
                      {"placed", loop.placed},
                      {"plans", loop.plans},
                      {"searches", loop.searches},
                      {"declined", loop.declined},
                      {"declined_load_bytes", loop.declined_load_bytes},
                      {"declined_height_bytes", loop.declined_height_bytes},
                      {"losses", loop.losses},
                      {"missed", loop.missed},
                      {"revivals", loop.revivals}};
  out["ns_per_event"] = result.ns_per_event;
  if (result.has_unmaps_after_warmup)
    out["ns_per_event_after_warmup"] = result.ns_per_event_after_warmup;
  if (sim) {
    out["simulated_backend_ns"] = result.simulated_backend_ns;
    if (result.has_unmaps_after_warmup)
      out["simulated_backend_ns_after_warmup_per_step"] =
          per_step(result.simulated_backend_ns_after_warmup, steps_after_warmup);
    out["fences_recorded"] = result.fences_recorded;
  }
  out["replay_ns"] = result.loop_ns;
  if (section.min_capacity) {
    out["min_capacity_bytes"] = section.min_capacity->min_capacity_bytes;
    out["min_capacity_over_live"] =
        ratio(section.min_capacity->min_capacity_bytes, result.peak_live_bytes);
    out["min_capacity_probes"] = section.min_capacity->probes;
  }
  if (section.at_peak) {
    const trace::peak_breakdown& p = *section.at_peak;
    out["at_peak"] = {{"event", p.event},
                      {"line", p.line},
                      {"step", p.step},
                      {"reserved_bytes", p.reserved_bytes},
                      {"live_bytes", p.live_bytes},
                      {"small_segment_bytes", p.small_segment_bytes},
                      {"small_block_bytes", p.small_block_bytes},
                      {"other_bytes", p.other_bytes},
                      {"other_block_bytes", p.other_block_bytes},
                      {"partial_page_bytes", p.partial_page_bytes},
                      {"untouched_page_bytes", p.untouched_page_bytes}};
  }
  if (const auto reserved = metadata_bytes(trace, "pytorch_peak_reserved")) {
    out["pytorch_peak_reserved_bytes"] = *reserved;
    out["pytorch_reserved_over_live"] = ratio(*reserved, result.peak_live_bytes);
  }
  if (const auto allocated = metadata_bytes(trace, "pytorch_peak_allocated")) {
    out["pytorch_peak_allocated_bytes"] = *allocated;
  }
  nlohmann::json metadata = nlohmann::json::object();
  for (const auto& [key, value] : trace.metadata) metadata[key] = value;
  out["metadata"] = std::move(metadata);
  return out;
}

nlohmann::json plan_json(const plan_summary& summary) {
  const planner::result& res = *summary.result;
  return {
      {"source", summary.source},
      {"from_trace", summary.from_trace},
      {"buffers", summary.buffers},
      {"load_bytes", res.load_bytes},
      {"height_bytes", res.height_bytes},
      {"ratio", height_over_load(res.height_bytes, res.load_bytes)},
      {"greedy_height_bytes", res.greedy_height_bytes},
      {"greedy_ratio", height_over_load(res.greedy_height_bytes, res.load_bytes)},
      {"optimal", res.optimal},
      {"fits", summary.fits},
      {"capacity_bytes", summary.capacity ? nlohmann::json(*summary.capacity) : nullptr},
      {"time_limit_seconds", summary.time_limit_seconds},
      {"seconds", res.seconds},
      {"search_nodes", res.nodes},
      {"parts", res.parts},
      {"output", summary.output ? nlohmann::json(*summary.output) : nullptr},
  };
}

}  // namespace memkit::reports
