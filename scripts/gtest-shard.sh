#!/usr/bin/env bash
# Runs one shard of a GoogleTest executable for CTest (tests/CMakeLists.txt,
# warden_add_test): the cases GTEST_SHARD_INDEX of GTEST_TOTAL_SHARDS selects, one after
# another in this one process, with GoogleTest's XML report written to REPORT.
#
#   scripts/gtest-shard.sh REPORT EXECUTABLE [ARGS...]
#
# The report of an earlier run is removed first, so a shard that crashes before it
# writes one leaves no report at all, never a stale one that scripts/test-report.py
# would count.
#
# A shard that fails prints what failed first (each failed case's message, and the last
# lines, where a crash or a sanitizer says why), then its whole output: a CI log that
# keeps only the start of a failing test's output still names the failure.
set -euo pipefail
report=$1
shift
rm -f "$report"
mkdir -p "$(dirname "$report")"
# Work from outside the suite (a busy CI machine, CPU hogs) must not decide a case's
# outcome: where allowed (as root), the shard and the servers it starts (which inherit
# its priority) run ahead of it. Every shard alike, so the shards still share the
# machine evenly among themselves; elsewhere this does nothing.
renice -n -5 -p $$ >/dev/null 2>&1 || true
output=$(mktemp "${TMPDIR:-/tmp}/warden-shard-output.XXXXXX")
child=
# CTest ends a shard past its TIMEOUT with a signal to this script: pass it on.
trap 'rm -f "$output"' EXIT
trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null || true; cat "$output"; exit 143' TERM INT
status=0
# Started in the background so that this script can pass CTest's signal on, with SIGINT
# and SIGQUIT at their defaults again (bash ignores them in background commands; the CLI
# tests send SIGINT through `warden run`).
(
  trap - INT QUIT
  exec "$@" --gtest_output="xml:$report"
) >"$output" 2>&1 &
child=$!
wait "$child" || status=$?
if [ "$status" -ne 0 ]; then
  echo "==> this shard failed (exit $status): what failed, then its whole output"
  grep -E -A8 '(: Failure$|^\[  FAILED  \]|ERROR: AddressSanitizer|runtime error:|^terminate called)' \
    "$output" | head -n 120 || true
  echo "==> its last 30 lines:"
  tail -n 30 "$output"
  echo "==> its whole output:"
fi
cat "$output"
exit "$status"
