# Sourced by steady_instructions.sh and cold_misses.sh: split_steady TOOL TRACE WORK
# writes WORK/full.csv (the trace) and WORK/first10.csv (its first 10 steps, as a
# trace of its own) and sets steady_events to the events between: a count over the
# whole trace minus the same count over its first 10 steps is the steady state's.
split_steady() {
  local tool=$1 trace=$2 work=$3 cut
  zcat -f "$trace" > "$work/full.csv"
  cut=$(grep -n "^s$" "$work/full.csv" | sed -n 11p | cut -d: -f1)
  [ -n "$cut" ] || { echo "[$tool] $trace has fewer than 11 step markers" >&2; exit 1; }
  head -$((cut - 1)) "$work/full.csv" |
    sed 's/^# steps: .*/# steps: 10/; s/^# warmup_steps: .*/# warmup_steps: 5/' > "$work/first10.csv"
  steady_events=$(( $(grep -c "^[af]," "$work/full.csv") - $(grep -c "^[af]," "$work/first10.csv") ))
}
