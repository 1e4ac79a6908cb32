#!/usr/bin/env python3
"""The HTML report of `memkit replay --html` in headless Chromium, driven through the
DevTools protocol over a pipe (--remote-debugging-pipe): no network, no extra package.

At 800 and 1,600 px wide, a screenshot of the whole page is decoded (PNG, with zlib) and
checked: the timeline and the segment map have drawn pixels in their colours, and nothing
is drawn in the page's right margin (nor does the page scroll sideways). Then, at one
width, real mouse input: a click on the timeline changes the moment and the block view,
whose figures must equal those computed here from the trace itself; the wheel zooms, a
drag pans, the buttons reset and go to the peak, and a URL fragment #moment=M opens the
page at that moment. A second trace with PyTorch frames shows its call stack.

Usage: report_browser.py MEMKIT SOURCE_DIR [--screenshot PNG]
  --screenshot PNG  also writes the README's picture of the report (1,280 px wide).
Exits 77 (ctest's skip) when Chromium is missing, saying so."""
import base64
import fcntl
import gzip
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

TRACE = "data/traces/bert_infer_varlen.trace.csv.gz"
# A PyTorch 2.11 snapshot of a small training loop on an H200, with Python frames.
FRAMES_TRACE = "tests/data/traces/pytorch_2_11_frames.json"
LIVE = (0x1F, 0x77, 0xB4)      # the live line and requested bytes
RESERVED = (0xD6, 0x27, 0x28)  # the reserved line
FREE = (0xF2, 0xD4, 0xC9)      # free space in the segment map
PICTURE_MOMENT = 12900         # the README's picture: the trace's highest step after the peak
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL: " + message)
    return condition


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium and one page, over the DevTools protocol on fds 3 and 4."""

    def __init__(self, chromium, profile):
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()

        def pipes():  # in the child: fd 3 reads our commands, fd 4 writes the answers
            reading = fcntl.fcntl(to_browser_read, fcntl.F_DUPFD, 10)
            writing = fcntl.fcntl(from_browser_write, fcntl.F_DUPFD, 10)
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        os.makedirs(profile, exist_ok=True)
        self.log = open(os.path.join(profile, "chromium.log"), "w")
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--remote-debugging-pipe", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile,
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, close_fds=False,
            preexec_fn=pipes)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.exceptions = []
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                 flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    def call(self, method, session=False, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            answer = self.receive()
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError("%s: %s" % (method, answer["error"]))
                return answer.get("result", {})
            self.events.append(answer)

    def receive(self):
        while b"\0" not in self.buffer:
            # Not a measure of speed: only so that a browser that hangs fails the test.
            if not select.select([self.from_browser], [], [], 300)[0]:
                raise RuntimeError("no answer from Chromium in 300 s")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe (see %s)" % self.log.name)
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        message = json.loads(message)
        if message.get("method") == "Runtime.exceptionThrown":  # an error in the page's script
            details = message["params"]["exceptionDetails"]
            self.exceptions.append(details.get("exception", {}).get("description") or
                                   details.get("text"))
        return message

    def wait_for_event(self, method):
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    del self.events[i]
                    return event
            self.events.append(self.receive())

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", session=True, expression=expression,
                           returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError("%s: %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def open(self, url, width, height=900):
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        # Through a blank page: a new fragment alone would not load the page again.
        for address in ("about:blank", url):
            self.events.clear()
            self.call("Page.navigate", session=True, url=address)
            self.wait_for_event("Page.loadEventFired")
        # The script runs before the load event; this waits for one painted frame more.
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        return self.evaluate("document.body.dataset.rendered") == "true"

    def screenshot(self, height=None):
        """The page as PNG bytes: the whole page, or its first `height` px."""
        size = self.evaluate("[document.documentElement.clientWidth, "
                             "document.documentElement.scrollHeight]")
        clip = {"x": 0, "y": 0, "width": size[0], "height": height or size[1], "scale": 1}
        shot = self.call("Page.captureScreenshot", session=True, format="png", clip=clip,
                         captureBeyondViewport=True)
        return base64.b64decode(shot["data"])

    def mouse(self, kind, x, y, **extra):
        self.call("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, **extra)

    def click(self, x, y):
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", clickCount=1)

    def close(self):
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def decode_png(data):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat = 8, b""
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), "PNG of depth %d, colour type %d" % (depth, colour)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    channels = 4 if colour == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):  # undo the scanline filter (PNG spec, section 9)
            a = line[i - channels] if i >= channels else 0
            b, c = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * channels:x * channels + 3]) for x in range(width)])
        previous = line
    return width, height, rows


def near(pixel, colour, tolerance=40):
    return all(abs(p - c) <= tolerance for p, c in zip(pixel, colour))


def count_pixels(rows, box, colour):
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    return sum(1 for row in rows[max(0, y0):y1] for p in row[max(0, x0):x1] if near(p, colour))


def live_blocks(path, moment):
    """From the trace file: (count, bytes, largest) of the blocks live after `moment` events."""
    opener = gzip.open if path.endswith(".gz") else open
    live, events = {}, 0
    with opener(path, "rt") as lines:
        for line in lines:
            fields = line.strip().split(",")
            if fields[0] not in ("a", "f"):
                continue
            if events == moment:
                break
            events += 1
            if fields[0] == "a":
                live[fields[1]] = int(fields[2])
            else:
                del live[fields[1]]
    return len(live), sum(live.values()), max(live.values(), default=0)


LAYOUT = """(() => {
  const box = id => { const r = document.getElementById(id).getBoundingClientRect();
                      return [r.left, r.top + scrollY, r.right, r.bottom + scrollY]; };
  return { scrollWidth: document.documentElement.scrollWidth,
           clientWidth: document.documentElement.clientWidth,
           timeline: box("timeline-0"), segments: box("segments-0"), blocks: box("blocks-0") };
})()"""
BLOCKS = """(() => { const d = document.getElementById("blocks-0").dataset;
  return { moment: Number(d.moment), blocks: Number(d.liveBlocks), bytes: Number(d.liveBytes),
           first: (document.querySelector("#blocks-0 tbody td") || {}).textContent || "",
           range: document.querySelector("#toolbar-0 .range").textContent,
           marker: (document.getElementById("timeline-0-moment") || { getAttribute: () => null })
                     .getAttribute("x1"),
           hash: location.hash }; })()"""


def size_text(value):
    """The page's own size format (bytes() in its script)."""
    for shift, unit, digits in ((30, "GiB", 2), (20, "MiB", 1), (10, "KiB", 1)):
        if value >= 1 << shift:
            return "%.*f %s" % (digits, value / (1 << shift), unit)
    return "%d B" % value


