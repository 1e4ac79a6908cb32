#include "memkit/report_html.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tuple>

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

// Unsigned LEB128 varints (7 bits a byte, low first), signed ones zigzag-coded, then
// base64: the report's per-block and per-event data, decoded by its script.
class varint_stream {
 public:
  void put(std::uint64_t value) {
    while (value >= 0x80) {
      bytes_ += static_cast<char>((value & 0x7f) | 0x80);
      value >>= 7;
    }
    bytes_ += static_cast<char>(value);
  }
  void put_signed(std::int64_t value) {
    put((static_cast<std::uint64_t>(value) << 1) ^ static_cast<std::uint64_t>(value >> 63));
  }
  void put_difference(std::uint64_t value, std::uint64_t before) {
    put_signed(static_cast<std::int64_t>(value - before));
  }
  std::string base64() const {
    static constexpr char kDigits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes_.size() + 2) / 3 * 4);
    for (std::size_t i = 0; i < bytes_.size(); i += 3) {
      const auto byte = [&](std::size_t k) {
        return k < bytes_.size() ? static_cast<std::uint32_t>(static_cast<unsigned char>(bytes_[k]))
                                 : 0u;
      };
      const std::uint32_t word = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
      out += kDigits[(word >> 18) & 63];
      out += kDigits[(word >> 12) & 63];
      out += i + 1 < bytes_.size() ? kDigits[(word >> 6) & 63] : '=';
      out += i + 2 < bytes_.size() ? kDigits[word & 63] : '=';
    }
    return out;
  }

 private:
  std::string bytes_;
};

