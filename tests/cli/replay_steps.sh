#!/usr/bin/env bash
# memkit replay on traces that say how many loop iterations they hold: `# steps: N`
# (and `# warmup_steps: W`) gives per-step figures, `s` step markers give the unmaps
# per step after the warmup; bad values are errors naming the file and line. Other
# readers of memkit CSV (memkit plan --from-trace) skip the markers.
set -u
memkit="$1"
source_trace="$2/data/traces/bert_infer_varlen.trace.csv.gz"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
value() { grep -o "\"$1\": [-0-9][-0-9.e+]*" <<<"$2" | head -1 | sed "s/.*: //"; }
# close A B: the two numbers agree to 1e-9 (relative).
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d;
  s = (a < 0 ? -a : a) + 1e-300; exit !(a != "" && b != "" && d <= 1e-9 * s) }'; }

# The same events four ways: plain, with `# steps: 4`, with a marker every 4150 events
# (4 steps, default warmup 1), and cut at the second marker (the warmup step alone).
zcat "$source_trace" | grep -v '^#' >"$work/events.csv"
cp "$work/events.csv" "$work/plain.csv"
{ echo "# steps: 4"; cat "$work/events.csv"; } >"$work/keyed.csv"
awk 'BEGIN { n = 0 } { if (n % 4150 == 0) print "s"; print; n++ }' "$work/events.csv" \
  >"$work/marked.csv"
head -n 4150 "$work/events.csv" >"$work/warmup.csv"
[ "$(grep -c '^s$' "$work/marked.csv")" -eq 4 ] || fail "the marked trace should have 4 markers"

replay() { "$memkit" replay --json --arena-slack 0 "$@"; }
plain=$(replay "$work/plain.csv") || fail "plain: exit $?"
keyed=$(replay "$work/keyed.csv") || fail "keyed: exit $?"
marked=$(replay "$work/marked.csv") || fail "marked: exit $?"
warmup=$(replay "$work/warmup.csv") || fail "warmup: exit $?"

for key in steps maps_per_step unmaps_per_step unmaps_after_warmup_per_step \
  maps_after_warmup_per_step; do
  if grep -q "\"$key\"" <<<"$plain"; then fail "$key without steps"; fi
done
maps=$(value maps "$plain")
unmaps=$(value unmaps "$plain")
[ "$unmaps" -gt 0 ] || fail "the floor should unmap pages on this trace"
[ "$(value maps "$keyed")" = "$maps" ] && [ "$(value unmaps "$keyed")" = "$unmaps" ] ||
  fail "steps metadata changed the replay"
[ "$(value maps "$marked")" = "$maps" ] && [ "$(value unmaps "$marked")" = "$unmaps" ] ||
  fail "step markers changed the replay"
[ "$(value events "$marked")" = "$(value events "$plain")" ] || fail "markers counted as events"

[ "$(value steps "$keyed")" = 4 ] || fail "steps of keyed.csv: $(value steps "$keyed")"
[ "$(value warmup_steps "$keyed")" = 0 ] || fail "warmup_steps of keyed.csv"
close "$(value maps_per_step "$keyed")" "$(awk -v m="$maps" 'BEGIN { print m / 4 }')" ||
  fail "maps_per_step $(value maps_per_step "$keyed") != $maps / 4"
close "$(value unmaps_per_step "$keyed")" "$(awk -v m="$unmaps" 'BEGIN { print m / 4 }')" ||
  fail "unmaps_per_step $(value unmaps_per_step "$keyed") != $unmaps / 4"
if grep -q unmaps_after_warmup_per_step <<<"$keyed"; then fail "after-warmup figure without markers"; fi

[ "$(value steps "$marked")" = 4 ] || fail "steps from the markers: $(value steps "$marked")"
[ "$(value warmup_steps "$marked")" = 1 ] || fail "default warmup with markers should be 1"
close "$(value unmaps_per_step "$marked")" "$(awk -v m="$unmaps" 'BEGIN { print m / 4 }')" ||
  fail "unmaps_per_step of marked.csv"
# From the marker that starts step 1 to the end: the whole run less the warmup's run.
expected=$(awk -v a="$unmaps" -v w="$(value unmaps "$warmup")" 'BEGIN { printf "%.17g", (a - w) / 3 }')
close "$(value unmaps_after_warmup_per_step "$marked")" "$expected" ||
  fail "unmaps_after_warmup_per_step $(value unmaps_after_warmup_per_step "$marked") != $expected"