def check_width(browser, url, width):
    check(browser.open(url, width), "%d px: the page did not render" % width)
    layout = browser.evaluate(LAYOUT)
    check(layout["scrollWidth"] <= layout["clientWidth"],
          "%d px: the page scrolls sideways (%d px wide)" % (width, layout["scrollWidth"]))
    shot_width, height, rows = decode_png(browser.screenshot())
    check(shot_width == width, "%d px: a screenshot %d px wide" % (width, shot_width))
    timeline = layout["timeline"]
    live = count_pixels(rows, timeline, LIVE)
    reserved = count_pixels(rows, timeline, RESERVED)
    check(live > 300 and reserved > 300,
          "%d px: the timeline has %d live and %d reserved pixels" % (width, live, reserved))
    check(timeline[2] <= width - 16 and timeline[2] - timeline[0] > width * 0.8,
          "%d px: the timeline spans %s" % (width, timeline))
    requested = count_pixels(rows, layout["segments"], LIVE)
    free = count_pixels(rows, layout["segments"], FREE)
    check(requested > 500 and free > 50,
          "%d px: the segment map has %d requested and %d free pixels" % (width, requested, free))
    # The right margin (the body's padding) stays white from top to bottom.
    drawn = sum(1 for row in rows for p in row[width - 12:] if not near(p, (255, 255, 255), 8))
    check(drawn == 0, "%d px: %d pixels drawn in the right margin" % (width, drawn))
    if width >= 1200:  # two columns: the block view beside the map
        check(layout["blocks"][0] > layout["segments"][2],
              "%d px: the block view is not beside the segment map" % width)
    else:
        check(layout["blocks"][1] >= layout["segments"][3],
              "%d px: the block view is not below the segment map" % width)
    print("ok: %d px, page %d px high: %d live, %d reserved pixels on the timeline; %d requested, "
          "%d free on the segment map" % (width, height, live, reserved, requested, free))
    return layout


