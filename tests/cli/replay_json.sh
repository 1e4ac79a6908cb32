#!/usr/bin/env bash
# memkit replay --json: the keys a caller relies on, for one trace (an object) and
# several (an array), in each of the three formats.
set -u
memkit="$1"
fixtures="$2/tests/data/traces"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

output=$("$memkit" replay --json --min-capacity "$fixtures/small.trace.csv.gz") || fail "exit $?"
for key in events allocations peak_live_bytes peak_reserved_bytes backend_allocs backend_frees \
           ns_per_event min_capacity_bytes reserved_over_live min_capacity_over_live trace \
           pytorch_peak_reserved_bytes pytorch_peak_allocated_bytes; do
  grep -q "\"$key\": " <<<"$output" || fail "key $key missing"
done
grep -q '^{' <<<"$output" || fail "one trace should give one object"
grep -q '"peak_live_bytes": 4194816,' <<<"$output" || fail "peak_live_bytes of small.trace.csv"
grep -q '"events": 9,' <<<"$output" || fail "events of small.trace.csv"

output=$("$memkit" replay --json "$fixtures/rmm_log.csv" "$fixtures/pytorch_snapshot.json") ||
  fail "exit $?"
grep -q '^\[' <<<"$output" || fail "several traces should give an array"
grep -q '"peak_live_bytes": 6144,' <<<"$output" || fail "peak_live_bytes of rmm_log.csv"
grep -q '"peak_live_bytes": 2560,' <<<"$output" || fail "peak_live_bytes of pytorch_snapshot.json"
grep -q '"format": "rmm"' <<<"$output" || fail "rmm format not detected"
grep -q '"format": "pytorch"' <<<"$output" || fail "pytorch format not detected"
if grep -q "min_capacity_bytes" <<<"$output"; then fail "min_capacity_bytes without --min-capacity"; fi

# The readable table shows the recorded PyTorch figures.
output=$("$memkit" replay "$fixtures/small.trace.csv") || fail "exit $?"
grep -q "PyTorch peak reserved" <<<"$output" || fail "table lacks the PyTorch figures"

# A simulated device that runs behind the host: the lag and its waits are reported.
output=$("$memkit" replay --json --device-lag 3 "$fixtures/small.trace.csv") || fail "exit $?"
grep -q '"device_lag": 3,' <<<"$output" || fail "device_lag missing"
grep -q '"unfinished_waits": ' <<<"$output" || fail "unfinished_waits missing"
output=$("$memkit" replay --json --device-lag 3 --lag-seed 7 "$fixtures/small.trace.csv") ||
  fail "exit $?"
grep -q '"lag_seed": 7,' <<<"$output" || fail "lag_seed missing"
output=$("$memkit" replay --json "$fixtures/small.trace.csv") || fail "exit $?"
if grep -q "unfinished_waits" <<<"$output"; then fail "unfinished_waits without --device-lag"; fi
output=$("$memkit" replay --backend cpu --device-lag 3 "$fixtures/small.trace.csv" 2>&1) &&
  fail "--device-lag accepted on the cpu backend"
grep -q -- "--device-lag" <<<"$output" || fail "the error does not name --device-lag: $output"

# The cpu backend replays with real host memory.
"$memkit" replay --backend cpu --json "$fixtures/small.trace.csv" >/dev/null || fail "cpu backend"
[ "$failures" -eq 0 ] && echo "ok"
