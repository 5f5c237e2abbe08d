#!/bin/sh
# run_expect.sh STATUS PATTERN COMMAND...: runs COMMAND, passes when it exits
# with STATUS and its output matches PATTERN (a grep -E expression; "" for any).
want=$1 pattern=$2
shift 2
out=$("$@" 2>&1)
got=$?
printf '%s\n' "$out"
if [ "$got" = 77 ]; then exit 77; fi
if [ "$got" != "$want" ]; then
  echo "run_expect: exit status $got, expected $want" >&2
  exit 1
fi
if [ -n "$pattern" ] && ! printf '%s\n' "$out" | grep -Eq "$pattern"; then
  echo "run_expect: output does not match /$pattern/" >&2
  exit 1
fi
exit 0