def view_of(fragment):
    """The first section's view in the URL fragment, as (first event, last event)."""
    values = dict(part.split("=", 1) for part in fragment.lstrip("#").split("&") if "=" in part)
    return tuple(int(v) for v in values["view"].split("-"))


def check_interaction(browser, url, source, layout):
    trace = os.path.join(source, TRACE)
    check(browser.open(url, 1600), "the page did not render")
    layout = browser.evaluate(LAYOUT)
    before = browser.evaluate(BLOCKS)
    n = int(before["range"].split()[1].replace(",", ""))
    x0, y0, x1, y1 = layout["timeline"]
    top = browser.evaluate("scrollY")
    # A click a fifth of the way along the timeline (its plot starts 80 px in).
    x, y = x0 + 80 + (x1 - x0 - 100) * 0.2, (y0 + y1) / 2 - top
    browser.click(x, y)
    after = browser.evaluate(BLOCKS)
    check(after["moment"] != before["moment"],
          "a click on the timeline left the moment at %d" % before["moment"])
    check(abs(after["moment"] - 0.2 * n) <= n / 100,
          "a click at a fifth of the timeline chose event %d of %d" % (after["moment"], n))
    check(after["marker"] != before["marker"], "the moment's line did not move")
    check("moment=%d" % after["moment"] in after["hash"], "the URL lacks the moment")
    blocks, total, largest = live_blocks(trace, after["moment"])
    check((after["blocks"], after["bytes"]) == (blocks, total),
          "after event %d the page shows %d blocks, %d bytes; the trace has %d, %d" %
          (after["moment"], after["blocks"], after["bytes"], blocks, total))
    check(after["first"] == size_text(largest),
          "the largest block shown is %r, the trace's is %s" % (after["first"], size_text(largest)))
    print("ok: a click chose event %d: %d blocks, %d bytes live, as in the trace" %
          (after["moment"], blocks, total))

    # The wheel zooms around the pointer, a drag pans, the buttons reset and find the peak.
    browser.mouse("mouseWheel", x, y, deltaX=0, deltaY=-400)
    browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    zoomed = browser.evaluate(BLOCKS)
    check(zoomed["range"].startswith("events ") and "view=" in zoomed["hash"],
          "the wheel did not zoom: %r" % zoomed["range"])
    low, high = view_of(zoomed["hash"])
    check(high - low < n / 2 and low <= after["moment"] <= high,
          "the zoomed view %d-%d does not hold event %d" % (low, high, after["moment"]))
    browser.mouse("mousePressed", x, y, button="left", clickCount=1)
    browser.mouse("mouseMoved", x + 200, y, button="left", buttons=1)
    browser.mouse("mouseReleased", x + 200, y, button="left", clickCount=1)
    browser.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    panned = browser.evaluate(BLOCKS)
    new_low = view_of(panned["hash"])[0]
    check(new_low < low, "a drag to the right did not move the view back (%d, was %d)" %
          (new_low, low))
    check(panned["moment"] == after["moment"], "a drag changed the moment")
    browser.evaluate("[...document.querySelectorAll('#toolbar-0 button')]"
                     ".find(b => b.textContent === 'reset').click()")
    check(browser.evaluate(BLOCKS)["range"] == "all %s events" % format(n, ","),
          "reset did not show every event")
    browser.evaluate("[...document.querySelectorAll('#toolbar-0 button')]"
                     ".find(b => b.textContent === 'peak').click()")
    check(browser.evaluate(BLOCKS)["moment"] == before["moment"],
          "peak did not go back to the moment of peak reserved")
    print("ok: the wheel zoomed to %d-%d, a drag panned to %d-, reset and peak work" %
          (low, high, new_low))

    # A URL fragment opens the page at a moment.
    moment = n // 3
    check(browser.open(url + "#moment=%d" % moment, 1600), "the page did not render")
    shown = browser.evaluate(BLOCKS)
    blocks, total, _ = live_blocks(trace, moment)
    check((shown["moment"], shown["blocks"], shown["bytes"]) == (moment, blocks, total),
          "#moment=%d shows %s; the trace has %d blocks, %d bytes" % (moment, shown, blocks, total))


