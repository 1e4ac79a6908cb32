#include "trace/report_html.hpp"

#include <charconv>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace memkit::trace {
namespace {

std::string escape_html(std::string_view text) {
  std::string escaped;
  for (const char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

std::size_t metadata_bytes(const trace_data& trace, std::string_view key) {
  const std::string_view text = trace.get_metadata(key);
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc{} && end == text.data() + text.size() ? value : 0;
}

nlohmann::json section_data(const report_section& section) {
  const trace_data& trace = *section.trace;
  nlohmann::json data;
  data["name"] = trace.name;
  data["events"] = trace.events.size();
  data["peak_live"] = section.result.peak_live_bytes;
  data["peak_reserved"] = section.observation.peak_reserved_bytes;
  data["peak_event"] = section.observation.peak_event;
  data["live_at_peak"] = section.observation.live_at_peak_bytes;
  data["pytorch_peak_reserved"] = metadata_bytes(trace, "pytorch_peak_reserved");
  data["min_capacity"] = section.min_capacity ? section.min_capacity->min_capacity_bytes : 0;
  // Compact arrays: [event, live, reserved] and [size, small, [[offset, size, requested]]].
  nlohmann::json timeline = nlohmann::json::array();
  for (const timeline_sample& sample : section.observation.timeline) {
    timeline.push_back({sample.event, sample.live_bytes, sample.reserved_bytes});
  }
  data["timeline"] = std::move(timeline);
  nlohmann::json segments = nlohmann::json::array();
  for (const segment_view& segment : section.observation.segments_at_peak) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const block_view& block : segment.blocks) {
      if (block.live) blocks.push_back({block.offset, block.size, block.requested});
    }
    segments.push_back({segment.size, segment.small, std::move(blocks)});
  }
  data["segments"] = std::move(segments);
  return data;
}

std::string format_mib(std::size_t bytes) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buffer;
}

std::string format_ratio(std::size_t numerator, std::size_t denominator) {
  if (denominator == 0 || numerator == 0) return "&ndash;";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3f",
                static_cast<double>(numerator) / static_cast<double>(denominator));
  return buffer;
}

// The figures as a plain table, readable without the script.
std::string summary_table(const report_section& section) {
  const trace_data& trace = *section.trace;
  const replay_result& result = section.result;
  std::string rows;
  const auto row = [&](std::string_view label, const std::string& value,
                       const std::string& ratio = "") {
    rows += "<tr><th>" + std::string(label) + "</th><td>" + value + "</td><td>" + ratio +
            "</td></tr>\n";
  };
  row("events", std::to_string(result.events) + " (" + std::to_string(result.allocations) +
                    " allocations, " + std::to_string(trace.streams.size()) +
                    (trace.streams.size() == 1 ? " stream)" : " streams)"));
  row("peak live", format_mib(result.peak_live_bytes), "1.000");
  row("peak reserved", format_mib(result.peak_reserved_bytes),
      format_ratio(result.peak_reserved_bytes, result.peak_live_bytes) + " &times; live");
  if (section.min_capacity) {
    row("min capacity", format_mib(section.min_capacity->min_capacity_bytes),
        format_ratio(section.min_capacity->min_capacity_bytes, result.peak_live_bytes) +
            " &times; live");
  }
  const std::size_t pytorch_reserved = metadata_bytes(trace, "pytorch_peak_reserved");
  if (pytorch_reserved > 0) {
    row("PyTorch peak reserved (recorded)", format_mib(pytorch_reserved),
        format_ratio(pytorch_reserved, result.peak_live_bytes) + " &times; live");
  }
  row("backend calls", std::to_string(result.backend_allocs) + " allocs, " +
                           std::to_string(result.backend_frees) + " frees");
  char cost[64];
  std::snprintf(cost, sizeof cost, "%.0f ns per event", result.ns_per_event);
  row("host cost", cost);
  if (!result.completed) row("out of memory", escape_html(result.failure));
  return "<table class=\"figures\">\n" + rows + "</table>\n";
}

