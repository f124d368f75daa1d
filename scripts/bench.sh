#!/usr/bin/env bash
# Runs warden's standard benchmark set against throwaway servers and prints every figure.
#
#   scripts/bench.sh                     # release build under build/release, 10 s runs
#   BENCH_DURATION=3s scripts/bench.sh   # shorter timed runs
#   BENCH_ROUNDS=1 scripts/bench.sh      # warden then baseline, not alternating
#   WARDEN_BUILD=build/asan scripts/bench.sh
#   BENCH_SETS="etcd zk" scripts/bench.sh  # only some sets: resp (warden://, redis://,
#                                        # mem://), capacity (wardend), tls, redlock, etcd,
#                                        # zk, db (postgres://, mysql://), cluster
#                                        # (redis+cluster://), primitives (semaphores and
#                                        # multi-locks on wardend), releases (unwaited
#                                        # against confirmed, per engine), elections
#                                        # (failover per engine), cache (lock caching
#                                        # on warden://), interop (the layouts other
#                                        # languages' locks share), async (10,000
#                                        # asynchronous waits per engine); default all
#
# Starts one redis-server (the baseline) and three wardends (throughput, memory check,
# connection check), each on a free 127.0.0.1 port with its own temp dir, and stops
# them by PID on exit. The set:
#   - warden://, redis:// and mem://, 1 and 8 clients, uncontended and contended, each with
#     --baseline against the same redis-server (same clients, keys and duration, in
#     alternating rounds so that load from elsewhere on the machine hits both alike);
#   - hand-off latency to a queued waiter (1000 samples) on warden://, redis:// and mem://;
#     (warden:// against redis:// is the ratio of their cycles/s in these runs);
#   - warden:// with lock caching (--cache), 1 and 8 clients, uncontended, against the raw
#     Redis lock; the hand-off from a cached lock beside the uncached one (1000 samples);
#     etcd://, zk:// and redis:// cached, 1 client, against their raw locks, and the same
#     hand-offs;
#   - 1,000,000 held locks on a fresh wardend (bytes per lock);
#   - 10,000 idle connections on a fresh wardend;
#   - wardens:// (TLS) against warden:// (plain) on one wardend with both listeners, 1 and
#     8 clients, uncontended and contended (certificates made by the openssl CLI);
#   - redlock:// on 3 and on 5 masters (redis-servers of their own), 1 and 8 clients,
#     uncontended and contended, against the raw single-Redis lock on the baseline
#     server; redis:// against the same baseline in the same run;
#   - etcd:// on one etcd member and on a 3-member cluster (etcd's default timings), 1 and
#     8 clients, uncontended and contended, each with --baseline against etcd's own lock
#     service (v3lock) on the same cluster; hand-off on 1 client;
#   - zk:// on a standalone ZooKeeper, 1 and 8 clients, uncontended and contended, each
#     with --baseline against raw create(EPHEMERAL_SEQUENTIAL)+delete pairs; hand-off;
#   - postgres:// on a fresh PostgreSQL 15 and mysql:// on a fresh MariaDB, 1 and 8
#     clients, uncontended and contended, each with --baseline against the database's raw
#     lock pairs (pg_advisory_lock + pg_advisory_unlock, GET_LOCK + RELEASE_LOCK) on the
#     same server; hand-off;
#   - redis+cluster:// on a Redis Cluster of 3 masters and on one of 1 master (no
#     replicas), 8 and 32 clients over 16 locks each, uncontended, each against the raw
#     lock on the same cluster, each key sent to its slot's master;
#   - on a fresh wardend, 8 clients over 16 keys, uncontended and contended, each against
#     the same wardend's lock: one permit of a semaphore of 4 per cycle, and multi-locks
#     of 2 and of 8 members per cycle;
#   - releases sent without waiting (unlock(), a dropped Lease: the default) against
#     confirmed ones (--confirm-releases), 1 and 8 clients, uncontended, on warden://,
#     redis://, etcd:// (one member), zk://, postgres:// and mysql://, each against its
#     raw baseline in the same run;
#   - election failover (a `warden elect` leader killed -9 → the queued candidate leads,
#     and → an observer reports it), 5 samples with 2 s leases, on warden://, redis://,
#     etcd:// (one member), zk:// (session_timeout_ms=2000), postgres:// and mysql://;
#   - the layouts shared with other languages' locks (docs/interop.md), 1 and 8 clients,
#     uncontended, against their backend's raw lock on the same server, and the
#     hand-off: redis://?layout=simple against SET NX, etcd://?layout=concurrency (one
#     member) against v3lock, zk://?layout=curator against raw create+delete pairs.
# docs/performance.md explains the figures.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${WARDEN_BUILD:-$root/build/release}
case "$build" in /*) ;; *) build=$root/$build ;; esac
duration=${BENCH_DURATION:-10s}
sets=" ${BENCH_SETS:-resp cache capacity tls redlock etcd zk db cluster primitives releases elections interop async} "
rounds=${BENCH_ROUNDS:-5}
warden=$build/src/cli/warden
wardend=$build/src/server/wardend

for bin in "$warden" "$wardend"; do
  if [ ! -x "$bin" ]; then
    echo "bench.sh: $bin not built (cmake --preset release && cmake --build build/release -j2)" >&2
    exit 1
  fi
done
for tool in redis-server redis-cli ss etcd java openssl mariadbd mariadb-install-db; do
  command -v "$tool" >/dev/null || { echo "bench.sh: $tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done

# shellcheck source=scripts/common.sh
. "$root/scripts/common.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/warden-bench-XXXXXX")
# PostgreSQL runs as its own user when we are root: it must be able to reach its dirs.
chmod 755 "$tmp"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_redis [NAME]: sets redis_port.
start_redis() {
  local name=${1:-redis}
  redis_port=$(free_port)
  mkdir -p "$tmp/$name"
  redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$tmp/$name" >"$tmp/$name.log" 2>&1 &
  pids+=($!)
  wait_until 10 redis-cli -p "$redis_port" ping || { cat "$tmp/$name.log" >&2; exit 1; }
}

# start_wardend NAME [OPTION...]: sets wardend_port.
start_wardend() {
  local name=$1
  shift
  wardend_port=$(free_port)
  mkdir -p "$tmp/$name"
  "$wardend" --listen "127.0.0.1:$wardend_port" --data-dir "$tmp/$name" "$@" >"$tmp/$name.log" 2>&1 &
  pids+=($!)
  wait_until 10 grep -q "listening on" "$tmp/$name.log" || { cat "$tmp/$name.log" >&2; exit 1; }
}

# start_etcd NAME MEMBERS: a fresh etcd cluster of MEMBERS on free ports; sets etcd_url.
start_etcd() {
  local name=$1 members=$2 i cluster=""
  local client_ports=() peer_ports=()
  for (( i = 0; i < members; i++ )); do
    client_ports+=("$(free_port)")
    peer_ports+=("$(free_port)")
    cluster+="${cluster:+,}m$i=http://127.0.0.1:${peer_ports[i]}"
  done
  etcd_url=etcd://
  for (( i = 0; i < members; i++ )); do
    mkdir -p "$tmp/$name/m$i"
    etcd --name "m$i" --data-dir "$tmp/$name/m$i" \
      --listen-client-urls "http://127.0.0.1:${client_ports[i]}" \
      --advertise-client-urls "http://127.0.0.1:${client_ports[i]}" \
      --listen-peer-urls "http://127.0.0.1:${peer_ports[i]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${peer_ports[i]}" \
      --initial-cluster "$cluster" --initial-cluster-token "$name-$$" \
      --initial-cluster-state new --logger zap --log-level warn >"$tmp/$name-m$i.log" 2>&1 &
    pids+=($!)
    if (( i > 0 )); then etcd_url+=,; fi
    etcd_url+="127.0.0.1:${client_ports[i]}"
  done
  for (( i = 0; i < members; i++ )); do
    wait_until 20 env ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:${client_ports[i]}" \
      endpoint health || { cat "$tmp/$name-m$i.log" >&2; exit 1; }
  done
}

# start_zookeeper NAME [TICK_MS]: a standalone ZooKeeper (Debian's jar) on a free port;
# sets zk_url. Sessions are at least 2 ticks (the server raises a shorter timeout).
start_zookeeper() {
  local name=$1 tick=${2:-2000} port
  port=$(free_port)
  mkdir -p "$tmp/$name/data"
  printf '%s\n' "tickTime=$tick" "dataDir=$tmp/$name/data" "clientPort=$port" \
    "clientPortAddress=127.0.0.1" "admin.enableServer=false" "4lw.commands.whitelist=*" \
    >"$tmp/$name/zoo.cfg"
  java -Xmx256m -XX:+UseSerialGC -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$tmp/$name/zoo.cfg" >"$tmp/$name.log" 2>&1 &
  pids+=($!)
  wait_until 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && echo ruok >&3 && grep -q imok <&3" \
    || { cat "$tmp/$name.log" >&2; exit 1; }
  zk_url=zk://127.0.0.1:$port
}

stop_last() {
  local pid=${pids[-1]}
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset 'pids[-1]'
}

run() {
  echo
  echo "\$ warden $*"
  "$warden" "$@"
}

# grid URL BASELINE HANDOFF: 1 and 8 clients, uncontended and contended, each against
# BASELINE in alternating rounds; HANDOFF hand-off samples after the 1-client
# uncontended run.
grid() {
  local url=$1 baseline=$2 samples=$3 clients contention handoff
  for clients in 1 8; do
    for contention in "" --contended; do
      handoff=0
      if [ "$clients" = 1 ] && [ -z "$contention" ]; then handoff=$samples; fi
      run bench --url "$url" --clients "$clients" $contention --duration "$duration" \
        --rounds "$rounds" --baseline "$baseline" --handoff-samples "$handoff"
    done
  done
}

echo "warden benchmark set, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "redis: $(redis-server --version | cut -d' ' -f3), warden: $("$warden" --version)"
echo "binaries: ${build#"$root"/}"
echo "timed runs: $duration each for warden and the baseline, alternating in $rounds rounds"

start_redis
start_wardend wardend
redis=redis://127.0.0.1:$redis_port
wd=warden://127.0.0.1:$wardend_port

resp_urls=()
[[ $sets == *" resp "* ]] && resp_urls=("$wd" "$redis" mem://)
for url in "${resp_urls[@]}"; do
  grid "$url" "$redis" 1000
done

# Lock caching: warden:// with every lock cached, 1 client repeating one lock and 8
# clients on locks of their own, against the raw Redis lock in the same run; then the
# hand-off from a cached lock (B asks, wardend revokes, A gives it back) beside the
# uncached hand-off to a queued waiter, on the same wardend.
# cached_runs URL: 1 client's cached cycles against URL's raw baseline, then the hand-off
# from a cached lock and the uncached one.
cached_runs() {
  local url=$1 cache
  run bench --url "$url" --cache --duration "$duration" --rounds "$rounds" --baseline "$url" \
    --handoff-samples 0
  for cache in --cache ""; do
    run bench --url "$url" $cache --duration 1s --handoff-samples 200
  done
}
if [[ $sets == *" cache "* ]]; then
  for clients in 1 8; do
    run bench --url "$wd" --cache --clients "$clients" --duration "$duration" \
      --rounds "$rounds" --baseline "$redis" --handoff-samples 0
  done
  for cache in --cache ""; do
    run bench --url "$wd" $cache --duration 1s --handoff-samples 1000
  done
  # etcd:// and zk:// learn of requests by watching: cached cycles against the backend's
  # own raw lock, and the two hand-offs.
  start_etcd etcd-cache 1
  cached_runs "$etcd_url"
  stop_last
  start_zookeeper zk-cache
  cached_runs "$zk_url"
  stop_last
  # redis:// learns of requests from a '?' a refused request publishes.
  cached_runs "$redis"
fi

# Capacity checks, each on a fresh server so that nothing earlier skews its memory.
stop_last

# Semaphores and multi-locks against the lock of the same wardend: what a permit, and
# what M members, cost against one lock.
if [[ $sets == *" primitives "* ]]; then
  start_wardend wardend-primitives
  for shape in "--permits 4" "--members 2" "--members 8"; do
    for contention in "" --contended; do
      run bench --url "warden://127.0.0.1:$wardend_port" $shape --clients 8 --keys 16 \
        $contention --duration "$duration" --rounds "$rounds" --handoff-samples 0 \
        --baseline "warden://127.0.0.1:$wardend_port"
    done
  done
  stop_last
fi
if [[ $sets == *" capacity "* ]]; then
  start_wardend wardend-mem
  run bench --url "warden://127.0.0.1:$wardend_port" --hold-locks 1000000 --key-bytes 16
  stop_last
  start_wardend wardend-conn
  run bench --url "warden://127.0.0.1:$wardend_port" --idle-connections 10000 --idle-hold 3s
  stop_last
fi

# wardens:// against warden:// on one wardend that serves both: the ratio is what TLS
# costs a lock cycle. The CA and server certificate are made here (EC P-256).
if [[ $sets == *" tls "* ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=warden-bench-ca -keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout "$tmp/server.key" -out "$tmp/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$tmp/server.ext"
  openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" \
    -set_serial 1 -days 2 -extfile "$tmp/server.ext" -out "$tmp/server.pem" 2>/dev/null
  tls_port=$(free_port)
  start_wardend wardend-tls --tls-listen "127.0.0.1:$tls_port" --tls-cert "$tmp/server.pem" \
    --tls-key "$tmp/server.key"
  grid "wardens://127.0.0.1:$tls_port?ca=$tmp/ca.pem" "warden://127.0.0.1:$wardend_port" 0
  stop_last
fi

# etcd://, against etcd's own lock service on the same cluster. Every acquire of either
# writes through Raft (an fsync on each member), so the figures are the disk's as much as
# warden's; alternating rounds keep the comparison fair.
if [[ $sets == *" etcd "* ]]; then
  echo
  echo "etcd: $(etcd --version | head -1)"
  for members in 1 3; do
    start_etcd "etcd$members" "$members"
    grid "$etcd_url" "$etcd_url" 1000
    for (( i = 0; i < members; i++ )); do stop_last; done
  done
fi

# zk://, against raw create+delete pairs on the same server (every create and delete is
# a ZooKeeper write: a transaction-log fsync).
if [[ $sets == *" zk "* ]]; then
  echo
  echo "zookeeper: $(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || echo unknown)"
  start_zookeeper zk
  grid "$zk_url" "$zk_url" 1000
  stop_last
fi

# redlock:// on 3 and on 5 masters (each its own redis-server, no persistence), against
# the raw single-Redis lock on the baseline server; and redis:// against the same
# baseline in the same run, so the cost of N masters reads against one Redis with
# warden's queue.
if [[ $sets == *" redlock "* ]]; then
  baseline_port=$redis_port
  masters=()
  for i in 1 2 3 4 5; do
    start_redis "master$i"
    masters+=("127.0.0.1:$redis_port")
  done
  redis_port=$baseline_port
  for n in 3 5; do
    url="redlock://$(IFS=,; echo "${masters[*]:0:$n}")"
    # Waiters poll (a pause of 20..40 ms): 200 hand-offs say as much as 1000.
    grid "$url" "$redis" 200
  done
  for clients in 1 8; do
    run bench --url "$redis" --clients "$clients" --duration "$duration" \
      --rounds "$rounds" --baseline "$redis" --handoff-samples 0
  done
  for i in 1 2 3 4 5; do stop_last; done
fi

# postgres:// and mysql://, each against its database's raw lock pairs on the same server
# (the servers' default durability: every token a grant draws is as durable as a commit).
# db_start KIND: a fresh KIND server (postgres or mariadb, scripts/common.sh) on a free
# port; sets db_url. db_grid KIND: the grid on one against its raw pairs, then stopped.
db_start() {
  local kind=$1 port dir
  port=$(free_port)
  dir=$tmp/$kind-$port  # a server of its own each time (the grid's, the failover's)
  mkdir -p "$dir"
  chmod 755 "$dir"
  "${kind}_prepare" "$dir" "$port"
  local -n cmd=${kind}_cmd ready=${kind}_ready url=${kind}_url
  "${cmd[@]}" >"$dir.log" 2>&1 &
  pids+=($!)
  wait_until 30 $ready || { cat "$dir.log" >&2; exit 1; }
  if [ "$kind" = mariadb ]; then mariadb_add_user "$port"; fi
  db_url=$url
}
db_grid() {
  db_start "$1"
  grid "$db_url" "$db_url" 1000
  stop_last
}
if [[ $sets == *" db "* ]]; then
  echo
  echo "postgresql: $(/usr/lib/postgresql/15/bin/postgres --version | cut -d' ' -f3)"
  db_grid postgres
  echo
  echo "mariadb: $(mariadbd --version | sed 's/.*Ver \([^ ]*\).*/\1/')"
  db_grid mariadb
