#!/usr/bin/env bash
# Plans the shared instances with `memkit plan` and prints one line per instance.
#   bench/planner/run_planner_bench.sh MEMKIT_BINARY [INSTANCE_DIR] [TIME_LIMIT] [TRACE_DIR]
# INSTANCE_DIR defaults to ../shared/planner (from the repository root). Challenging
# instances are solved with --capacity 1048576; the somas instances are minimised, and
# so are the traces in TRACE_DIR (default ../shared/traces, skipped when absent),
# converted with --from-trace.
set -euo pipefail
memkit=${1:?usage: run_planner_bench.sh MEMKIT_BINARY [INSTANCE_DIR] [TIME_LIMIT] [TRACE_DIR]}
dir=${2:-../shared/planner}
limit=${3:-60}
traces=${4:-../shared/traces}

summarize() {
  python3 -c '
import json, sys
name = sys.argv[1]
d = json.loads(sys.stdin.readline())
print("%-12s %6d %14d %14d %9.5f %8.4f %5s %7s %8.3f" % (name, d["buffers"], d["load_bytes"],
      d["height_bytes"], d["ratio"], d["greedy_ratio"], d["fits"], d["optimal"], d["seconds"]))
' "$1"
}

printf '%-12s %6s %14s %14s %9s %8s %5s %7s %8s\n' instance buffers LOAD height ratio greedy fits optimal seconds
total=0
for f in "$dir"/minimalloc-challenging/*.csv; do
  name=$(basename "$f" .1048576.csv)
  line=$("$memkit" plan "$f" --capacity 1048576 --time-limit "$limit" --json 2>/dev/null || true)
  echo "$line" | summarize "$name"
  total=$(python3 -c "import json,sys; print($total + json.loads(sys.argv[1])['seconds'])" "$line")
done
printf 'challenging total: %.3f s\n' "$total"
for f in "$dir"/somas/*.csv; do
  name=$(basename "$f" .csv)
  "$memkit" plan "$f" --time-limit "$limit" --json 2>/dev/null | summarize "$name"
done
if [ -d "$traces" ]; then
  for f in "$traces"/*.trace.csv.gz; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .trace.csv.gz)
    "$memkit" plan --from-trace "$f" --time-limit "$limit" --json 2>/dev/null | summarize "$name"
  done
fi
