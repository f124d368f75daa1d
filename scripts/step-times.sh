#!/usr/bin/env bash
# Runs a command (make's steps of `make test`) and, when it ends, passed or failed,
# prints how long each step took, so a slow step shows at the end of every CI log.
#
#   scripts/step-times.sh STEP_LOG BESIDE_STEP_LOG COMMAND [ARGS...]
#
# The steps write their own start into STEP_LOG ("EPOCH_SECONDS step name" per line, the
# Makefile's `say`); a step lasts until the next one starts, the last until COMMAND ends.
# Steps run beside another (scripts/beside.sh) write to BESIDE_STEP_LOG instead, printed
# as a table of its own; there a line "EPOCH_SECONDS -" ends the step before it.
set -uo pipefail
log=$1
beside_log=$2
shift 2
mkdir -p "$(dirname "$log")" "$(dirname "$beside_log")"
: >"$log"
: >"$beside_log"
start=$(date +%s)
"$@"
status=$?
end=$(date +%s)

# table TITLE LOG TOTAL_LABEL FROM: one row per step of LOG, then TOTAL_LABEL: from FROM
# (an epoch; empty for the first step's start) to the end of the last step.
table() {
  [ -s "$2" ] || return 0
  printf '\n==> %s (%s)\n' "$1" "$([ "$status" -eq 0 ] && echo passed || echo "failed: exit $status")"
  awk -v end="$end" -v total="$3" -v from="$4" '
    function row(label, seconds) {
      printf "  %-52s %5d s  %3d:%02d\n", label, seconds, seconds / 60, seconds % 60
    }
    { t[NR] = $1; $1 = ""; name[NR] = substr($0, 2) }
    END {
      for (i = 1; i <= NR; i++) {
        if (name[i] == "-") continue
        row(name[i], ((i < NR) ? t[i + 1] : end) - t[i])
      }
      last = (name[NR] == "-") ? t[NR] : end
      row(total, last - ((from == "") ? t[1] : from))
    }' "$2"
}
table 'step times' "$log" total "$start"
table 'step times beside ctest' "$beside_log" 'all beside ctest' ''

exit "$status"