fi

# redis+cluster://, against the raw lock routed the same way, on 3 masters and on 1 (a
# one-node cluster serving every slot): what spreading the locks over masters adds.
# start_cluster NAME MASTERS: sets cluster_url.
start_cluster() {
  local name=$1 masters=$2 i port nodes=()
  for (( i = 0; i < masters; i++ )); do
    port=$(free_port)
    mkdir -p "$tmp/$name/n$i"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$tmp/$name/n$i" --cluster-enabled yes --cluster-config-file nodes.conf \
      >"$tmp/$name-n$i.log" 2>&1 &
    pids+=($!)
    wait_until 10 redis-cli -p "$port" ping || { cat "$tmp/$name-n$i.log" >&2; exit 1; }
    nodes+=("127.0.0.1:$port")
  done
  if (( masters == 1 )); then
    redis-cli -p "$port" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
  else
    redis-cli --cluster create "${nodes[@]}" --cluster-yes >"$tmp/$name-create.log" 2>&1 \
      || { cat "$tmp/$name-create.log" >&2; exit 1; }
  fi
  for node in "${nodes[@]}"; do
    wait_until 30 bash -c "redis-cli -p ${node#127.0.0.1:} CLUSTER INFO | grep -q cluster_state:ok" \
      || { cat "$tmp/$name-n0.log" >&2; exit 1; }
  done
  cluster_url=redis+cluster://$(IFS=,; echo "${nodes[*]}")
}
if [[ $sets == *" cluster "* ]]; then
  echo
  for masters in 3 1; do
    start_cluster "cluster$masters" "$masters"
    echo "redis cluster of $masters master(s): $cluster_url"
    for clients in 8 32; do
      run bench --url "$cluster_url" --clients "$clients" --keys 16 --duration "$duration" \
        --rounds "$rounds" --baseline "$cluster_url" --handoff-samples 0
    done
    for (( i = 0; i < masters; i++ )); do stop_last; done
  done
