#!/usr/bin/env bash
# The layer rule at the level of object code: each layer's static library may call
# only functions defined in itself or in the layers its rule allows
# (cmake/layers.cmake). Catches a call that no target_link_libraries states.
#
# Usage: check_symbols.sh LAYERS NM
#   LAYERS  lines "<layer> <archive> <allowed layer>..." (written by tests/CMakeLists.txt;
#           the allowed layers are the rule's closure)
#   NM      the nm program
set -euo pipefail
layers=$1
nm=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The functions and data each layer defines (strong definitions only: an inline
# function or template that several layers emit belongs to none of them).
while read -r layer archive _; do
  "$nm" -g --defined-only "$archive" | awk 'NF == 3 && $2 ~ /^[TDBR]$/ { print $3 }' |
    sort -u >"$tmp/$layer.defined"
done <"$layers"
cat "$tmp"/*.defined | sort -u >"$tmp/all.symbols"

failed=0
while read -r layer archive allowed; do
  cat "$tmp/$layer.defined" >"$tmp/allowed"
  for other in $allowed; do cat "$tmp/$other.defined" >>"$tmp/allowed"; done
  sort -u -o "$tmp/allowed" "$tmp/allowed"
  "$nm" -g --undefined-only "$archive" | awk '$1 == "U" { print $2 }' | sort -u >"$tmp/used"
  # What the layer uses from memkit's layers, less what its rule allows.
  comm -12 "$tmp/used" "$tmp/all.symbols" | comm -23 - "$tmp/allowed" >"$tmp/forbidden"
  if [ -s "$tmp/forbidden" ]; then
    failed=1
    echo "[check_symbols] $layer uses what its rule does not allow (it may use: ${allowed:-nothing}):"
    while read -r symbol; do
      owners=$(grep -lxF "$symbol" "$tmp"/*.defined | xargs -n1 basename | sed 's/\.defined$//' |
        tr '\n' ' ')
      echo "  $(c++filt "$symbol")  (defined in: $owners)"
    done <"$tmp/forbidden"
  fi
done <"$layers"
[ "$failed" -eq 0 ] && echo "[check_symbols] every layer uses only the layers its rule allows"
exit "$failed"
