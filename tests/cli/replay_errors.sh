#!/usr/bin/env bash
# memkit replay on bad input: each kind of error names the file and line, and the
# command exits non-zero without crashing.
set -u
memkit="$1"
fixtures="$2/tests/data/traces"
failures=0

expect_error() {  # fixture, expected text in the message
  local output status
  output=$("$memkit" replay "$fixtures/$1" 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne 1 ]; then
    echo "FAIL $1: exit status $status, expected 1"; failures=$((failures + 1)); return
  fi
  if ! grep -qF -- "$2" <<<"$output"; then
    echo "FAIL $1: message '$output' lacks '$2'"; failures=$((failures + 1)); return
  fi
  echo "ok   $1: $output"
}

expect_error bad_action.csv "bad_action.csv:3: unknown action 'x'"
expect_error malformed_line.csv "malformed_line.csv:2: bad size '12ab'"
expect_error missing_field.csv "missing_field.csv:2: expected"
expect_error unknown_free.csv "unknown_free.csv:3: free of unknown block id 5"
expect_error repeated_free.csv "repeated_free.csv:3: repeated free of block id 0"
expect_error live_allocation.csv "live_allocation.csv:2: allocation of block id 0, which is live"
expect_error truncated.trace.csv.gz "truncated gzip stream"
expect_error rmm_unknown_action.csv "rmm_unknown_action.csv:3: unknown action 'reallocate'"
expect_error rmm_unknown_free.csv "rmm_unknown_free.csv:3: free of unknown pointer"
expect_error pytorch_unknown_free.json "pytorch_unknown_free.json:3: free of unknown address"
expect_error pytorch_unknown_action.json "pytorch_unknown_action.json:3: unknown action 'teleport'"
expect_error pytorch_truncated.json "pytorch_truncated.json:3: invalid JSON"
expect_error no_such_file.csv "cannot open"

# The messages start with the function that raised them.
if ! "$memkit" replay "$fixtures/bad_action.csv" 2>&1 | grep -q '^\[memkit::trace::read\] '; then
  echo "FAIL: message does not start with [memkit::trace::read]"; failures=$((failures + 1))
fi
# A bad option value is an error too, with exit status 1.
for option in "--capacity lots" "--arena-slack nan" "--arena-slack 11" "--no-such-option"; do
  # shellcheck disable=SC2086
  output=$("$memkit" replay $option "$fixtures/small.trace.csv" 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne 1 ]; then
    echo "FAIL: $option gave status $status: $output"; failures=$((failures + 1))
  fi
done
# A granularity that is not a power of two is refused, not met with false
# out-of-memory errors.
output=$("$memkit" replay --granularity 3MiB "$fixtures/small.trace.csv" 2>&1 >/dev/null)
status=$?
if [ "$status" -ne 1 ] || ! grep -qF "granularity 3145728 is not a power of two" <<<"$output"; then
  echo "FAIL: --granularity 3MiB gave status $status: $output"; failures=$((failures + 1))
fi
# An output never overwrites an input, and one that cannot be written leaves no file.
copy=$(mktemp); cp "$fixtures/small.trace.csv" "$copy"
output=$("$memkit" replay "$copy" --html "$copy" 2>&1 >/dev/null)
status=$?
if [ "$status" -ne 1 ] || ! grep -qF "is an input" <<<"$output" ||
   ! cmp -s "$copy" "$fixtures/small.trace.csv"; then
  echo "FAIL: --html over the input gave status $status: $output"; failures=$((failures + 1))
fi
rm -f "$copy"
output=$("$memkit" replay "$fixtures/small.trace.csv" --html /nonexistent/dir/r.html 2>&1 >/dev/null)
status=$?
if [ "$status" -ne 1 ] || ! grep -qF "/nonexistent/dir/r.html: cannot open for writing" <<<"$output"; then
  echo "FAIL: an unwritable --html gave status $status: $output"; failures=$((failures + 1))
fi
# Metadata that is not UTF-8 still gives JSON in UTF-8 (U+FFFD in its place).
bad=$(mktemp --suffix=.csv); printf '# workload: bad\xff\xfename\na,1,100,0\nf,1\n' > "$bad"
if ! output=$("$memkit" replay "$bad" --json) || ! grep -q '"workload"' <<<"$output" ||
   ! iconv -f UTF-8 -t UTF-8 <<<"$output" >/dev/null; then
  echo "FAIL: --json of a trace with non-UTF-8 metadata"; failures=$((failures + 1))
fi
rm -f "$bad"
# Binary input stops at its first NUL byte, with the line named, however long it is.
output=$(timeout 20 "$memkit" replay /dev/zero 2>&1 >/dev/null)
status=$?
if [ "$status" -ne 1 ] || ! grep -qF "/dev/zero:1: a NUL byte: not a trace" <<<"$output"; then
  echo "FAIL: replay /dev/zero gave status $status: $output"; failures=$((failures + 1))
fi
# Terminal escapes in a trace's metadata do not reach the terminal.
esc=$(mktemp --suffix=.csv); printf '# workload: \033[31mred\na,1,100,0\nf,1\n' > "$esc"
if "$memkit" replay "$esc" | grep -q $'\033'; then
  echo "FAIL: an escape byte from the trace reached the output"; failures=$((failures + 1))
fi
rm -f "$esc"
# Running out of memory at the capacity given: exit status 2, the line named.
output=$("$memkit" replay --capacity 2MiB "$fixtures/small.trace.csv" 2>&1)
status=$?
if [ "$status" -ne 2 ] || ! grep -q "OUT OF MEMORY" <<<"$output"; then
  echo "FAIL: out of memory gave status $status: $output"; failures=$((failures + 1))
fi
[ "$failures" -eq 0 ]