fi

# What a release that does not wait buys: the same uncontended cycles with the lease
# dropped (the release sent, its answer read later) and with Lease::release() (waiting
# for it), each against the engine's raw baseline in the same run.
# releases URL BASELINE
releases() {
  local url=$1 baseline=$2 clients confirm
  for clients in 1 8; do
    for confirm in "" --confirm-releases; do
      run bench --url "$url" --clients "$clients" $confirm --duration "$duration" \
        --rounds "$rounds" --baseline "$baseline" --handoff-samples 0
    done
  done
}
if [[ $sets == *" releases "* ]]; then
  echo
  start_wardend wardend-releases
  releases "warden://127.0.0.1:$wardend_port" "$redis"
  stop_last
  releases "$redis" "$redis"
  start_etcd etcd-releases 1
  releases "$etcd_url" "$etcd_url"
  stop_last
  start_zookeeper zk-releases
  releases "$zk_url" "$zk_url"
  stop_last
  for kind in postgres mariadb; do
    db_start "$kind"
    releases "$db_url" "$db_url"
    stop_last
  done
fi

# Election failover per engine: 2 s leases, 5 samples; the report gives the kill → grant
# and kill → observed times as multiples of the TTL.
failover() {
  run bench --url "$1" --election-failover 5 --ttl 2s
}
if [[ $sets == *" elections "* ]]; then
  echo
  start_wardend wardend-elections
  failover "warden://127.0.0.1:$wardend_port"
  stop_last
  failover "$redis"
  start_etcd etcd-elections 1
  failover "$etcd_url"
  stop_last
  start_zookeeper zk-elections 500  # else the server raises 2 s sessions to 4 s
  failover "$zk_url?session_timeout_ms=2000"
  stop_last
  for kind in postgres mariadb; do
    db_start "$kind"
    failover "$db_url"
    stop_last
  done
