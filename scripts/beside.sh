#!/usr/bin/env bash
# Runs one command beside another and fails if either failed: `make test` runs the fuzz
# step and the release build beside ctest, whose shards spend most of their time waiting
# on servers and timers, not on the cores (docs/testing.md, "Steps beside ctest").
#
#   scripts/beside.sh LOG STEP_LOG 'BESIDE COMMAND' FOREGROUND COMMAND [ARGS...]
#
# BESIDE COMMAND (one string, run by bash) writes its output to LOG, which is printed
# once both have ended, so the two never interleave in a CI log. When it ends, a line
# "EPOCH_SECONDS -" in STEP_LOG marks the end of its last step for scripts/step-times.sh.
# Interrupted, the command beside is stopped too.
set -uo pipefail
log=$1
step_log=$2
beside=$3
shift 3

mkdir -p "$(dirname "$log")"
# Its own process group, so it can be stopped whole.
set -m
bash -c "$beside" >"$log" 2>&1 &
beside_pid=$!
set +m
trap 'kill -TERM -- -"$beside_pid" 2>/dev/null; exit 130' INT TERM

"$@"
status=$?

wait "$beside_pid"
beside_status=$?
printf '%s -\n' "$(date +%s)" >>"$step_log"
trap - INT TERM

printf '\n==> beside it: %s (output follows)\n' "$beside"
cat "$log"
if [ "$beside_status" -ne 0 ]; then
  printf '\n==> failed beside it: %s (exit %d; output above and in %s)\n' \
    "$beside" "$beside_status" "$log"
fi
if [ "$status" -ne 0 ]; then
  printf '\n==> failed: %s (exit %d)\n' "$*" "$status"
  exit "$status"
fi
exit "$beside_status"
