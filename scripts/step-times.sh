#!/usr/bin/env bash
# Runs a command (make's steps of `make test`) and, when it ends, passed or failed,
# prints how long each step took, so a slow step shows at the end of every CI log.
#
#   scripts/step-times.sh STEP_LOG COMMAND [ARGS...]
#
# The steps write their own start into STEP_LOG ("EPOCH_SECONDS step name" per line, the
# Makefile's `say`); a step lasts until the next one starts, the last until COMMAND ends.
set -uo pipefail
log=$1
shift
mkdir -p "$(dirname "$log")"
: >"$log"
start=$(date +%s)
"$@"
status=$?
end=$(date +%s)

printf '\n==> step times (%s)\n' "$([ "$status" -eq 0 ] && echo passed || echo "failed: exit $status")"
awk -v end="$end" -v start="$start" '
  { t[NR] = $1; $1 = ""; name[NR] = substr($0, 2) }
  END {
    for (i = 1; i <= NR; i++) {
      stop = (i < NR) ? t[i + 1] : end
      printf "  %-52s %5d s  %3d:%02d\n", name[i], stop - t[i], (stop - t[i]) / 60, (stop - t[i]) % 60
    }
    printf "  %-52s %5d s  %3d:%02d\n", "total", end - start, (end - start) / 60, (end - start) % 60
  }' "$log"
exit "$status"
