#!/usr/bin/env bash
# memkit convert: every format written as memkit CSV, with the call stacks of a PyTorch
# snapshot, that replays to the same figures; bad input and an output over the input
# refused with exit 1.
set -u
memkit="$1"
fixtures="$2/tests/data/traces"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

output=$("$memkit" convert "$fixtures/pytorch_snapshot.json" "$work/snapshot.csv") || fail "exit $?"
grep -q "5 events (3 allocations, 1 call stacks) -> $work/snapshot.csv" <<<"$output" ||
  fail "summary line: $output"
grep -qx "@0,train.py,10,forward" "$work/snapshot.csv" || fail "the frame is not written"
grep -qx "a,0,512,0,@0" "$work/snapshot.csv" || fail "the allocation does not name its stack"
grep -qx "# workload: pytorch_snapshot" "$work/snapshot.csv" || fail "the name is not kept"

for trace in pytorch_snapshot.json rmm_log.csv small.trace.csv.gz; do
  "$memkit" convert "$fixtures/$trace" "$work/converted.csv" >/dev/null || fail "$trace: exit $?"
  before=$("$memkit" replay --json "$fixtures/$trace" | grep -E '"(events|peak_live_bytes|peak_reserved_bytes|streams|trace)"')
  after=$("$memkit" replay --json "$work/converted.csv" | grep -E '"(events|peak_live_bytes|peak_reserved_bytes|streams|trace)"')
  [ "$before" = "$after" ] || fail "$trace converted replays differently: $before / $after"
done

"$memkit" convert "$fixtures/bad_action.csv" "$work/bad.csv" 2>"$work/err"
[ $? -eq 1 ] || fail "bad input should exit 1"
grep -q "^\[memkit::trace::read\] .*bad_action.csv:3: unknown action" "$work/err" ||
  fail "bad input message: $(cat "$work/err")"
[ -e "$work/bad.csv" ] && fail "an output was written for bad input"
cp "$fixtures/small.trace.csv" "$work/same.csv"
"$memkit" convert "$work/same.csv" "$work/same.csv" 2>"$work/err"
[ $? -eq 1 ] || fail "an output over its input should exit 1"
grep -q "is an input" "$work/err" || fail "output over input message: $(cat "$work/err")"
cmp -s "$fixtures/small.trace.csv" "$work/same.csv" || fail "the input was overwritten"

[ "$failures" -eq 0 ] && echo "ok" || exit 1