expected=$(awk -v a="$maps" -v w="$(value maps "$warmup")" 'BEGIN { printf "%.17g", (a - w) / 3 }')
close "$(value maps_after_warmup_per_step "$marked")" "$expected" ||
  fail "maps_after_warmup_per_step $(value maps_after_warmup_per_step "$marked") != $expected"
echo "floor: $unmaps unmaps, $(value unmaps_per_step "$marked") a step," \
  "$(value unmaps_after_warmup_per_step "$marked") a step after the warmup"

# An explicit warmup moves the starting marker: warmup 0 counts every step.
{ echo "# warmup_steps: 0"; cat "$work/marked.csv"; } >"$work/warm0.csv"
output=$(replay "$work/warm0.csv") || fail "warm0: exit $?"
close "$(value unmaps_after_warmup_per_step "$output")" \
  "$(awk -v m="$unmaps" 'BEGIN { print m / 4 }')" || fail "warmup 0 should count all unmaps"

# The table prints unmaps per step.
"$memkit" replay --arena-slack 0 "$work/marked.csv" | grep -q "unmaps per step after the warmup" ||
  fail "the table lacks the unmaps per step"

# Bad values: exit 1, the file and line named.
expect_error() {  # name, content, expected text
  local output status
  printf '%b' "$2" >"$work/$1"
  output=$("$memkit" replay "$work/$1" 2>&1 >/dev/null)
  status=$?
  [ "$status" -eq 1 ] || { fail "$1: exit status $status, expected 1"; return; }
  grep -qF -- "$3" <<<"$output" || { fail "$1: message '$output' lacks '$3'"; return; }
  grep -q '^\[memkit::trace::read\] ' <<<"$output" || fail "$1: message lacks the prefix"
  echo "ok   $1: $output"
}
expect_error not_integer.csv "# steps: four\na,0,1,0\n" \
  "not_integer.csv:1: steps must be a positive integer, got 'four'"
expect_error fraction.csv "a,0,1,0\n# steps: 1.5\n" "fraction.csv:2: steps must be a positive integer"
expect_error zero.csv "# workload: z\n# steps: 0\n" "zero.csv:2: steps must be a positive integer, got '0'"
expect_error warmup_equal.csv "# steps: 3\n# warmup_steps: 3\na,0,1,0\n" \
  "warmup_equal.csv:2: warmup_steps 3 is not below steps 3"
expect_error warmup_above.csv "# warmup_steps: 5\n# steps: 2\n" \
  "warmup_above.csv:1: warmup_steps 5 is not below steps 2"
expect_error warmup_bad.csv "# steps: 3\n# warmup_steps: -1\n" \
  "warmup_bad.csv:2: warmup_steps must be a non-negative integer, got '-1'"
expect_error warmup_alone.csv "# warmup_steps: 1\na,0,1,0\n" "warmup_alone.csv:1: warmup_steps without steps"
expect_error markers_warmup.csv "s\na,0,1,0\ns\nf,0\n# warmup_steps: 2\n" \
  "markers_warmup.csv:5: warmup_steps 2 is not below steps 2"
expect_error markers_count.csv "# steps: 3\ns\na,0,1,0\ns\nf,0\n" \
  "markers_count.csv:1: steps is 3 but the trace has 2 step markers"
expect_error marker_fields.csv "a,0,1,0\ns,2\n" "marker_fields.csv:2: unknown action 's'"

# memkit plan --from-trace reads memkit CSV too: the markers are skipped.
printf '# steps: 2\ns\na,0,100,0\na,1,50,0\ns\nf,0\na,2,100,0\nf,1\nf,2\n' >"$work/plan_marked.csv"
grep -v '^s$' "$work/plan_marked.csv" >"$work/plan_plain.csv"
marked_plan=$("$memkit" plan --from-trace "$work/plan_marked.csv" --json 2>&1) ||
  fail "plan --from-trace with markers: $marked_plan"
plain_plan=$("$memkit" plan --from-trace "$work/plan_plain.csv" --json 2>&1) ||
  fail "plan --from-trace: $plain_plan"
[ "$(value load_bytes "$marked_plan")" = "$(value load_bytes "$plain_plan")" ] &&
  [ "$(value buffers "$marked_plan")" = "$(value buffers "$plain_plan")" ] ||
  fail "plan --from-trace differs with markers: $marked_plan / $plain_plan"

[ "$failures" -eq 0 ] && echo "ok"
