#!/usr/bin/env bash
# expect_exit.sh CODE CMD...: runs CMD, passes its stderr through, and fails unless it exits
# with exactly CODE (lit's `not` only checks for non-zero).
want=$1; shift
"$@"
got=$?
if [ "$got" -ne "$want" ]; then
  echo "expect_exit: '$*' exited $got, expected $want" >&2
  exit 1
fi
exit 0
