# scripts/common.sh — helpers the benchmark and torture scripts share (sourced).

# A TCP port below the kernel's ephemeral range that no socket uses right now (a server
# that loses the race to it fails to start, and the script stops).
free_port() {
  local port low
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
  (( low > 21000 )) || low=30000
  for _ in $(seq 1 100); do
    port=$(( 20000 + RANDOM % (low - 20000) ))
    if [ -z "$(ss -Htan "sport = :$port")" ]; then
      echo "$port"
      return 0
    fi
  done
  echo "${0##*/}: no free port found" >&2
  return 1
}

# wait_until SECONDS CMD...: runs CMD every 0.1 s until it succeeds; fails after SECONDS.
wait_until() {
  local tries=$(( $1 * 10 )) try; shift
  for (( try = 0; try < tries; try++ )); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  return 1
}

