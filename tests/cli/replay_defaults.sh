#!/usr/bin/env bash
# memkit replay with no flags runs the allocator as a program gets it by default
# (allocator_options{}: 2% arena slack), and --arena-slack 0 still gives the floor.
set -u
memkit="$1"
trace="$2/data/traces/bert_infer_varlen.trace.csv.gz"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# The figures that depend on the allocator's layout, one per line.
figures() {
  grep -E '"(arena_slack|peak_reserved_bytes|peak_active_bytes|backend_allocs|backend_frees|maps|unmaps)": ' |
    sort
}

plain=$("$memkit" replay --json "$trace") || fail "no flags: exit $?"
explicit=$("$memkit" replay --json --arena-slack 0.02 "$trace") || fail "--arena-slack 0.02: exit $?"
floor=$("$memkit" replay --json --arena-slack 0 "$trace") || fail "--arena-slack 0: exit $?"
grep -q '"arena_slack": 0.02,' <<<"$plain" || fail "no flags should report arena_slack 0.02"
grep -q '"arena_slack": 0.0,' <<<"$floor" || fail "--arena-slack 0 should report arena_slack 0"
[ "$(figures <<<"$plain")" = "$(figures <<<"$explicit")" ] ||
  fail "no flags differs from --arena-slack 0.02: $(diff <(figures <<<"$plain") <(figures <<<"$explicit"))"
[ "$(figures <<<"$plain")" != "$(figures <<<"$floor")" ] ||
  fail "no flags reports the same as the floor (--arena-slack 0)"
# The keys replay has always had are all still there.
for key in trace path format backend policy capacity_bytes granularity_bytes completed events \
           allocations streams peak_live_bytes peak_reserved_bytes peak_active_bytes \
           reserved_over_live backend_allocs backend_frees maps unmaps ns_per_event \
           simulated_backend_ns replay_ns metadata; do
  grep -q "\"$key\": " <<<"$plain" || fail "key $key missing"
done
# The table names the slack too.
"$memkit" replay "$trace" | grep -q "arena slack 0.02" || fail "the table does not show the slack"
"$memkit" replay --help | grep -q -- "--arena-slack .*=0.02$" ||
  fail "--help does not show 0.02 as --arena-slack's default"
[ "$failures" -eq 0 ] && echo "ok"