// What the script needs to draw any moment (docs/TRACES.md, "The HTML report"):
//   blocks          per block replayed, in allocation order: the event that allocated it
//                   (difference from the block before), its lifetime in events (0: live
//                   to the end), requested bytes, the allocator's rounding, its address
//                   (difference from the block before), 1 + its call stack (0: none) and
//                   its stream;
//   reserved        where reserved bytes changed: event (difference), bytes (difference);
//   segment_events  the allocator's segments and pages: event (difference), kind (0 a
//                   segment, 1 a small-pool segment, 2 its release, 3 a page mapped, 4
//                   unmapped), address (difference), bytes.
nlohmann::json section_data(const report_section& section) {
  const trace_data& trace = *section.trace;
  const replay_observation& seen = section.observation;
  nlohmann::json data;
  data["name"] = trace.name;
  data["events"] = trace.events.size();
  data["replayed"] = seen.events;
  data["completed"] = seen.completed;
  data["peak_live"] = section.result.peak_live_bytes;
  data["peak_reserved"] = seen.peak_reserved_bytes;
  data["peak_event"] = seen.peak_event;
  data["live_at_peak"] = seen.live_at_peak_bytes;
  data["pytorch_peak_reserved"] = metadata_bytes(trace, "pytorch_peak_reserved");
  data["min_capacity"] = section.min_capacity ? section.min_capacity->min_capacity_bytes : 0;
  data["streams"] = trace.streams;

  // Call stacks, each frame written once.
  nlohmann::json frames = nlohmann::json::array();
  nlohmann::json stacks = nlohmann::json::array();
  std::map<std::tuple<std::string_view, std::uint64_t, std::string_view>, std::size_t> frame_index;
  for (const std::vector<frame>& stack : trace.stacks) {
    nlohmann::json indices = nlohmann::json::array();
    for (const frame& f : stack) {
      const auto [it, added] =
          frame_index.try_emplace({f.filename, f.line, f.name}, frame_index.size());
      if (added) frames.push_back({f.filename, f.line, f.name});
      indices.push_back(it->second);
    }
    stacks.push_back(std::move(indices));
  }
  data["frames"] = std::move(frames);
  data["stacks"] = std::move(stacks);

  // Blocks: where each was allocated and freed comes from the trace, its place from the
  // history.
  const std::uint64_t replayed = seen.events;
  std::vector<std::uint64_t> allocated_at(trace.allocations, 0), freed_at(trace.allocations, 0);
  std::uint64_t blocks = 0;
  for (std::uint64_t i = 0; i < replayed; ++i) {
    const event& e = trace.events[i];
    if (e.kind == action::allocate) {
      allocated_at[e.block] = i;
      blocks = e.block + 1;
    } else {
      freed_at[e.block] = i;
    }
  }
  std::vector<address_t> addresses(blocks, 0);
  std::vector<std::size_t> rounding(blocks, 0);
  for (const history_event& entry : seen.history.entries) {
    if (entry.kind != history_event::kinds::alloc || entry.block >= blocks) continue;
    addresses[entry.block] = entry.address;
    rounding[entry.block] = entry.block_size - std::min(entry.block_size, entry.size);
  }
  std::vector<std::size_t> requested(blocks, 0);
  std::vector<std::uint32_t> streams(blocks, 0);
  for (std::uint64_t i = 0; i < replayed; ++i) {
    const event& e = trace.events[i];
    if (e.kind != action::allocate) continue;
    requested[e.block] = e.size;
    streams[e.block] = e.stream;
  }
  varint_stream block_data;
  std::uint64_t previous_event = 0;
  address_t previous_address = 0;
  for (std::uint64_t b = 0; b < blocks; ++b) {
    block_data.put(allocated_at[b] - previous_event);
    previous_event = allocated_at[b];
    block_data.put(freed_at[b] > allocated_at[b] ? freed_at[b] - allocated_at[b] : 0);
    block_data.put(requested[b]);
    block_data.put(rounding[b]);
    block_data.put_difference(addresses[b], previous_address);
    previous_address = addresses[b];
    block_data.put(b < trace.block_stacks.size() ? trace.block_stacks[b] : 0);
    block_data.put(streams[b]);
  }
  data["block_count"] = blocks;
  data["blocks"] = block_data.base64();

  varint_stream reserved;
  std::uint64_t previous_change = 0;
  std::size_t previous_bytes = 0;
  for (const auto& [index, bytes] : seen.reserved_changes) {
    reserved.put(index - previous_change);
    reserved.put_difference(bytes, previous_bytes);
    previous_change = index;
    previous_bytes = bytes;
  }
  data["reserved_count"] = seen.reserved_changes.size();
  data["reserved"] = reserved.base64();

  varint_stream segment_events;
  std::uint64_t segment_count = 0;
  previous_event = 0;
  previous_address = 0;
  for (const history_event& entry : seen.history.entries) {
    using kinds = history_event::kinds;
    if (entry.event >= replayed) break;  // during the request that ran out of memory
    int kind = -1;
    switch (entry.kind) {
      case kinds::segment_alloc:
        kind = entry.small ? 1 : 0;
        break;
      case kinds::segment_free:
        kind = 2;
        break;
      case kinds::segment_map:
        kind = 3;
        break;
      case kinds::segment_unmap:
        kind = 4;
        break;
      default:
        break;
    }
    if (kind < 0) continue;
    segment_events.put(entry.event - previous_event);
    segment_events.put(static_cast<std::uint64_t>(kind));
    segment_events.put_difference(entry.address, previous_address);
    segment_events.put(entry.size);
    previous_event = entry.event;
    previous_address = entry.address;
    ++segment_count;
  }
  data["segment_event_count"] = segment_count;
  data["segment_events"] = segment_events.base64();
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
  const statistics& counts = result.final_statistics;
  if (counts.moves + counts.returns > 0) {
    row("page moves", std::to_string(counts.moves) + " (a map each, no unmap), " +
                          std::to_string(counts.returns) + " back where still mapped (no call)");
  }
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
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>memkit replay</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; padding: 0 24px; color: #222;
         max-width: 1500px; }
  h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; } h3 { font-size: 15px; }
  .note { color: #666; overflow-wrap: anywhere; }
  table.figures { border-collapse: collapse; margin: 8px 0; }
  table.figures th { text-align: left; font-weight: 600; padding: 2px 16px 2px 0; }
  table.figures td { padding: 2px 16px 2px 0; font-variant-numeric: tabular-nums;
                     overflow-wrap: anywhere; }
  .chart svg { display: block; touch-action: none; }
  .chart svg:focus { outline: 1px dotted #999; }
  .legend span { display: inline-block; margin-right: 16px; }
  .legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
              vertical-align: -1px; }
  .toolbar { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; margin: 6px 0; }
  .toolbar button { font: inherit; padding: 1px 10px; border: 1px solid #bbb; border-radius: 3px;
                    background: #f7f7f7; cursor: pointer; }
  .toolbar .range { color: #666; font-variant-numeric: tabular-nums; }
  .moment { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 24px;
            align-items: start; }
  @media (max-width: 1100px) { .moment { grid-template-columns: minmax(0, 1fr); } }
  .moment h4 { font-size: 14px; margin: 4px 0; }
  .table-box { max-height: 560px; overflow-y: auto; }
  table.blocks { border-collapse: collapse; width: 100%; table-layout: fixed; font-size: 13px; }
  table.blocks th { text-align: left; font-weight: 600; border-bottom: 1px solid #ccc; }
  table.blocks td, table.blocks th { padding: 2px 6px 2px 0; vertical-align: top;
                                     overflow-wrap: anywhere; }
  table.blocks td.number, table.blocks th.number { text-align: right; padding-right: 12px;
                                                   font-variant-numeric: tabular-nums; }
  table.blocks tr:hover td { background: #eef4fb; }
  table.blocks details pre { white-space: pre-wrap; margin: 2px 0; font-size: 12px; }
  table.blocks summary { cursor: pointer; }
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
  const started = performance.now();
  const NS = "http://www.w3.org/2000/svg";
  const sections = JSON.parse(document.getElementById("memkit-data").textContent);
  const tooltip = document.getElementById("tooltip");
  const colors = { live: "#1f77b4", reserved: "#d62728", slack: "#9ecae1", moment: "#2ca02c",
                   free: "#f2d4c9", small: "#fdae6b", edge: "#333", mark: "#ff7f0e" };

  function element(name, attributes, parent) {
    const node = document.createElementNS(NS, name);
    for (const key in attributes) node.setAttribute(key, attributes[key]);
    if (parent) parent.appendChild(node);
    return node;
  }
  function html(name, text, parent, className) {
    const node = document.createElement(name);
    if (text !== undefined && text !== null) node.textContent = text;
    if (className) node.className = className;
    if (parent) parent.appendChild(node);
    return node;
  }
  function bytes(value) {
    if (value >= 1 << 30) return (value / (1 << 30)).toFixed(2) + " GiB";
    if (value >= 1 << 20) return (value / (1 << 20)).toFixed(1) + " MiB";
    if (value >= 1 << 10) return (value / (1 << 10)).toFixed(1) + " KiB";
    return value + " B";
  }
  const count = value => value.toLocaleString("en-US");
  // Axis steps of bytes: round numbers of the largest binary unit the range reaches
  // (1 GiB, 2 GiB, ...; 256 MiB, 512 MiB, ...), labelled without trailing zeros.
  const units = [[1 << 30, "GiB"], [1 << 20, "MiB"], [1 << 10, "KiB"], [1, "B"]];
  function byteStep(range, steps) {
    const [unit] = units.find(([u]) => range >= u) || units[units.length - 1];
    return niceStep(range / unit, steps) * unit;
  }
  function byteLabel(value) {
    if (value === 0) return "0";
    const [unit, name] = units.find(([u]) => value >= u) || units[units.length - 1];
    return Number((value / unit).toFixed(2)) + " " + name;
  }
  function niceStep(range, steps) {
    const raw = range / steps, power = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 2.5, 5, 10]) if (raw <= m * power) return m * power;
    return 10 * power;
  }
  // Every chart scales to the page's width; its drawing keeps its own coordinates.
  function chart(width, height, maxWidth) {
    return element("svg", { viewBox: "0 0 " + width + " " + height,
                            style: "width: 100%; max-width: " + maxWidth + "; height: auto" });
  }
  function showTip(event, text) {
    tooltip.textContent = text;
    tooltip.style.display = "block";
    const x = Math.min(event.clientX + 12, window.innerWidth - tooltip.offsetWidth - 4);
    tooltip.style.left = Math.max(0, x) + "px";
    tooltip.style.top = (event.clientY + 12) + "px";
  }
  function hideTip() { tooltip.style.display = "none"; }

  // The compact data: base64 of LEB128 varints (see section_data in report_html.cpp).
  function reader(base64) {
    const text = atob(base64), data = new Uint8Array(text.length);
    for (let i = 0; i < text.length; ++i) data[i] = text.charCodeAt(i);
    let at = 0;
    const next = () => {
      let value = 0, scale = 1, byte;
      do {
        byte = data[at++];
        value += (byte & 0x7f) * scale;
        scale *= 128;
      } while (byte & 0x80);
      return value;
    };
    const signed = () => {
      const z = next();
      return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
    };
    return { next, signed };
  }
  function upperBound(array, length, value) {  // first index whose value is above `value`
    let lo = 0, hi = length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (array[mid] <= value) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // A moment m is "after event m" (1..n): event index m - 1 has run.
  function model(data) {
    const n = data.replayed, k = data.block_count;
    const m = { data, n, k, allocated: new Float64Array(k), freed: new Float64Array(k),
                requested: new Float64Array(k), rounding: new Float64Array(k),
                address: new Float64Array(k), stack: new Uint32Array(k), stream: new Uint32Array(k),
                live: new Float64Array(n) };
    let r = reader(data.blocks), event = 0, address = 0;
    for (let b = 0; b < k; ++b) {
      event += r.next();
      const lifetime = r.next();
      m.allocated[b] = event;
      m.freed[b] = lifetime === 0 ? Infinity : event + lifetime;
      m.requested[b] = r.next();
      m.rounding[b] = r.next();
      address += r.signed();
      m.address[b] = address;
      m.stack[b] = r.next();
      m.stream[b] = r.next();
      m.live[event] += m.requested[b];
      if (lifetime !== 0) m.live[event + lifetime] -= m.requested[b];
    }
    for (let i = 1; i < n; ++i) m.live[i] += m.live[i - 1];
    r = reader(data.reserved);
    m.reservedAt = new Float64Array(data.reserved_count);
    m.reservedBytes = new Float64Array(data.reserved_count);
    event = 0;
    let value = 0;
    for (let i = 0; i < data.reserved_count; ++i) {
      event += r.next();
      value += r.signed();
      m.reservedAt[i] = event;
      m.reservedBytes[i] = value;
    }
    r = reader(data.segment_events);
    const s = data.segment_event_count;
    m.segmentAt = new Float64Array(s);
    m.segmentKind = new Uint8Array(s);
    m.segmentAddress = new Float64Array(s);
    m.segmentSize = new Float64Array(s);
    event = 0;
    address = 0;
    for (let i = 0; i < s; ++i) {
      event += r.next();
      m.segmentAt[i] = event;
      m.segmentKind[i] = r.next();
      address += r.signed();
      m.segmentAddress[i] = address;
      m.segmentSize[i] = r.next();
    }
    return m;
  }
  const liveAfter = (m, moment) => moment <= 0 ? 0 : m.live[Math.min(moment, m.n) - 1];
  function reservedAfter(m, moment) {
    const i = upperBound(m.reservedAt, m.reservedAt.length, moment - 1);
    return i === 0 ? 0 : m.reservedBytes[i - 1];
  }
  // The blocks live after event `moment`: those allocated before it and not freed yet
  // (a scan of the blocks allocated up to then).
  function blocksAt(m, moment) {
    const last = moment - 1, end = upperBound(m.allocated, m.k, last), live = [];
    for (let b = 0; b < end; ++b) if (m.freed[b] > last) live.push(b);
    return live;
  }
  // The segments and runs of mapped pages after event `moment`, by address.
  function segmentsAt(m, moment) {
    const pool = new Map(), pages = new Map();
    const end = upperBound(m.segmentAt, m.segmentAt.length, moment - 1);
    for (let i = 0; i < end; ++i) {
      const kind = m.segmentKind[i], address = m.segmentAddress[i];
      if (kind <= 1) pool.set(address, { size: m.segmentSize[i], small: kind === 1 });
      else if (kind === 2) pool.delete(address);
      else if (kind === 3) pages.set(address, m.segmentSize[i]);
      else pages.delete(address);
    }
    const segments = [];
    for (const [base, s] of pool) segments.push({ base, size: s.size, small: s.small, blocks: [] });
    const mapped = [...pages.keys()].sort((a, b) => a - b);
    for (const address of mapped) {
      const last = segments.length ? segments[segments.length - 1] : null;
      if (last && last.run && last.base + last.size === address) last.size += pages.get(address);
      else segments.push({ base: address, size: pages.get(address), small: false, run: true,
                           blocks: [] });
    }
    segments.sort((a, b) => a.base - b.base);
    return segments;
  }

  function frameText(data, index, short) {
    const f = data.frames[index];
    return (short ? f[0].slice(f[0].lastIndexOf("/") + 1) : f[0]) + ":" + f[1] + " " + f[2];
  }
  // A stack's line: its innermost frame of the program's own Python code, else its
  // innermost Python frame (PyTorch's stacks may start in C++), else its innermost; all
  // of it when opened.
  function where(data, stack, cell) {
    if (stack === 0) {
      cell.textContent = "\u2013";
      return;
    }
    const frames = data.stacks[stack - 1];
    const python = f => data.frames[f][0].endsWith(".py");
    const own = f => python(f) && !/\/(site|dist)-packages\//.test(data.frames[f][0]);
    const shown = frames.find(own) ?? frames.find(python) ?? frames[0];
    const details = html("details", null, cell);
    html("summary", frameText(data, shown, true), details);
    html("pre", frames.map(f => frameText(data, f, false)).join("\n"), details);
  }

  function drawTimeline(host, toolbar, m, state) {
    const data = m.data;
    // Drawn at the width it is shown at (text keeps its size), again when that changes.
    const height = 340, left = 80, right = 20, top = 16, bottom = 40;
    let width = 1100, plot = width - left - right;
    const svg = element("svg", { style: "width: 100%; height: auto", tabindex: 0,
                                 "aria-label": "live and reserved bytes over the replay" });
    const clipId = "clip-" + state.index;
    const clip = element("rect", { x: left, y: top, height: height - top - bottom },
                         element("clipPath", { id: clipId }, element("defs", {}, svg)));
    const axes = element("g", {}, svg), lines = element("g", { "clip-path": "url(#" + clipId + ")" }, svg);
    const cursor = element("line", { y1: top, y2: height - bottom, stroke: "#999",
                                     visibility: "hidden" }, svg);
    host.appendChild(svg);
    const range = html("span", "", null, "range");
    const button = (label, title, action) => {
      const b = html("button", label, toolbar);
      b.type = "button";
      b.title = title;
      b.addEventListener("click", action);
      return b;
    };
    const xOf = moment => left + plot * (moment - state.from) / (state.to - state.from);
    const momentAt = drawnX => state.from + (drawnX - left) / plot * (state.to - state.from);
    function drawnX(ev) {  // the chart is scaled: pointer x in the drawing's coordinates
      const box = svg.getBoundingClientRect();
      return (ev.clientX - box.left) * width / box.width;
    }

    // Per column of the drawing, the largest value of the moments it covers (no peak is
    // lost), as steps: moment t holds from x(t) to x(t + 1).
    function series() {
      const first = Math.max(0, Math.floor(state.from)), last = Math.min(m.n, Math.ceil(state.to));
      const span = last - first + 1, columns = Math.min(span, plot);
      const live = [], reserved = [];
      let r = upperBound(m.reservedAt, m.reservedAt.length, first - 1);
      let current = r === 0 ? 0 : m.reservedBytes[r - 1];
      for (let c = 0; c < columns; ++c) {
        const a = first + Math.floor(c * span / columns);
        const b = first + Math.floor((c + 1) * span / columns) - 1;
        let most = 0;
        for (let t = Math.max(a, 1); t <= b; ++t) if (m.live[t - 1] > most) most = m.live[t - 1];
        while (r < m.reservedAt.length && m.reservedAt[r] <= a - 1) current = m.reservedBytes[r++];
        let highest = current;
        while (r < m.reservedAt.length && m.reservedAt[r] <= b - 1) {
          current = m.reservedBytes[r++];
          if (current > highest) highest = current;
        }
        live.push([a, b + 1, most]);
        reserved.push([a, b + 1, highest]);
      }
      return { live, reserved };
    }

    function draw() {
      width = Math.max(480, Math.round(host.clientWidth || 1100));
      plot = width - left - right;
      svg.setAttribute("viewBox", "0 0 " + width + " " + height);
      clip.setAttribute("width", plot);
      axes.textContent = "";
      lines.textContent = "";
      const full = state.from === 0 && state.to === m.n;
      const { live, reserved } = series();
      let yMax = 1;
      for (const p of reserved) yMax = Math.max(yMax, p[2]);
      for (const p of live) yMax = Math.max(yMax, p[2]);
      if (full) {
        yMax = Math.max(yMax, data.peak_reserved, data.peak_live, data.pytorch_peak_reserved,
                        data.min_capacity);
      }
      const step = byteStep(yMax, 5);
      yMax = Math.ceil(yMax * 1.05 / step) * step;
      const y = b => top + (height - top - bottom) * (1 - b / yMax);
      for (let v = 0; v <= yMax + 1; v += step) {
        element("line", { x1: left, x2: width - right, y1: y(v), y2: y(v), stroke: "#eee" }, axes);
        element("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11 }, axes)
            .textContent = byteLabel(v);
      }
      const xStep = Math.max(1, Math.round(niceStep(state.to - state.from, 6)));
      for (let t = Math.ceil(state.from / xStep) * xStep; t <= state.to; t += xStep) {
        element("text", { x: xOf(t), y: height - bottom + 16, "text-anchor": "middle",
                          "font-size": 11 }, axes).textContent = count(t);
      }
      element("text", { x: (left + width - right) / 2, y: height - 4, "text-anchor": "middle",
                        "font-size": 12 }, axes).textContent = "event";
      element("line", { x1: left, x2: left, y1: top, y2: height - bottom, stroke: "#888" }, axes);
      element("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom,
                        stroke: "#888" }, axes);
      function level(value, color, label) {
        if (!value || value > yMax) return;
        element("line", { x1: left, x2: width - right, y1: y(value), y2: y(value), stroke: color,
                          "stroke-dasharray": "6 4" }, lines);
        element("text", { x: width - right - 4, y: y(value) - 4, "text-anchor": "end",
                          "font-size": 11, fill: color }, lines).textContent = label + " " + bytes(value);
      }
      level(data.pytorch_peak_reserved, "#7f7f7f", "PyTorch peak reserved (recorded)");
      level(data.min_capacity, "#2ca02c", "min capacity");
      function steps(points, color, id) {
        const path = [];
        for (const [a, b, v] of points) {
          path.push(xOf(a).toFixed(1) + "," + y(v).toFixed(1), xOf(b).toFixed(1) + "," + y(v).toFixed(1));
        }
        element("polyline", { id, points: path.join(" "), fill: "none", stroke: color,
                              "stroke-width": 1.5, "stroke-linejoin": "round" }, lines);
      }
      steps(reserved, colors.reserved, "timeline-" + state.index + "-reserved");
      steps(live, colors.live, "timeline-" + state.index + "-live");
      const mark = (moment, color, dash, label, id) => {
        const x = xOf(moment + 0.5);
        if (x < left || x > width - right) return;
        element("line", { id, x1: x, x2: x, y1: top, y2: height - bottom, stroke: color,
                          "stroke-width": dash ? 1 : 1.5, "stroke-dasharray": dash || "none" }, lines);
        const nearRight = x > width - right - 200;
        element("text", { x: nearRight ? x - 4 : x + 4, y: top + (dash ? 12 : 26), "font-size": 11,
                          fill: color, "text-anchor": nearRight ? "end" : "start" }, lines)
            .textContent = label;
      };
      mark(data.peak_event + 1, colors.edge, "2 3", "peak reserved", "timeline-" + state.index + "-peak");
      mark(state.moment, colors.moment, null, "after event " + count(state.moment),
           "timeline-" + state.index + "-moment");
      range.textContent = full ? "all " + count(m.n) + " events"
                               : "events " + count(Math.round(state.from)) + " \u2013 " +
                                 count(Math.round(state.to)) + " of " + count(m.n);
    }
    // Drawn at once, or at the next frame while the wheel or a drag moves the view.
    let pending = false;
    state.redraw = later => {
      if (!later) {
        draw();
        return;
      }
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; draw(); });
    };

    // The view: [from, to] in moments, at least 8 wide, inside [0, n].
    function setView(from, to, later) {
      const span = Math.min(m.n, Math.max(Math.min(8, m.n), to - from));
      from = Math.max(0, Math.min(m.n - span, from));
      state.from = from;
      state.to = from + span;
      state.changed(later);
    }
    function zoom(factor, anchor, later) {
      const span = (state.to - state.from) * factor;
      const at = (anchor - state.from) / (state.to - state.from);
      setView(anchor - at * span, anchor - at * span + span, later);
    }
    state.setView = setView;
    button("\u2212", "zoom out", () => zoom(2, (state.from + state.to) / 2));
    button("+", "zoom in (around the moment shown)", () => {
      const inside = state.moment >= state.from && state.moment <= state.to;
      zoom(0.5, inside ? state.moment : (state.from + state.to) / 2);
    });
    button("reset", "show every event", () => setView(0, m.n));
    button("peak", "show the moment of peak reserved", () => state.setMoment(data.peak_event + 1));
    toolbar.appendChild(range);

    window.addEventListener("resize", () => state.redraw(true));
    svg.addEventListener("wheel", ev => {
      ev.preventDefault();
      const x = drawnX(ev);
      if (x < left || x > width - right) return;
      zoom(Math.exp(Math.max(-1, Math.min(1, ev.deltaY * 0.002))), momentAt(x), true);
    }, { passive: false });
    let drag = null;
    svg.addEventListener("pointerdown", ev => {
      if (ev.button !== 0) return;
      drag = { x: drawnX(ev), from: state.from, to: state.to, moved: false };
      svg.setPointerCapture(ev.pointerId);
    });
    svg.addEventListener("pointermove", ev => {
      const x = drawnX(ev);
      if (drag) {
        if (Math.abs(x - drag.x) > 3) drag.moved = true;
        if (drag.moved) {
          const shift = (x - drag.x) / plot * (drag.to - drag.from);
          setView(drag.from - shift, drag.to - shift, true);
          hideTip();
          return;
        }
      }
      const moment = Math.floor(momentAt(x));
      if (x < left || x > width - right || moment < 1 || moment > m.n) {
        hideTip();
        cursor.setAttribute("visibility", "hidden");
        return;
      }
      const cx = Math.max(left, Math.min(width - right, xOf(moment + 0.5)));
      cursor.setAttribute("x1", cx);
      cursor.setAttribute("x2", cx);
      cursor.setAttribute("visibility", "visible");
      const live = liveAfter(m, moment), reserved = reservedAfter(m, moment);
      showTip(ev, "after event " + count(moment) + "\nlive " + bytes(live) + "\nreserved " +
                  bytes(reserved) + (live ? "\nreserved / live " + (reserved / live).toFixed(3) : "") +
                  "\nclick: the blocks live then");
    });
    svg.addEventListener("pointerup", ev => {
      if (drag && !drag.moved) {
        const moment = Math.floor(momentAt(drawnX(ev)));
        if (moment >= 1 && moment <= m.n) state.setMoment(moment);
      }
      drag = null;
    });
    svg.addEventListener("pointerleave", () => { hideTip(); cursor.setAttribute("visibility", "hidden"); });
    svg.addEventListener("keydown", ev => {
      const by = ev.shiftKey ? 100 : 1;
      if (ev.key === "ArrowLeft") state.setMoment(state.moment - by);
      else if (ev.key === "ArrowRight") state.setMoment(state.moment + by);
      else if (ev.key === "+" || ev.key === "=") zoom(0.5, state.moment);
      else if (ev.key === "-") zoom(2, state.moment);
      else if (ev.key === "Home") setView(0, m.n);
      else return;
      ev.preventDefault();
    });
  }

  // Reserved memory laid out as rows of equal byte span, segment after segment, so
  // every pixel stands for the same number of bytes.
  function drawSegments(host, m, segments, highlights) {
    host.textContent = "";
    if (segments.length === 0) {
      host.textContent = "No memory reserved at this moment.";
      return;
    }
    const total = segments.reduce((sum, s) => sum + s.size, 0);
    const width = 1100, left = 10, rowHeight = 16, gap = 4;
    const rows = Math.max(8, Math.min(40, Math.ceil(segments.length / 2)));
    const span = Math.max(1, Math.ceil(total / rows));
    const usable = width - 2 * left;
    const height = rows * (rowHeight + gap) + gap;
    const svg = chart(width, height, "1100px");
    function rect(start, length, attributes, tip, block) {
      // One rectangle per row the range touches.
      let position = start, rest = length;
      while (rest > 0) {
        const row = Math.floor(position / span), inRow = position - row * span;
        const take = Math.min(rest, span - inRow);
        const r = element("rect", Object.assign({
          x: left + usable * inRow / span, y: gap + row * (rowHeight + gap),
          width: Math.max(usable * take / span, 0.3), height: rowHeight }, attributes), svg);
        if (tip) {
          r.addEventListener("mousemove", ev => showTip(ev, tip()));
          r.addEventListener("mouseleave", hideTip);
        }
        if (block !== undefined) {
          if (!highlights.has(block)) highlights.set(block, []);
          highlights.get(block).push(r);
        }
        position += take; rest -= take;
      }
    }
    let base = 0;
    segments.forEach((segment, number) => {
      const live = segment.blocks.reduce((sum, b) => sum + m.requested[b], 0);
      const held = segment.blocks.reduce((sum, b) => sum + m.requested[b] + m.rounding[b], 0);
      const tip = () => (segment.run ? "mapped pages " : "segment ") + number +
                        (segment.small ? " (small pool)" : "") + ": " + bytes(segment.size) +
                        "\n" + segment.blocks.length + " live blocks, " + bytes(live) +
                        " requested\nfree " + bytes(segment.size - held) + ", rounding " +
                        bytes(held - live);
      rect(base, segment.size, { fill: segment.small ? colors.small : colors.free }, tip);
      for (const b of segment.blocks) {
        const offset = base + m.address[b] - segment.base;
        const blockTip = () => "block of " + bytes(m.requested[b] + m.rounding[b]) + " (requested " +
                               bytes(m.requested[b]) + ")\n" + tip();
        rect(offset, m.requested[b] + m.rounding[b], { fill: colors.slack }, blockTip);
        rect(offset, m.requested[b], { fill: colors.live }, blockTip, b);
      }
      rect(base, Math.max(1, Math.round(span / usable)), { fill: colors.edge });
      base += segment.size;
    });
    host.appendChild(svg);
  }

  // The moment's figures, its segment map and its live blocks.
  function showMoment(m, state, parts) {
    const data = m.data, moment = state.moment;
    const live = blocksAt(m, moment);
    const segments = segmentsAt(m, moment);
    const bases = segments.map(s => s.base);
    for (const b of live) {
      if (m.requested[b] === 0) continue;
      const i = upperBound(bases, bases.length, m.address[b]) - 1;
      if (i >= 0 && m.address[b] < segments[i].base + segments[i].size) segments[i].blocks.push(b);
    }
    const liveBytes = liveAfter(m, moment), reserved = reservedAfter(m, moment);
    parts.title.textContent = "Memory after event " + count(moment) + " of " + count(m.n) +
        (moment === data.peak_event + 1 ? " (peak reserved)" : "");
    parts.figures.textContent = count(live.length) + " blocks live, " + bytes(liveBytes) +
        " requested; " + bytes(reserved) + " reserved" +
        (liveBytes ? " (" + (reserved / liveBytes).toFixed(3) + " \u00d7 live)" : "") + " in " +
        count(segments.length) + (segments.length === 1 ? " segment" : " segments") +
        " and runs of pages";
    const highlights = new Map();
    drawSegments(parts.map, m, segments, highlights);
    parts.map.dataset.rendered = "true";
    parts.map.dataset.segments = segments.length;

    const host = parts.blocks;
    host.textContent = "";
    host.dataset.moment = moment;
    host.dataset.liveBlocks = live.length;
    host.dataset.liveBytes = liveBytes;
    host.dataset.reservedBytes = reserved;
    const byStack = state.grouping === "stack";
    const limit = 100;
    const table = html("table", null, null, "blocks");
    const head = html("tr", null, html("thead", null, table));
    const body = html("tbody", null, table);
    // Streams and call stacks where the trace has more than one stream / any stack.
    const streams = data.streams.length > 1, stacks = data.stacks.length > 0;
    const columns = byStack
        ? [["bytes", "number", 16], ["blocks", "number", 12], ["share", "number", 12],
           ["allocated at", "", 60]]
        : [["size", "number", 17], ["age", "number", 14], ["allocated", "number", 16]]
              .concat(streams ? [["stream", "", 11]] : [])
              .concat(stacks ? [["allocated at", "", 42]] : []);
    const widths = columns.reduce((sum, c) => sum + c[2], 0);
    for (const [label, kind, share] of columns) {
      const th = html("th", label, head, kind);
      th.style.width = (100 * share / widths).toFixed(1) + "%";
    }
    let rows = 0;
    if (byStack) {
      const groups = new Map();
      for (const b of live) {
        const g = groups.get(m.stack[b]) || { bytes: 0, blocks: 0 };
        g.bytes += m.requested[b];
        g.blocks += 1;
        groups.set(m.stack[b], g);
      }
      const sorted = [...groups].sort((a, b) => b[1].bytes - a[1].bytes);
      rows = sorted.length;
      for (const [stack, g] of sorted.slice(0, limit)) {
        const tr = html("tr", null, body);
        html("td", bytes(g.bytes), tr, "number");
        html("td", count(g.blocks), tr, "number");
        html("td", (liveBytes ? 100 * g.bytes / liveBytes : 0).toFixed(1) + "%", tr, "number");
        where(data, stack, html("td", null, tr));
      }
    } else {
      const sorted = live.slice().sort((a, b) => m.requested[b] - m.requested[a] || a - b);
      rows = sorted.length;
      for (const b of sorted.slice(0, limit)) {
        const tr = html("tr", null, body);
        tr.title = "block " + b + ": " + bytes(m.requested[b]) + " requested, " +
                   bytes(m.requested[b] + m.rounding[b]) + " held";
        html("td", bytes(m.requested[b]), tr, "number");
        html("td", count(moment - 1 - m.allocated[b]), tr, "number");
        html("td", count(m.allocated[b] + 1), tr, "number");
        if (streams) html("td", data.streams[m.stream[b]], tr);
        if (stacks) where(data, m.stack[b], html("td", null, tr));
        const rects = highlights.get(b) || [];
        tr.addEventListener("mouseenter", () => rects.forEach(r => {
          r.setAttribute("stroke", colors.mark);
          r.setAttribute("stroke-width", 2);
        }));
        tr.addEventListener("mouseleave", () => rects.forEach(r => r.removeAttribute("stroke")));
      }
    }
    const caption = byStack
        ? (rows > limit ? "The " + limit + " call stacks holding the most" : "Every call stack holding")
          + " live bytes (" + count(rows) + " in all)"
        : (rows > limit ? "The " + limit + " largest of " + count(rows) + " live blocks"
                        : "The " + count(rows) + " live blocks") +
          "; age in events, allocated: the event that allocated it";
    html("p", caption, host, "note");
    if (rows > 0) html("div", null, host, "table-box").appendChild(table);
  }

  // #moment=M&view=A-B (section 0), moment1=..., view1=... (section 1), ...
  function readHash() {
    const found = {};
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      const match = /^(moment|view)(\d*)=(.*)$/.exec(part);
      if (match) found[match[1] + (match[2] || "0")] = match[3];
    }
    return found;
  }
  const states = [];
  function writeHash() {
    const parts = [];
    states.forEach((s, i) => {
      const suffix = i === 0 ? "" : String(i);
      parts.push("moment" + suffix + "=" + s.moment);
      if (s.from !== 0 || s.to !== s.n) {
        parts.push("view" + suffix + "=" + Math.round(s.from) + "-" + Math.round(s.to));
      }
    });
    try { history.replaceState(null, "", "#" + parts.join("&")); } catch (e) { /* file: */ }
  }

  const hash = readHash();
  sections.forEach((data, index) => {
    const timeline = document.getElementById("timeline-" + index);
    const segments = document.getElementById("segments-" + index);
    const blocks = document.getElementById("blocks-" + index);
    if (data.replayed === 0) {
      timeline.textContent = "Nothing was replayed.";
      timeline.dataset.rendered = segments.dataset.rendered = "true";
      return;
    }
    const m = model(data);
    const state = { index, n: m.n, from: 0, to: m.n, moment: Math.min(m.n, data.peak_event + 1),
                    grouping: "size" };
    states.push(state);
    const parts = { title: document.getElementById("moment-title-" + index),
                    figures: document.getElementById("moment-figures-" + index),
                    map: segments, blocks };
    let shown = -1;
    state.changed = later => {
      state.redraw(later);
      if (shown !== state.moment) {
        shown = state.moment;
        showMoment(m, state, parts);
      }
      writeHash();
    };
    state.setMoment = moment => {
      state.moment = Math.max(1, Math.min(m.n, Math.round(moment)));
      if (state.moment < state.from || state.moment > state.to) {  // bring it into view
        const span = state.to - state.from;
        state.setView(state.moment - span / 2, state.moment + span / 2);
      } else {
        state.changed();
      }
    };
    const grouping = document.getElementById("grouping-" + index);
    if (data.stacks.length === 0) grouping.hidden = true;
    grouping.addEventListener("change", () => {
      state.grouping = grouping.value;
      shown = -1;
      state.changed();
    });
    drawTimeline(timeline, document.getElementById("toolbar-" + index), m, state);
    const moment = Number(hash["moment" + index]);
    if (moment >= 1) state.moment = Math.min(m.n, Math.floor(moment));
    const view = /^(\d+)-(\d+)$/.exec(hash["view" + index] || "");
    if (view) state.setView(Number(view[1]), Number(view[2]));
    state.changed();
    timeline.dataset.rendered = "true";
  });
  document.body.dataset.renderMs = Math.round(performance.now() - started);
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
        "</span><span><i style=\"background:#d62728\"></i>reserved</span>"
        "<span><i style=\"background:#2ca02c\"></i>the moment shown below</span></div>\n"
        "<div class=\"toolbar\" id=\"toolbar-" +
        index +
        "\"></div>\n"
        "<div class=\"chart\" id=\"timeline-" +
        index +
        "\"></div>\n"
        "<p class=\"note\">Wheel or + / &minus; to zoom, drag to pan, click for the memory "
        "after that event (&larr; &rarr; step one event, with Shift 100). Each step of a "
        "line is the largest value of the events it covers.</p>\n";
    page += "<h3 id=\"moment-title-" + index + "\">Memory at peak reserved (" +
            format_mib(section.observation.peak_reserved_bytes) + " reserved, " +
            format_mib(section.observation.live_at_peak_bytes) + " live, after event " +
            std::to_string(section.observation.peak_event + 1) + ", trace line " +
            std::to_string(section.observation.peak_line) + ")</h3>\n" + "<p id=\"moment-figures-" +
            index + "\"></p>\n<div class=\"moment\">\n<div>\n" +
            "<h4>Reserved memory</h4>\n"
            "<div class=\"legend\"><span><i style=\"background:#1f77b4\"></i>requested</span>"
            "<span><i style=\"background:#9ecae1\"></i>block rounding</span>"
            "<span><i style=\"background:#f2d4c9\"></i>free (large pool, arena)</span>"
            "<span><i style=\"background:#fdae6b\"></i>free (small pool)</span>"
            "<span><i style=\"background:#333\"></i>segment start</span></div>\n"
            "<p class=\"note\">Segments and runs of mapped pages laid end to end, in rows of "
            "equal bytes; hover for details, hover a block in the table to find it here.</p>\n"
            "<div class=\"chart\" id=\"segments-" +
            index +
            "\"></div>\n</div>\n<div>\n<h4>Live blocks "
            "<select id=\"grouping-" +
            index +
            "\" aria-label=\"grouping\"><option value=\"size\">largest first</option>"
            "<option value=\"stack\">by call stack</option></select></h4>\n"
            "<div id=\"blocks-" +
            index + "\"></div>\n</div>\n</div>\n</section>\n";
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
