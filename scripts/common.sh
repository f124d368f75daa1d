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

# free_port_pair: prints a free port whose next port is free too (a wardend cell
# member's: clients on the first, the cell's bus on the next).
free_port_pair() {
  local port
  for _ in $(seq 1 100); do
    port=$(free_port) || return 1
    if [ -z "$(ss -Htan "sport = :$((port + 1))")" ]; then
      echo "$port"
      return 0
    fi
  done
  echo "${0##*/}: no two free ports side by side" >&2
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


# postgres_prepare DIR PORT: a fresh PostgreSQL 15 cluster under DIR/pg with one
# superuser warden / warden-secret, password logins over TCP and its own socket dir, as
# tests/support/postgres_server.cc makes it. PostgreSQL refuses to run as root, so when we
# are root the cluster belongs to the `postgres` user and the commands run as it (DIR's
# parents must let it through). Sets postgres_cmd (the server's command line, to start in
# the background), postgres_ready (a shell command that succeeds once it takes logins)
# and postgres_url.
postgres_prepare() {
  local dir=$1/pg port=$2 pg=/usr/lib/postgresql/15/bin as_pg=()
  mkdir -p "$dir/sockets"
  echo warden-secret >"$dir/pwfile"
  if [ "$(id -u)" = 0 ]; then
    chown -R postgres: "$dir"
    as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups --)
  fi
  "${as_pg[@]}" "$pg/initdb" -D "$dir/data" -U warden --pwfile "$dir/pwfile" \
    --auth-host=scram-sha-256 --auth-local=trust -N -E UTF8 --locale=C \
    >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; return 1; }
  postgres_cmd=("${as_pg[@]}" "$pg/postgres" -D "$dir/data" -p "$port" -k "$dir/sockets"
    -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=16MB)
  postgres_ready="$pg/pg_isready -q -h 127.0.0.1 -p $port"
  postgres_url=postgres://warden:warden-secret@127.0.0.1:$port/postgres
}

# mariadb_prepare DIR PORT: a fresh MariaDB data dir under DIR/mysql (root without a
# password on loopback), as tests/support/mariadb_server.cc makes it; the server gets DIR
# as its own tmpdir (a starting mariadbd deletes the temp files in its tmpdir). Sets
# mariadb_cmd, mariadb_ready and mariadb_url; mariadb_add_user PORT must run once the
# server is up.
mariadb_prepare() {
  local dir=$1 port=$2
  mariadb-install-db --no-defaults --user=root --datadir="$dir/mysql" \
    --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 \
    || { cat "$dir/install.log" >&2; return 1; }
  mariadb_cmd=(mariadbd --no-defaults --user=root --datadir="$dir/mysql" --port="$port"
    --bind-address=127.0.0.1 --socket="$dir/mysql.sock" --pid-file="$dir/mysql.pid"
    --tmpdir="$dir" --skip-name-resolve --innodb-buffer-pool-size=16M
    --innodb-log-file-size=8M --max-connections=1000 --skip-log-bin
    --performance-schema=OFF)
  mariadb_ready="mariadb-admin --no-defaults -h 127.0.0.1 -P $port -u root --connect-timeout=2 ping"
  mariadb_url=mysql://warden:secret@127.0.0.1:$port/warden
}

# mariadb_add_user PORT: database "warden" and an account warden / secret with every
# right on it only.
mariadb_add_user() {
  mariadb --no-defaults -h 127.0.0.1 -P "$1" -u root -e "CREATE DATABASE warden; \
    CREATE USER 'warden'@'%' IDENTIFIED BY 'secret'; GRANT ALL ON warden.* TO 'warden'@'%'"
}
