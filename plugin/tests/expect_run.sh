#!/bin/sh
# expect_run.sh EXIT_CODE PATTERN... -- COMMAND ARGS...
# Runs COMMAND, prints its output, and fails unless it exits with EXIT_CODE
# and its output (stdout and stderr) matches every extended regex PATTERN.
want="$1"; shift
patterns=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  patterns="$patterns$1
"
  shift
done
[ "$1" = "--" ] || { echo "expect_run.sh: missing -- before the command" >&2; exit 2; }
shift
output="$("$@" 2>&1)"
code=$?
printf '%s\n' "$output"
status=0
if [ "$code" -ne "$want" ]; then
  echo "expect_run.sh: exit code $code, expected $want" >&2
  status=1
fi
printf '%s' "$patterns" | while IFS= read -r pattern; do
  if ! printf '%s\n' "$output" | grep -Eq -- "$pattern"; then
    echo "expect_run.sh: output does not match: $pattern" >&2
    exit 1
  fi
done || status=1
exit "$status"
