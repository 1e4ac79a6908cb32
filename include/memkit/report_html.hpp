// The HTML report of `memkit replay --html`: one self-contained page (inline SVG drawn
// by inline script, no network) with, for each trace, its figures, a timeline of live
// and reserved bytes that zooms and pans, and for a moment chosen on it (first the peak
// of reserved) the map of segments and the blocks live then (docs/TRACES.md, "The HTML
// report").
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
  std::optional<peak_breakdown> at_peak;
};

// The page. Elements the script fills, for tests: #timeline-<i> and #segments-<i> get
// an <svg> each and data-rendered="true" once drawn; #blocks-<i> the table of live
// blocks and data-moment, data-live-blocks, data-live-bytes, data-reserved-bytes; the
// body data-rendered="true" and data-render-ms (the script's time) once all is drawn.
std::string render_html(const std::vector<report_section>& sections);

}  // namespace memkit::trace