FIRST_ROW = "[...document.querySelectorAll('#blocks-1 tbody tr:first-child td')].map(c => c.textContent)"


def check_frames(browser, url):
    # Section 1 is the PyTorch snapshot: after its 7th event, the largest block live is
    # the 32 MiB the first Linear's forward allocated, from line 9 of the program.
    check(browser.open(url + "#moment1=7", 1600), "the page did not render")
    row = browser.evaluate(FIRST_ROW)
    check(row[0] == "32.0 MiB" and row[-1].startswith("rec.py:9 train") and
          "torch/nn/modules/linear.py:134 forward" in row[-1],
          "the block's call stack is not shown: %r" % row)
    browser.evaluate("document.getElementById('grouping-1').value = 'stack';"
                     "document.getElementById('grouping-1').dispatchEvent(new Event('change'))")
    # That stack holds it and a block of 128 KiB: 33,685,504 of the 34,297,896 bytes live.
    row = browser.evaluate(FIRST_ROW)
    check(row[:3] == ["32.1 MiB", "2", "98.2%"] and row[-1].startswith("rec.py:9 train"),
          "grouped by call stack: %r" % row)
    print("ok: the PyTorch snapshot's call stacks are shown, per block and grouped")


def main():
    if len(sys.argv) not in (3, 5):
        sys.exit(__doc__)
    memkit, source = sys.argv[1], sys.argv[2]
    picture = sys.argv[4] if len(sys.argv) == 5 and sys.argv[3] == "--screenshot" else None
    chromium = find_chromium()
    if not chromium:
        print("skipped: chromium is not installed (scripts/setup.sh installs it: "
              "apt-get install chromium)")
        return 77
    work = tempfile.mkdtemp(prefix="memkit-report-")
    try:
        page = os.path.join(work, "report.html")
        subprocess.run([memkit, "replay", "--min-capacity", "--html", page,
                        os.path.join(source, TRACE), os.path.join(source, FRAMES_TRACE)],
                       check=True, stdout=subprocess.DEVNULL)
        with open(page) as f:
            text = f.read()
        check('src="http' not in text and 'href="http' not in text,
              "the page loads something from the network")
        url = "file://" + page
        browser = Browser(chromium, os.path.join(work, "profile"))
        try:
            for width in (800, 1600):
                layout = check_width(browser, url, width)
            check_interaction(browser, url, source, layout)
            check_frames(browser, url)
            check(not browser.exceptions, "errors in the page: %s" % browser.exceptions)
            if picture:  # the first trace, after an event in its busiest stretch
                browser.open(url + "#moment=%d" % PICTURE_MOMENT, 1280)
                bottom = browser.evaluate("document.querySelector('.moment')"
                                          ".getBoundingClientRect().bottom + scrollY")
                with open(picture, "wb") as f:
                    f.write(browser.screenshot(height=int(bottom) + 16))
                print("wrote " + picture)
        finally:
            browser.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("ok: rendered in " + chromium)
    return 0


if __name__ == "__main__":
    sys.exit(main())
