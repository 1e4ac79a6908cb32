#!/usr/bin/env bash
# memkit replay --html: the page renders in headless Chromium and its script draws the
# timeline and the segment map.
set -u
memkit="$1"
trace="$2/data/traces/bert_infer_varlen.trace.csv.gz"
chromium=""
for candidate in /usr/bin/chromium /usr/bin/chromium-browser "$(command -v chromium 2>/dev/null)"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then chromium="$candidate"; break; fi
done
if [ -z "$chromium" ]; then
  echo "skipped: chromium is not installed (apt-get install chromium)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$memkit" replay --min-capacity --html "$work/report.html" "$trace" || { echo "FAIL: replay"; exit 1; }
if grep -qE '(src|href)="https?:' "$work/report.html"; then
  echo "FAIL: the page loads something from the network"; exit 1
fi
chromium_run() {
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --user-data-dir="$work/profile-$1" \
    --window-size=1200,900 "${@:2}" "file://$work/report.html" 2>"$work/chromium-$1.log"
}
chromium_run dom --dump-dom >"$work/dom.html"
failures=0
for needle in 'id="timeline-0" data-rendered="true"' 'id="segments-0" data-rendered="true"' \
              'id="timeline-0-live"' 'id="timeline-0-reserved"' '<rect'; do
  grep -qF "$needle" "$work/dom.html" || { echo "FAIL: rendered page lacks $needle"; failures=1; }
done
chromium_run shot --screenshot="$work/report.png" >/dev/null
[ -s "$work/report.png" ] || { echo "FAIL: no screenshot"; failures=1; }
[ "$failures" -eq 0 ] && echo "ok: rendered in $chromium"