constexpr std::string_view kHead = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>memkit replay</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
  h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
  table.figures { border-collapse: collapse; margin: 8px 0; }
  table.figures th { text-align: left; font-weight: 600; padding: 2px 16px 2px 0; }
  table.figures td { padding: 2px 16px 2px 0; font-variant-numeric: tabular-nums; }
  .chart svg { display: block; }
  .legend span { display: inline-block; margin-right: 16px; }
  .legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
              vertical-align: -1px; }
  .note { color: #666; }
  #tooltip { position: fixed; pointer-events: none; background: #fff; border: 1px solid #999;
             padding: 4px 6px; font-size: 12px; display: none; white-space: pre; }
</style>
</head>
<body>
<h1>memkit replay</h1>
<p class="note">Peak live is the largest sum of requested bytes live at once (the physical
floor); reserved is what the allocator holds from the device. Their ratio is the
fragmentation figure.</p>
)HTML";

constexpr std::string_view kScript = R"HTML(<div id="tooltip"></div>
<script>
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const sections = JSON.parse(document.getElementById("memkit-data").textContent);
  const tooltip = document.getElementById("tooltip");
  const colors = { live: "#1f77b4", reserved: "#d62728", slack: "#9ecae1",
                   free: "#f2d4c9", small: "#fdae6b", edge: "#333" };

  function element(name, attributes, parent) {
    const node = document.createElementNS(NS, name);
    for (const key in attributes) node.setAttribute(key, attributes[key]);
    if (parent) parent.appendChild(node);
    return node;
  }
  function bytes(value) {
    if (value >= 1 << 30) return (value / (1 << 30)).toFixed(2) + " GiB";
    if (value >= 1 << 20) return (value / (1 << 20)).toFixed(1) + " MiB";
    if (value >= 1 << 10) return (value / (1 << 10)).toFixed(1) + " KiB";
    return value + " B";
  }
  // Axis steps of bytes: round numbers of the largest binary unit the range reaches
  // (1 GiB, 2 GiB, ...; 256 MiB, 512 MiB, ...), labelled without trailing zeros.
  const units = [[1 << 30, "GiB"], [1 << 20, "MiB"], [1 << 10, "KiB"], [1, "B"]];
  function byteStep(range, count) {
    const [unit] = units.find(([u]) => range >= u) || units[units.length - 1];
    return niceStep(range / unit, count) * unit;
  }
  function byteLabel(value) {
    if (value === 0) return "0";
    const [unit, name] = units.find(([u]) => value >= u) || units[units.length - 1];
    return Number((value / unit).toFixed(2)) + " " + name;
  }
  // Every chart scales to the page's width; its drawing keeps its own coordinates.
  function chart(width, height) {
    return element("svg", { viewBox: "0 0 " + width + " " + height,
                            style: "width: 100%; max-width: " + width + "px; height: auto" });
  }
  function niceStep(range, count) {
    const raw = range / count, power = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 2.5, 5, 10]) if (raw <= m * power) return m * power;
    return 10 * power;
  }
  function showTip(event, text) {
    tooltip.textContent = text;
    tooltip.style.display = "block";
    tooltip.style.left = (event.clientX + 12) + "px";
    tooltip.style.top = (event.clientY + 12) + "px";
  }
  function hideTip() { tooltip.style.display = "none"; }

  function drawTimeline(host, data, index) {
    const width = 1100, height = 340, left = 80, right = 20, top = 16, bottom = 40;
    const svg = chart(width, height);
    const points = data.timeline;
    const xMax = Math.max(1, data.events);
    let yMax = Math.max(data.peak_reserved, data.peak_live, data.pytorch_peak_reserved,
                        data.min_capacity, 1);
    for (const p of points) yMax = Math.max(yMax, p[1], p[2]);
    const step = byteStep(yMax, 5);
    yMax = Math.ceil(yMax * 1.05 / step) * step;
    const x = e => left + (width - left - right) * e / xMax;
    const y = b => top + (height - top - bottom) * (1 - b / yMax);
    for (let v = 0; v <= yMax + 1; v += step) {
      element("line", { x1: left, x2: width - right, y1: y(v), y2: y(v), stroke: "#eee" }, svg);
      element("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11 }, svg)
          .textContent = byteLabel(v);
    }
    const xStep = niceStep(xMax, 6);
    for (let e = 0; e <= xMax; e += xStep) {
      element("text", { x: x(e), y: height - bottom + 16, "text-anchor": "middle", "font-size": 11 }, svg)
          .textContent = e.toLocaleString("en-US");
    }
    element("text", { x: (left + width - right) / 2, y: height - 4, "text-anchor": "middle",
                      "font-size": 12 }, svg).textContent = "event";
    element("line", { x1: left, x2: left, y1: top, y2: height - bottom, stroke: "#888" }, svg);
    element("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom,
                      stroke: "#888" }, svg);
    function level(value, color, label) {
      if (!value) return;
      element("line", { x1: left, x2: width - right, y1: y(value), y2: y(value), stroke: color,
                        "stroke-dasharray": "6 4" }, svg);
      element("text", { x: width - right - 4, y: y(value) - 4, "text-anchor": "end",
                        "font-size": 11, fill: color }, svg).textContent = label + " " + bytes(value);
    }
    level(data.pytorch_peak_reserved, "#7f7f7f", "PyTorch peak reserved (recorded)");
    level(data.min_capacity, "#2ca02c", "min capacity");
    function line(column, color, id) {
      const path = points.map(p => x(p[0] + 1).toFixed(1) + "," + y(p[column]).toFixed(1));
      path.unshift(x(0).toFixed(1) + "," + y(0).toFixed(1));
      element("polyline", { id: id, points: path.join(" "), fill: "none", stroke: color,
                            "stroke-width": 1.5 }, svg);
    }
    line(2, colors.reserved, "timeline-" + index + "-reserved");
    line(1, colors.live, "timeline-" + index + "-live");
    const peakX = x(data.peak_event + 1);
    element("line", { x1: peakX, x2: peakX, y1: top, y2: height - bottom, stroke: "#333",
                      "stroke-dasharray": "2 3" }, svg);
    const nearRight = peakX > width - right - 220;
    element("text", { x: nearRight ? peakX - 4 : peakX + 4, y: top + 12, "font-size": 11,
                      "text-anchor": nearRight ? "end" : "start" }, svg).textContent =
        "peak reserved (segment map below)";
    const cursor = element("line", { y1: top, y2: height - bottom, stroke: "#999",
                                     visibility: "hidden" }, svg);
    svg.addEventListener("mousemove", ev => {
      const box = svg.getBoundingClientRect();
      const drawnX = (ev.clientX - box.left) * width / box.width;  // the chart is scaled
      const event = (drawnX - left) / (width - left - right) * xMax;
      let best = null;
      for (const p of points) if (best === null || Math.abs(p[0] - event) < Math.abs(best[0] - event)) best = p;
      if (!best || event < 0 || event > xMax) { hideTip(); cursor.setAttribute("visibility", "hidden"); return; }
      cursor.setAttribute("x1", x(best[0] + 1)); cursor.setAttribute("x2", x(best[0] + 1));
      cursor.setAttribute("visibility", "visible");
      showTip(ev, "event " + (best[0] + 1).toLocaleString("en-US") + "\nlive " + bytes(best[1]) +
                  "\nreserved " + bytes(best[2]) +
                  (best[1] ? "\nreserved / live " + (best[2] / best[1]).toFixed(3) : ""));
    });
    svg.addEventListener("mouseleave", () => { hideTip(); cursor.setAttribute("visibility", "hidden"); });
    host.appendChild(svg);
  }

  // Reserved memory laid out as rows of equal byte span, segment after segment, so
  // every pixel stands for the same number of bytes.
  function drawSegments(host, data) {
    const segments = data.segments;
    const total = segments.reduce((sum, s) => sum + s[0], 0);
    const width = 1100, left = 10, rowHeight = 16, gap = 4;
    const rows = Math.max(1, Math.min(40, Math.ceil(segments.length / 2)));
    const span = Math.max(1, Math.ceil(total / rows));
    const usable = width - 2 * left;
    const height = rows * (rowHeight + gap) + gap;
    const svg = chart(width, height);
    function rect(start, length, attributes, tip) {
      // One rectangle per row the range touches.
      let position = start, rest = length;
      while (rest > 0) {
        const row = Math.floor(position / span), inRow = position - row * span;
        const take = Math.min(rest, span - inRow);
        const r = element("rect", Object.assign({
          x: left + usable * inRow / span, y: gap + row * (rowHeight + gap),
          width: Math.max(usable * take / span, 0.3), height: rowHeight }, attributes), svg);
        if (tip) {
          r.addEventListener("mousemove", ev => showTip(ev, tip));
          r.addEventListener("mouseleave", hideTip);
        }
        position += take; rest -= take;
      }
    }
    let base = 0;
    segments.forEach((segment, number) => {
      const [size, small, blocks] = segment;
      const live = blocks.reduce((sum, b) => sum + b[2], 0);
      const held = blocks.reduce((sum, b) => sum + b[1], 0);
      const tip = "segment " + number + (small ? " (small pool)" : "") + ": " + bytes(size) +
                  "\n" + blocks.length + " live blocks, " + bytes(live) + " requested" +
                  "\nfree " + bytes(size - held) + ", rounding " + bytes(held - live);
      rect(base, size, { fill: small ? colors.small : colors.free }, tip);
      for (const b of blocks) {
        const blockTip = "block of " + bytes(b[1]) + " (requested " + bytes(b[2]) + ")\nin " + tip;
        rect(base + b[0], b[1], { fill: colors.slack }, blockTip);
        rect(base + b[0], b[2], { fill: colors.live }, blockTip);
      }
      rect(base, Math.max(1, Math.round(span / usable)), { fill: colors.edge });
      base += size;
    });
    host.appendChild(svg);
  }

  sections.forEach((data, index) => {
    const timeline = document.getElementById("timeline-" + index);
    const segments = document.getElementById("segments-" + index);
    drawTimeline(timeline, data, index);
    timeline.dataset.rendered = "true";
    if (data.segments.length > 0) drawSegments(segments, data);
    else segments.textContent = "No segments at the peak.";
    segments.dataset.rendered = "true";
  });
  document.body.dataset.rendered = "true";
})();
</script>
</body>
</html>
)HTML";

}  // namespace

