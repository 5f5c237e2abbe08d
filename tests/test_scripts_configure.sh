#!/usr/bin/env bash
# scripts/train's configuration, then scripts/test's, in one build folder,
# twice over: after each of scripts/test's configurations ctest lists every
# tests/test_*.c and the examples are on; scripts/train's never turns them
# off. Both scripts configure through scripts/configure, checked here too.
# Configures only (no build). Usage: test_scripts_configure.sh SOURCE_DIR
set -euo pipefail
src=$1
fail() { echo "FAIL: $*"; exit 1; }
grep -q '^scripts/configure train "$build"' "$src/scripts/train" || fail "scripts/train does not use scripts/configure train"
grep -q '^scripts/configure "$config_purpose" "$build"' "$src/scripts/test" || fail "scripts/test does not use scripts/configure"
# `cmake --install` needs every target it installs built: scripts/train builds them all.
for t in $(sed -n 's/^install(TARGETS \([^)]*\)/\1/p' "$src/CMakeLists.txt" | grep -oE '\b(clt|cltensor_[a-z]+)\b'); do
  grep -qE -- "--target .*\\b$t\\b" "$src/scripts/train" || fail "scripts/train does not build $t, which cmake --install installs"
done
dir=$(mktemp -d /tmp/clt-test-scripts-XXXXXX)
trap 'rm -rf "$dir"' EXIT
want=$(ls "$src"/tests/test_*.c | wc -l)
count() { (cd "$dir" && ctest -N) | sed -n 's/^Total Tests: //p'; }
option() { sed -n "s/^$1:BOOL=//p" "$dir/CMakeCache.txt"; }
for round in 1 2; do
  "$src/scripts/configure" train "$dir"
  [ "$round" = 1 ] || [ "$(count)" -ge "$want" ] || fail "round $round: scripts/train's configuration dropped the tests"
  "$src/scripts/configure" test "$dir"
  n=$(count)
  [ "${n:-0}" -ge "$want" ] || fail "round $round: ctest lists ${n:-0} tests, want at least $want"
  [ "$(option CLT_BUILD_EXAMPLES)" = ON ] || fail "round $round: examples are off"
  [ "$(option CLT_BUILD_TESTS)" = ON ] || fail "round $round: tests are off"
  echo "round $round: train then test configured $dir: $n tests, examples on"
done
# The old failure: a folder configured with the tests off runs nothing, and
# ctest --no-tests=error (which every script passes) says so.
rm -rf "$dir"/*
cmake -S "$src" -B "$dir" -DCLT_BUILD_TESTS=OFF >/dev/null
if (cd "$dir" && ctest --no-tests=error >/dev/null 2>&1); then fail "ctest --no-tests=error passed with no tests"; fi
echo "ok"
