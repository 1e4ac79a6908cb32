#!/usr/bin/env bash
# Hostile and careless input, one case per cause of docs/RELIABILITY.md ("Hostile
# input"): each command ends within 20 s and 4 GB of address space (the ceiling is
# left off under AddressSanitizer, whose shadow memory needs more) with a clear
# error (exit 1), an out-of-memory report (exit 2) or a correct result (exit 0).
set -u
memkit="$1"
fixtures="$2/tests/data/traces"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
ceiling=""
if ldd "$memkit" 2>/dev/null | grep -q libasan; then
  echo "note: AddressSanitizer build: no memory ceiling, only the 20 s timeout"
else
  ceiling="ulimit -v 4194304;"
fi

# check CAUSE STATUS TEXT -- COMMAND...: runs the command bounded; its exit status
# must be STATUS and its output (stdout and stderr) must hold TEXT.
check() {
  local cause="$1" want="$2" text="$3"; shift 4
  local output status
  output=$(bash -c "$ceiling"' timeout 20 "$@"' bounded "$@" 2>&1)
  status=$?
  if [ "$status" -ne "$want" ]; then
    echo "FAIL cause $cause: $* exited $status, expected $want: ${output:0:300}"
    failures=$((failures + 1)); return
  fi
  if ! grep -qF -- "$text" <<<"$output"; then
    echo "FAIL cause $cause: $* said '${output:0:300}', lacking '$text'"
    failures=$((failures + 1)); return
  fi
  echo "ok   cause $cause: $* -> $status"
}

printf 'a,1,100,0\na,2,3145728,0\nf,1\nf,2\n' > "$work/two.csv"

# 1. The simulator's metadata follows what is mapped, not what is reserved.
check 1 0 "peak reserved" -- "$memkit" replay "$work/two.csv" --granularity 4KiB
check 1 0 "peak reserved" -- "$memkit" replay "$work/two.csv" --granularity 1
check 1 0 "peak reserved" -- "$memkit" replay "$work/two.csv" --capacity 1000000000000000000
# 2. A granularity that is not a power of two is refused.
check 2 1 "is not a power of two" -- "$memkit" replay "$work/two.csv" --granularity 3MiB
# 3. Sizes summing past 2^62 are refused, with the line.
printf 'id,lower,upper,size\n0,0,10,4611686018427387904\n1,0,10,4611686018427387904\n' \
  > "$work/huge.csv"
check 3 1 "huge.csv:3: the buffers' sizes sum past 2^62 bytes" -- "$memkit" plan "$work/huge.csv"
# 4. --time-limit bounds the whole plan: 100k buffers all live together.
awk 'BEGIN { srand(1); print "id,lower,upper,size";
  for (i = 0; i < 100000; i++) { lo = int(rand() * 1000);
    print i "," lo "," lo + 500 + int(rand() * 99500) "," 1 + int(rand() * 1048576) } }' \
  > "$work/dense.csv"
check 4 0 "x LOAD" -- "$memkit" plan "$work/dense.csv" --time-limit 1
# 5. No unbounded input: binary input stops at once, gzip stops at its ceiling.
check 5 1 "/dev/zero:1: a NUL byte: not a trace" -- "$memkit" replay /dev/zero
check 5 1 "/dev/zero:1: a NUL byte: not an instance" -- "$memkit" plan /dev/zero
head -c 100000000 /dev/zero | gzip -1 > "$work/zeros.gz"
check 5 1 "zeros.gz:1: a NUL byte" -- "$memkit" replay "$work/zeros.gz"
# 6. plan --from-trace stops at a NUL byte too, naming the line.
printf 'a,1,100,0\nf,\0001\n' > "$work/nul.csv"
check 6 1 "nul.csv:2: a NUL byte: not a trace" -- "$memkit" plan --from-trace "$work/nul.csv"
# 7. An output never replaces an input, and a failed write leaves no file.
cp "$fixtures/small.trace.csv" "$work/input.csv"
check 7 1 "is an input" -- "$memkit" replay "$work/input.csv" --html "$work/input.csv"
if ! cmp -s "$work/input.csv" "$fixtures/small.trace.csv"; then
  echo "FAIL cause 7: the input was changed"; failures=$((failures + 1))
fi
printf 'id,lower,upper,size\n0,0,10,100\n1,5,20,200\n' > "$work/small.csv"
check 7 1 "cannot open for writing" -- "$memkit" plan "$work/small.csv" --output "$work/no/dir/p.csv"
if [ -c /dev/full ]; then  # a full disk
  check 7 1 "write failed" -- "$memkit" plan "$work/small.csv" --output /dev/full
  if [ ! -c /dev/full ]; then
    echo "FAIL cause 7: /dev/full is no longer a device"; failures=$((failures + 1))
  fi
fi
# 8. Bytes that are not UTF-8, in metadata and in the file name, give valid JSON.
printf '# workload: bad\xff\xfename\na,1,100,0\nf,1\n' > "$work/name"$'\xff'".csv"
check 8 0 '"workload"' -- "$memkit" replay "$work/name"$'\xff'".csv" --json
if ! "$memkit" replay "$work/name"$'\xff'".csv" --json | python3 -c 'import json,sys; json.load(sys.stdin)'; then
  echo "FAIL cause 8: --json is not valid JSON"; failures=$((failures + 1))
fi
# 9. NULL handles in the C API: tests/capi/capi_test.cpp (no command line to reach them).
# 10. Input in messages is short and shows no control bytes.
{ printf 'id,lower,upper,size\n0,1,4,\033[31m'; head -c 500000 /dev/zero | tr '\0' x; printf '\n'; } \
  > "$work/flood.csv"
check 10 1 "flood.csv:2: field 'size' is not an integer" -- "$memkit" plan "$work/flood.csv"
message=$("$memkit" plan "$work/flood.csv" 2>&1)
if [ "${#message}" -gt 300 ] || [[ "$message" == *$'\033'* ]]; then
  echo "FAIL cause 10: message of ${#message} bytes or with an escape"; failures=$((failures + 1))
fi
printf '# workload: \033[2Jcleared\na,1,100,0\nf,1\n' > "$work/escape.csv"
if "$memkit" replay "$work/escape.csv" 2>&1 | grep -q $'\033'; then
  echo "FAIL cause 10: a terminal escape reached the output"; failures=$((failures + 1))
fi
# 11. Documented behaviour: the exit codes of docs/RELIABILITY.md.
: > "$work/empty.csv"
check 11 1 "an empty trace" -- "$memkit" replay "$work/empty.csv"
check 11 1 "is not a finite number" -- "$memkit" replay "$work/two.csv" --arena-slack nan
check 11 1 "is not a finite number" -- "$memkit" plan "$work/huge.csv" --time-limit nan
check 11 1 "" -- "$memkit" replay "$work/two.csv" --no-such-option
check 11 1 "'--frobnicate' is not a command" -- "$memkit" --frobnicate
check 11 2 "OUT OF MEMORY" -- "$memkit" replay "$work/two.csv" --capacity 1MiB
{ gzip -c "$fixtures/small.trace.csv"; printf 'garbage'; } > "$work/trailing.csv.gz"
check 11 1 "not another gzip stream" -- "$memkit" replay "$work/trailing.csv.gz"
check 11 1 "from 1 to 2^62" -- "$memkit" plan "$work/huge.csv" --capacity 9223372036854775808

if [ "$failures" -ne 0 ]; then
  echo "$failures hostile-input checks failed"; exit 1
fi
echo "all hostile-input checks passed"
