#!/usr/bin/env bash
# memkit replay --min-capacity on a real trace: the answer lies between peak live and
# the unconstrained peak reserved, the trace runs at it and not 1 MiB below.
set -u
memkit="$1"
trace="$2/data/traces/resnet50_train.trace.csv.gz"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
value() { grep -o "\"$1\": [0-9]*" <<<"$output" | grep -o '[0-9]*$'; }

output=$("$memkit" replay --json --min-capacity "$trace") || fail "exit $?"
live=$(value peak_live_bytes)
reserved=$(value peak_reserved_bytes)
minimum=$(value min_capacity_bytes)
mib=1048576
echo "peak live $live, peak reserved $reserved, min capacity $minimum"
[ "$minimum" -ge "$live" ] || fail "min capacity below peak live"
[ "$minimum" -le $(( (reserved + mib - 1) / mib * mib )) ] || fail "min capacity above peak reserved"
"$memkit" replay --capacity "$minimum" "$trace" >/dev/null || fail "does not run at $minimum"
"$memkit" replay --capacity $((minimum - mib)) "$trace" >/dev/null
[ $? -eq 2 ] || fail "runs at 1 MiB less than the minimum"
[ "$failures" -eq 0 ] && echo "ok"
