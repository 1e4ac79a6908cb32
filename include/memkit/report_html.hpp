// The HTML report of `memkit replay --html`: one self-contained page (inline SVG drawn
// by inline script, no network) with, for each trace, its figures, a timeline of live
// and reserved bytes, and the map of segments at the moment of peak reserved.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "memkit/replay.hpp"

namespace memkit::trace {

struct report_section {
  const trace_data* trace = nullptr;
  replay_options options;
  replay_result result;
  replay_observation observation;
  std::optional<min_capacity_result> min_capacity;
};

// The page. Elements the script fills, for tests: #timeline-<i> and #segments-<i> get
// an <svg> each and data-rendered="true" once drawn.
std::string render_html(const std::vector<report_section>& sections);

}  // namespace memkit::trace
