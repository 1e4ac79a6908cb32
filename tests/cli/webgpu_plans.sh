#!/usr/bin/env bash
# The WebGPU harness on exported plans, without a GPU: every plan run on host
# memory at its own offsets gives the reference results (a placement that
# overlaps two live handles would not), and, where a Dawn kit is unpacked
# (integrations/webgpu/kit), Dawn's null backend validates every dispatch:
# deferred plans none rejected, naive plans of the same graphs rejected.
set -u
memkit="$1"
source_dir="$2"
tests="$(dirname "$memkit")/tests/memkit_tests"
harness="$source_dir/integrations/webgpu/run-plan.mjs"
if ! command -v node >/dev/null; then
  echo "skipped: no node to run integrations/webgpu/run-plan.mjs"; exit 77
fi
if [ ! -x "$tests" ]; then
  echo "skipped: no memkit_tests beside $memkit to export plans"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/plans"
MEMKIT_WEBGPU_PLANS="$work/plans" "$tests" --gtest_filter='*export_plans_for_webgpu' >/dev/null ||
  { echo "FAIL: exporting plans"; exit 1; }
# Small graphs and two with tensors up to 4 MiB (the host run is plain JavaScript).
plans=$(ls "$work"/plans/graph{1,2,3,4,5,21,22}_*.json)
failures=0

expect() {  # output, rule, expected "key=value" on the rule's total line
  local line
  line=$(grep "^total rule=$2:" <<<"$1")
  if grep -q -- " $3\( \|$\)" <<<"$line"; then
    echo "ok   $2: $3"
  else
    echo "FAIL $2: expected $3 in '$line'"; failures=$((failures + 1))
  fi
}

# shellcheck disable=SC2086
host=$(node "$harness" --host $plans 2>&1)
expect "$host" webgpu_usage_scope wrong_results=0
expect "$host" none wrong_results=0
if grep -q "failed:" <<<"$host"; then
  echo "FAIL: $(grep "failed:" <<<"$host" | head -1)"; failures=$((failures + 1))
fi

kit="$source_dir/integrations/webgpu/kit/wg.tar.xz"
if [ -f "$kit" ]; then
  tar xJf "$kit" -C "$work"
  cp "$harness" "$work/pkg/"
  # shellcheck disable=SC2086
  dawn=$(cd "$work/pkg" && XDG_RUNTIME_DIR=/tmp DAWN_BACKEND=null timeout 120 ./node run-plan.mjs $plans 2>&1)
  expect "$dawn" webgpu_usage_scope plans_with_validation_errors=0
  naive=$(grep "^total rule=none:" <<<"$dawn")
  if grep -q "plans_with_validation_errors=[1-9]" <<<"$naive"; then
    echo "ok   none: Dawn rejects naive plans ($naive)"
  else
    echo "FAIL none: Dawn accepted every naive plan ('$naive')"; failures=$((failures + 1))
  fi
else
  echo "note: no $kit, so Dawn's validation is not run here"
fi
exit $((failures > 0))
