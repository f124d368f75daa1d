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
exec "$@" --gtest_output="xml:$report"
