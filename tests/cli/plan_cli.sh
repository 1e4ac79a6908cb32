#!/usr/bin/env bash
# memkit plan end to end: a plan is written and valid (exit 0), a capacity below
# LOAD is a clear failure (exit 2), a malformed instance names its line (exit 1),
# and --json carries the documented fields.
set -u
memkit="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

printf 'id,lower,upper,size\n0,0,2,4\n1,1,3,4\n2,2,4,8\n3,3,5,4\n' > "$work/ok.csv"
printf 'id,lower,upper,size\n0,0,2,4\n1,1,x,4\n' > "$work/bad.csv"

"$memkit" plan "$work/ok.csv" --capacity 12 --output "$work/plan.csv" > /dev/null
status=$?
[ "$status" -eq 0 ] || fail "fitting plan: exit status $status, expected 0"
[ "$(head -1 "$work/plan.csv" 2>/dev/null)" = "id,lower,upper,size,offset" ] ||
  fail "plan file header: $(head -1 "$work/plan.csv" 2>/dev/null)"
# Every pair alive at once must not share a byte, and all must lie below 12.
if ! awk -F, 'NR > 1 { l[NR] = $2; u[NR] = $3; s[NR] = $4; o[NR] = $5; n = NR }
  END {
    for (i = 2; i <= n; i++) {
      if (o[i] + s[i] > 12) exit 1
      for (j = i + 1; j <= n; j++)
        if (l[i] < u[j] && l[j] < u[i] && o[i] < o[j] + s[j] && o[j] < o[i] + s[i]) exit 1
    }
  }' "$work/plan.csv"; then
  fail "the written plan overlaps or exceeds the capacity"
fi

output=$("$memkit" plan "$work/ok.csv" --capacity 7 --time-limit 1 2>&1 >/dev/null)
status=$?
[ "$status" -eq 2 ] || fail "capacity below LOAD: exit status $status, expected 2"
grep -qF "no plan within capacity 7 bytes" <<<"$output" || fail "capacity message: '$output'"

output=$("$memkit" plan "$work/bad.csv" 2>&1 >/dev/null)
status=$?
[ "$status" -eq 1 ] || fail "malformed instance: exit status $status, expected 1"
grep -qF "bad.csv:3: field 'upper' is not an integer" <<<"$output" ||
  fail "malformed message: '$output'"
grep -q '^\[memkit::planner::read_instance\] ' <<<"$output" ||
  fail "message does not start with [memkit::planner::read_instance]"

# Bad options exit 1; an output never overwrites the input.
for option in "--time-limit nan" "--time-limit -1" "--capacity 0"; do
  # shellcheck disable=SC2086
  "$memkit" plan "$work/ok.csv" $option > /dev/null 2>&1
  status=$?
  [ "$status" -eq 1 ] || fail "$option: exit status $status, expected 1"
done
cp "$work/ok.csv" "$work/keep.csv"
output=$("$memkit" plan "$work/keep.csv" --output "$work/keep.csv" 2>&1 >/dev/null)
status=$?
[ "$status" -eq 1 ] && grep -qF "is an input" <<<"$output" && cmp -s "$work/keep.csv" "$work/ok.csv" ||
  fail "--output over the input: exit status $status, '$output'"

# A trace with a NUL byte (binary input) is an error naming its line, not lines
# merged or dropped; /dev/zero ends at once.
printf 'a,1,64,0\na,2\000,64,0\n' > "$work/nul.csv"
output=$("$memkit" plan --from-trace "$work/nul.csv" 2>&1 >/dev/null)
status=$?
[ "$status" -eq 1 ] && grep -qF "nul.csv:2: a NUL byte" <<<"$output" ||
  fail "NUL byte in a trace: exit status $status, '$output'"
output=$(timeout 20 "$memkit" plan --from-trace /dev/zero 2>&1 >/dev/null)
status=$?
[ "$status" -eq 1 ] || fail "plan --from-trace /dev/zero: exit status $status, '$output'"

json=$("$memkit" plan "$work/ok.csv" --json)
for key in buffers load_bytes height_bytes seconds; do
  grep -q "\"$key\":" <<<"$json" || fail "--json lacks $key: $json"
done

[ "$failures" -eq 0 ] && echo "all memkit plan checks passed"
exit $((failures > 0))