std::string render_html(const std::vector<report_section>& sections) {
  std::string page(kHead);
  nlohmann::json data = nlohmann::json::array();
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const report_section& section = sections[i];
    const std::string index = std::to_string(i);
    const trace_data& trace = *section.trace;
    page += "<section>\n<h2>" + escape_html(trace.name) + "</h2>\n<p class=\"note\">" +
            escape_html(trace.path) + " (" + std::string(to_string(trace.source_format)) +
            " format), replayed on " +
            (section.options.device == backend_kind::sim ? "the simulated device" : "host memory") +
            "</p>\n" + summary_table(section);
    page +=
        "<h3>Live and reserved bytes over the replay</h3>\n"
        "<div class=\"legend\"><span><i style=\"background:#1f77b4\"></i>live (requested)"
        "</span><span><i style=\"background:#d62728\"></i>reserved</span></div>\n"
        "<div class=\"chart\" id=\"timeline-" +
        index + "\"></div>\n";
    page += "<h3>Segments at peak reserved (" +
            format_mib(section.observation.peak_reserved_bytes) + " reserved, " +
            format_mib(section.observation.live_at_peak_bytes) + " live, after event " +
            std::to_string(section.observation.peak_event + 1) + ", trace line " +
            std::to_string(section.observation.peak_line) + ")</h3>\n" +
            "<div class=\"legend\"><span><i style=\"background:#1f77b4\"></i>requested</span>"
            "<span><i style=\"background:#9ecae1\"></i>block rounding</span>"
            "<span><i style=\"background:#f2d4c9\"></i>free (large pool)</span>"
            "<span><i style=\"background:#fdae6b\"></i>free (small pool)</span>"
            "<span><i style=\"background:#333\"></i>segment start</span></div>\n"
            "<p class=\"note\">Reserved memory laid end to end, segment after segment, in rows "
            "of equal bytes; hover for details.</p>\n"
            "<div class=\"chart\" id=\"segments-" +
            index + "\"></div>\n</section>\n";
    data.push_back(section_data(section));
  }
  // "</" would end the script element early; "<\/" means the same in JSON.
  // Bytes that are not UTF-8 (a trace's metadata, a file name) become U+FFFD.
  std::string json_text = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (std::size_t at = json_text.find("</"); at != std::string::npos;
       at = json_text.find("</", at + 3)) {
    json_text.replace(at, 2, "<\\/");
  }
  page += "<script type=\"application/json\" id=\"memkit-data\">" + json_text + "</script>\n";
  page += kScript;
  return page;
}

}  // namespace memkit::trace
