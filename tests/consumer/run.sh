#!/usr/bin/env bash
# The package as its users see it: installs the build into a temporary prefix, then
# builds and runs against it
#   1. tests/consumer as a CMake project: find_package(memkit), memkit::memkit from
#      C++ and memkit::shared (libmemkit.so) from C;
#   2. the same C program through pkg-config (memkit.pc);
# and checks that libmemkit.so exports the C API alone, every function of memkit.h.
#
# Usage: run.sh BUILD_DIR SOURCE_DIR GENERATOR C_COMPILER CXX_COMPILER [FLAGS]
#   FLAGS: compile and link flags the build used (its sanitizers), for the consumers.
set -euo pipefail
build=$1
source=$2
generator=$3
cc=$4
cxx=$5
flags=${6:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
step() { echo "--- $*"; }
# Runs a command quietly; shows its output when it fails.
quiet() {
  if ! "$@" >"$work/log" 2>&1; then
    cat "$work/log"
    echo "[run.sh] failed: $*"
    exit 1
  fi
}

step "cmake --install into $prefix"
quiet cmake --install "$build" --prefix "$prefix"

step "find_package(memkit)"
quiet cmake -S "$source/tests/consumer" -B "$work/cmake" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags"
quiet cmake --build "$work/cmake"
"$work/cmake/consumer_cpp"
"$work/cmake/consumer_c"

step "pkg-config memkit"
pc=$(find "$prefix" -name memkit.pc)
export PKG_CONFIG_PATH=$(dirname "$pc")
echo "memkit.pc: version $(pkg-config --modversion memkit)"
libdir=$(pkg-config --variable=libdir memkit)
# shellcheck disable=SC2046,SC2086
quiet "$cc" $flags "$source/tests/consumer/consumer.c" -o "$work/consumer_pkgconfig" \
  $(pkg-config --cflags --libs memkit) -Wl,-rpath,"$libdir"
"$work/consumer_pkgconfig"

step "libmemkit.so exports the C API alone"
library=$(readlink -f "$libdir/libmemkit.so")
echo "$(basename "$library"), soname $(objdump -p "$library" | awk '$1 == "SONAME" { print $2 }')"
nm -D --defined-only "$library" | awk '{ print $NF }' | sort -u >"$work/exported"
grep -oE 'MEMKIT_API [^(]*[^a-z_](memkit_[a-z0-9_]+)\(' "$prefix/include/memkit/memkit.h" |
  grep -oE 'memkit_[a-z0-9_]+\($' | tr -d '(' | sort -u >"$work/declared"
if ! diff -u "$work/declared" "$work/exported"; then
  echo "[run.sh] libmemkit.so's exported symbols (+) differ from memkit.h's functions (-)"
  exit 1
fi
echo "$(wc -l <"$work/exported") symbols, every one a memkit.h function"