fi

# Asynchronous waits per engine (docs/async.md): ASYNC_WAITERS (default 10000) waits from
# one Client: threads and memory while they wait, grants, FIFO on one lock, cancellation.
async_waits() {
  run bench --url "$1" --async-waiters "${ASYNC_WAITERS:-10000}"
}
if [[ $sets == *" async "* ]]; then
  echo
  async_waits "mem://"
  start_wardend wardend-async
  async_waits "warden://127.0.0.1:$wardend_port"
  stop_last
  async_waits "$redis"
  start_etcd etcd-async 1
  async_waits "$etcd_url"
  stop_last
  start_zookeeper zk-async
  async_waits "$zk_url"
  stop_last
fi

# The layouts other languages' locks share (docs/interop.md), each against its backend's
# raw lock on the same server.
interop_runs() {
  local url=$1 baseline=$2 clients handoff
  for clients in 1 8; do
    handoff=0
    if [ "$clients" = 1 ]; then handoff=200; fi
    run bench --url "$url" --clients "$clients" --duration "$duration" --rounds "$rounds" \
      --baseline "$baseline" --handoff-samples "$handoff"
  done
}
if [[ $sets == *" interop "* ]]; then
  interop_runs "$redis?layout=simple" "$redis"
  start_etcd etcd-interop 1
  interop_runs "$etcd_url?layout=concurrency" "$etcd_url"
  stop_last
  start_zookeeper zk-interop
  interop_runs "$zk_url?layout=curator" "$zk_url"
  stop_last
fi

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

