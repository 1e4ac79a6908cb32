#!/usr/bin/env bash
# The layer rule at the level of #include lines (docs/ARCHITECTURE.md), for what the
# link graph cannot see: headers.
#
#   - include/memkit/types.hpp, the ground floor, includes no memkit header;
#   - the backend level (backend.hpp, device_data.hpp, capabilities.hpp, errors.hpp,
#     types.hpp, and every header under include/memkit/backends/ and
#     include/memkit/adaptors/) includes only the backend level: never the
#     allocator, devices or sharing;
#   - placement and pools (src/placement/, src/pools/) are numbers: no backend
#     interface, only the ground floor, errors and the planner's numbers;
#   - the allocator (include/memkit/allocator.hpp, src/allocator/) sees only the
#     memory interface: not the data interface, not the capabilities;
#   - the command-line tool, the PyTorch library and the Python module use the
#     public headers: from src/ only reports/reports.hpp, the JSON documents of
#     replay and plan, which have no public header yet; and their own headers
#     (the tool's commands.hpp and output_file.hpp, the PyTorch library's torch_abi.hpp).
#
# Usage: check_headers.sh SOURCE_DIR
set -euo pipefail
root=$1
failed=0

# Prints the memkit headers a file includes ("memkit/x.hpp" or "dir/x.hpp").
includes() { sed -n 's/^#include "\([^"]*\)".*/\1/p' "$1"; }

# check FILE ALLOWED_REGEX WHAT: every quoted include of FILE matches ALLOWED_REGEX.
check() {
  local file=$1 allowed=$2 what=$3 header
  while read -r header; do
    [ -z "$header" ] && continue
    if ! [[ $header =~ $allowed ]]; then
      echo "[check_headers] ${file#"$root"/} includes $header ($what)"
      failed=1
    fi
  done < <(includes "$file")
}

check "$root/include/memkit/types.hpp" '^$' "the ground floor includes no memkit header"

backend_level='^memkit/(types|errors|backend|device_data|capabilities)\.hpp$'
for file in "$root"/include/memkit/{types,errors,backend,device_data,capabilities}.hpp \
  "$root"/include/memkit/backends/*.hpp "$root"/include/memkit/adaptors/*.hpp; do
  check "$file" "$backend_level" "the backend level includes only the backend level"
done

numbers='^(memkit/(types|errors|planner)\.hpp|(common|placement|pools)/[a-z_]+\.hpp)$'
for file in "$root"/src/placement/* "$root"/src/pools/*; do
  check "$file" "$numbers" "placement and pools are numbers: no backend interface"
done

memory_only='^(memkit/(types|errors|backend|allocator|statistics|planner)\.hpp|(allocator|common|placement|pools)/[a-z_]+\.hpp)$'
for file in "$root"/include/memkit/allocator.hpp "$root"/src/allocator/*; do
  check "$file" "$memory_only" "the allocator sees only the memory interface"
done

public_only='^(memkit/[a-z_/]+\.(hpp|h)|commands\.hpp|output_file\.hpp|reports/reports\.hpp|torch_abi\.hpp)$'
for file in "$root"/tools/*.cpp "$root"/tools/*.hpp "$root"/integrations/pytorch/*.cpp \
  "$root"/python/src/*.cpp; do
  check "$file" "$public_only" "tools and integrations use the public headers"
done

[ "$failed" -eq 0 ] && echo "[check_headers] every header includes only what its layer allows"
exit "$failed"
