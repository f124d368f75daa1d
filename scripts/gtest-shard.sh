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
exec "$@" --gtest_output="xml:$report"
