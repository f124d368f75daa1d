#!/usr/bin/env bash
# Runs `warden torture` with every nemesis against every engine, each cell on fresh
# throwaway servers (127.0.0.1, free ports, a temp dir, stopped by PID at the end), and
# regenerates the table in docs/guarantees.md (between its matrix markers).
#
#   scripts/torture-matrix.sh                         # every engine × every nemesis
#   TORTURE_ENGINES="redis etcd" scripts/torture-matrix.sh
#   TORTURE_NEMESES="pause-holder" TORTURE_DURATION=10s scripts/torture-matrix.sh
#   TORTURE_DOC=none scripts/torture-matrix.sh        # do not touch docs/guarantees.md
#   WARDEN_BUILD=build/asan scripts/torture-matrix.sh
#   TORTURE_PRIMITIVE=semaphore scripts/torture-matrix.sh  # a semaphore of 2 permits
#   TORTURE_PRIMITIVE=election scripts/torture-matrix.sh   # leadership instead of a lock
#
# Engines: warden (wardend), redis, redis-aof (appendfsync always), redlock (3 masters),
# redlock-aof, etcd (3 members, etcd's default timings), zk (standalone, tickTime 250 ms,
# session timeout 2 s), postgres (PostgreSQL 15: initdb + postgres, as the `postgres`
# user when run as root, since PostgreSQL refuses root), mysql (MariaDB:
# mariadb-install-db + mariadbd), redis-sentinel (a master, 2 replicas and 3 sentinels:
# redis+sentinel://), redis-sentinel-wait (the same with min_replicas=1) and
# redis-cluster (3 masters with a replica each, cluster-node-timeout 2 s:
# redis+cluster://), warden-cell (a wardend cell of 3 members, its default timings:
# docs/cell.md). The failover nemesis runs on the sentinel and cluster engines only
# (the others have no replica to promote); kill-leader, pause-leader, restart-cell and
# partition-leader on warden-cell only. Under partition-leader the members run in
# network namespaces of their own (root only: `ip netns`, a bridge and veths from
# iproute2), and the leader is cut off from the others by blackhole routes both ways,
# while the clients, in the root namespace, reach every member.
# mem:// is left out: its lock table lives inside each
# client process, so separate client processes never contend.
#
# Every run writes history.jsonl, summary.txt and timeline.svg under
# build/torture/ENGINE/NEMESIS (TORTURE_OUT to change). A cell that fails its checks
# does not stop the matrix; the script exits 1 at the end if any did.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${WARDEN_BUILD:-$root/build/release}
case "$build" in /*) ;; *) build=$root/$build ;; esac
warden=$build/src/cli/warden
wardend=$build/src/server/wardend
all_engines="warden warden-cell redis redis-aof redlock redlock-aof etcd zk postgres mysql redis-sentinel redis-sentinel-wait redis-cluster"
all_nemeses="none pause-holder kill-holder kill-waiter pause-server kill-server restart-server partition-client failover kill-leader pause-leader restart-cell partition-leader"
engines=${TORTURE_ENGINES:-$all_engines}
# What the clients take (docs/torture.md): lock, semaphore (of 2 permits) or election.
primitive=${TORTURE_PRIMITIVE:-lock}
primitive_args=(--primitive "$primitive")
if [ "$primitive" = semaphore ]; then primitive_args+=(--permits 2); fi
# Lock cells keep their old place; the others go beside them.
cell_name() { if [ "$primitive" = lock ]; then echo "$1"; else echo "$1-$primitive"; fi; }
# The engine as a row of the table names it (warden torture's --label and primitive).
row_label() {
  case "$primitive" in
    lock) echo "$1" ;;
    semaphore) echo "$1 (semaphore of 2)" ;;
    *) echo "$1 ($primitive)" ;;
  esac
}
nemeses=${TORTURE_NEMESES:-$all_nemeses}
duration=${TORTURE_DURATION:-15s}
clients=${TORTURE_CLIENTS:-4}
ttl=2s
out=${TORTURE_OUT:-$root/build/torture}
doc=${TORTURE_DOC:-$root/docs/guarantees.md}

for bin in "$warden" "$wardend"; do
  if [ ! -x "$bin" ]; then
    echo "torture-matrix.sh: $bin not built (cmake --preset release && cmake --build build/release -j2)" >&2
    exit 1
  fi
done

# shellcheck source=scripts/common.sh
. "$root/scripts/common.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/warden-torture-matrix-XXXXXX")
# PostgreSQL runs as its own user when we are root: it must be able to reach its dirs.
chmod 755 "$tmp"
# stop_servers DIR: kill -9 every server started under DIR, restarted ones included:
# each start script appends the PID it started to DIR/pids (a restarted server is not
# our child, and redis-server rewrites its command line, so neither wait nor pkill -f
# would find them all).
stop_servers() {
  local pid
  while read -r pid; do
    kill -KILL "$pid" 2>/dev/null || true
  done < <(cat "$1"/pids "$1"/*/pids 2>/dev/null)
}
# netns_down DIR: removes the network namespaces and bridge a cell under DIR made.
netns_down() {
  local tag
  for tag in $(cat "$1"/netns "$1"/*/netns 2>/dev/null); do
    for ns in $(ip netns list | awk -v t="$tag-" 'index($1, t) == 1 { print $1 }'); do
      ip netns del "$ns" 2>/dev/null || true
    done
    ip link del "$tag" 2>/dev/null || true
  done
}
cleanup() {
  stop_servers "$tmp"
  netns_down "$tmp"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# server NAME CMD...: writes $cell/NAME.start, a script that starts CMD in the
# background and prints its PID (the torture nemesis runs it to restart the server),
# runs it, and records both for --server-pid / --server-restart.
server() {
  local name=$1; shift
  local start=$cell/$name.start
  {
    echo '#!/usr/bin/env bash'
    printf '%q ' "$@"
    printf '>>%q 2>&1 </dev/null &\n' "$cell/$name.log"
    printf 'echo $! >>%q\n' "$cell/pids"
    echo 'echo $!'
  } >"$start"
  chmod +x "$start"
  server_args+=(--server-pid "$("$start")" --server-restart "$start")
}

# server_when_ready NAME READY CMD...: like server, but the start script waits until the
# shell command READY succeeds and starts CMD again if it exited first. A PostgreSQL
# started right after a kill -9 of its postmaster exits at once while the old backends
# still hold the shared memory ("pre-existing shared memory block is still in use"); the
# nemesis must get the PID of the server that stays up, not of that one.
server_when_ready() {
  local name=$1 ready=$2; shift 2
  local start=$cell/$name.start
  # shellcheck disable=SC2016 # the $ are the start script's own
  {
    echo '#!/usr/bin/env bash'
    echo 'for try in $(seq 1 100); do'
    printf '  '
    printf '%q ' "$@"
    printf '>>%q 2>&1 </dev/null &\n' "$cell/$name.log"
    echo '  pid=$!'
    printf '  echo "$pid" >>%q\n' "$cell/pids"
    echo '  for wait in $(seq 1 600); do'
    echo '    kill -0 "$pid" 2>/dev/null || break'
    printf '    if %s >/dev/null 2>&1; then echo "$pid"; exit 0; fi\n' "$ready"
    echo '    sleep 0.1'
    echo '  done'
    echo '  kill -KILL "$pid" 2>/dev/null'
    echo '  sleep 0.2'
    echo 'done'
    echo 'exit 1'
  } >"$start"
  chmod +x "$start"
  local pid
  pid=$("$start") || { cat "$cell/$name.log" >&2; exit 1; }
  server_args+=(--server-pid "$pid" --server-restart "$start")
}

redis_server() {  # NAME PORT APPENDONLY
  mkdir -p "$cell/$1"
  server "$1" redis-server --port "$2" --bind 127.0.0.1 --save '' --appendonly "$3" \
    --appendfsync always --dir "$cell/$1"
  wait_until 10 redis-cli -p "$2" ping || { cat "$cell/$1.log" >&2; exit 1; }
}

# start_cell_in_namespaces: a wardend cell of 3 members, each in a network namespace of
# its own on a bridge in the root namespace (NET.1-3, the bridge NET.254), all on port
# 7380; master.sh prints the leader's PID, isolate.sh cuts a member (by PID) off from
# the others with blackhole routes in both directions, or heals it.
start_cell_in_namespaces() {
  local tag=wc$$r$RANDOM net=10.$((64 + RANDOM % 64)).$((RANDOM % 250)) members="" i
  echo "$tag" >"$cell/netns"
  ip link add "$tag" type bridge
  ip addr add "$net.254/24" dev "$tag"
  ip link set "$tag" up
  for i in 1 2 3; do
    ip netns add "$tag-$i"
    ip link add "$tag-$i" type veth peer name eth0 netns "$tag-$i"
    ip link set "$tag-$i" master "$tag" up
    ip netns exec "$tag-$i" ip addr add "$net.$i/24" dev eth0
    ip netns exec "$tag-$i" ip link set eth0 up
    ip netns exec "$tag-$i" ip link set lo up
    members+="${members:+,}$i@$net.$i:7380"
  done
  for i in 1 2 3; do
    mkdir -p "$cell/member$i"
    server "member$i" ip netns exec "$tag-$i" "$wardend" --cell "$members" --node "$i" \
      --data-dir "$cell/member$i"
  done
  cat >"$cell/master.sh" <<EOF
#!/usr/bin/env bash
for i in 1 2 3; do
  if redis-cli -h $net.\$i -p 7380 INFO 2>/dev/null | grep -q '^server:wardend'; then
    ip netns pids $tag-\$i | head -1
    exit 0
  fi
done
exit 1
EOF
  cat >"$cell/isolate.sh" <<EOF
#!/usr/bin/env bash
# isolate.sh cut|heal PID: blackhole routes between PID's member and the others.
set -e
ns=\$(ip netns identify "\$2")
i=\${ns##*-}
action=\$([ "\$1" = cut ] && echo add || echo del)
for j in 1 2 3; do
  [ "\$j" = "\$i" ] && continue
  ip netns exec "\$ns" ip route "\$action" blackhole $net.\$j/32
  ip netns exec $tag-\$j ip route "\$action" blackhole $net.\$i/32
done
EOF
  chmod +x "$cell/master.sh" "$cell/isolate.sh"
  wait_until 30 "$cell/master.sh" || { cat "$cell"/member*.log >&2; exit 1; }
  server_args+=(--master-command "$cell/master.sh" --isolate-command "$cell/isolate.sh")
  url=warden://$net.1:7380,$net.2:7380,$net.3:7380
  epsilon=500ms
}

# start_engine ENGINE: starts its servers in $cell; sets url and epsilon (the engine's
# allowance beyond the TTL for handing an abandoned lock on; docs/guarantees.md).
start_engine() {
  local port ports=() i
  case $1 in
    warden)
      port=$(free_port)
      mkdir -p "$cell/data"
      server wardend "$wardend" --listen "127.0.0.1:$port" --data-dir "$cell/data"
      wait_until 10 grep -q "listening on" "$cell/wardend.log" || { cat "$cell/wardend.log" >&2; exit 1; }
      url=warden://127.0.0.1:$port epsilon=500ms ;;
    warden-cell)
      if [ "$nemesis" = partition-leader ]; then
        start_cell_in_namespaces
        return
      fi
      local members=""
      for i in 1 2 3; do
        ports+=("$(free_port_pair)")
        members+="${members:+,}$i@127.0.0.1:${ports[i-1]}"
      done
      for i in 1 2 3; do
        mkdir -p "$cell/member$i"
        server "member$i" "$wardend" --cell "$members" --node "$i" --data-dir "$cell/member$i"
      done
      # The PID of the member that leads now (kill-leader, pause-leader): the one that
      # answers INFO rather than sending it on with -MOVED.
      printf '%s\n' "${ports[@]}" >"$cell/ports"
      cat >"$cell/master.sh" <<'EOF'
#!/usr/bin/env bash
while read -r p; do
  if redis-cli -p "$p" INFO 2>/dev/null | grep -q '^server:wardend'; then
    ss -Hltnp "sport = :$p" | grep -o "pid=[0-9]*" | head -1 | cut -d= -f2
    exit 0
  fi
done <"$(dirname "$0")/ports"
exit 1
EOF
      chmod +x "$cell/master.sh"
      wait_until 30 "$cell/master.sh" || { cat "$cell"/member*.log >&2; exit 1; }
      server_args+=(--master-command "$cell/master.sh")
      url=warden://$(printf '127.0.0.1:%s\n' "${ports[@]}" | paste -sd,)
      epsilon=500ms ;;
    redis | redis-aof)
      port=$(free_port)
      redis_server redis "$port" "$([ "$1" = redis-aof ] && echo yes || echo no)"
      url=redis://127.0.0.1:$port epsilon=500ms ;;
    redlock | redlock-aof)
      for i in 0 1 2; do
        port=$(free_port)
        redis_server "master$i" "$port" "$([ "$1" = redlock-aof ] && echo yes || echo no)"
        ports+=("127.0.0.1:$port")
      done
      url=redlock://$(IFS=,; echo "${ports[*]}") epsilon=500ms ;;
    etcd)
      local cluster="" peers=()
      for i in 0 1 2; do
        ports+=("$(free_port)")
        peers+=("$(free_port)")
        cluster+="${cluster:+,}m$i=http://127.0.0.1:${peers[i]}"
      done
      for i in 0 1 2; do
        mkdir -p "$cell/m$i"
        server "m$i" etcd --name "m$i" --data-dir "$cell/m$i" \
          --listen-client-urls "http://127.0.0.1:${ports[i]}" \
          --advertise-client-urls "http://127.0.0.1:${ports[i]}" \
          --listen-peer-urls "http://127.0.0.1:${peers[i]}" \
          --initial-advertise-peer-urls "http://127.0.0.1:${peers[i]}" \
          --initial-cluster "$cluster" --initial-cluster-token "torture-$$" \
          --initial-cluster-state new --logger zap --log-level warn
      done
      url=etcd://$(IFS=,; printf '127.0.0.1:%s\n' "${ports[@]}" | paste -sd,)
      for i in 0 1 2; do
        wait_until 20 env ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:${ports[i]}" endpoint health \
          || { cat "$cell/m$i.log" >&2; exit 1; }
      done
      epsilon=1500ms ;;
    zk)
      port=$(free_port)
      mkdir -p "$cell/zk"
      printf '%s\n' "tickTime=250" "dataDir=$cell/zk" "clientPort=$port" \
        "clientPortAddress=127.0.0.1" "admin.enableServer=false" "4lw.commands.whitelist=*" \
        >"$cell/zoo.cfg"
      server zk java -Xmx256m -XX:+UseSerialGC \
        -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$cell/zoo.cfg"
      wait_until 30 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && echo ruok >&3 && grep -q imok <&3" \
        || { cat "$cell/zk.log" >&2; exit 1; }
      url="zk://127.0.0.1:$port?session_timeout_ms=2000" epsilon=1000ms ;;
    postgres)
      # The server-fault nemeses hit the postmaster (the PID setpriv execs into): kill -9
      # of it ends every backend (they watch for its death); SIGSTOP of it freezes only
      # new connections.
      port=$(free_port)
      postgres_prepare "$cell" "$port" || exit 1
      server_when_ready postgres "$postgres_ready" "${postgres_cmd[@]}"
      url=$postgres_url epsilon=500ms ;;
    mysql)
      port=$(free_port)
      mariadb_prepare "$cell" "$port" || exit 1
      server_when_ready mariadbd "$mariadb_ready" "${mariadb_cmd[@]}"
      mariadb_add_user "$port"
      # The lease is wait_timeout, whole seconds rounded up: a silent holder's session
      # ends ceil(ttl) after its last statement.
      url=$mariadb_url epsilon=1000ms ;;
    redis-sentinel | redis-sentinel-wait)
      # Every data node is a server the nemeses may hit; the sentinels are not (they
      # are the failure detector, not the store), but are stopped with the cell.
      local master sentinels=() name=wm
      master=$(free_port)
      mkdir -p "$cell/data0"
      server data0 redis-server --port "$master" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$cell/data0" --repl-diskless-sync-delay 0
      wait_until 10 redis-cli -p "$master" ping || { cat "$cell/data0.log" >&2; exit 1; }
      for i in 1 2; do
        port=$(free_port)
        mkdir -p "$cell/data$i"
        server "data$i" redis-server --port "$port" --bind 127.0.0.1 --save '' \
          --appendonly no --dir "$cell/data$i" --replicaof 127.0.0.1 "$master" \
          --repl-diskless-sync-delay 0
        wait_until 10 redis-cli -p "$port" ping || { cat "$cell/data$i.log" >&2; exit 1; }
      done
      wait_until 20 bash -c "redis-cli -p $master INFO replication | grep -c state=online | grep -q 2" \
        || { cat "$cell/data1.log" >&2; exit 1; }
      for i in 0 1 2; do
        port=$(free_port)
        mkdir -p "$cell/s$i"
        printf '%s\n' "port $port" "bind 127.0.0.1" "dir $cell/s$i" \
          "sentinel monitor $name 127.0.0.1 $master 2" \
          "sentinel down-after-milliseconds $name 1000" "sentinel failover-timeout $name 5000" \
          >"$cell/s$i/sentinel.conf"
        redis-server "$cell/s$i/sentinel.conf" --sentinel >"$cell/s$i.log" 2>&1 &
        echo $! >>"$cell/pids"
        sentinels+=("$port")
      done
      for port in "${sentinels[@]}"; do
        wait_until 20 bash -c "redis-cli -p $port SENTINEL sentinels $name | grep -q ip" \
          || { cat "$cell/s0.log" >&2; exit 1; }
      done
      # The PID of the data node the sentinels name master now (the failover nemesis).
      {
        echo '#!/usr/bin/env bash'
        echo "for s in ${sentinels[*]}; do"
        echo "  port=\$(redis-cli -p \$s SENTINEL get-master-addr-by-name $name 2>/dev/null | tail -1)"
        echo '  [ -n "$port" ] && break'
        echo 'done'
        echo 'ss -Hltnp "sport = :$port" | grep -o "pid=[0-9]*" | head -1 | cut -d= -f2'
      } >"$cell/master.sh"
      chmod +x "$cell/master.sh"
      server_args+=(--master-command "$cell/master.sh")
      url=redis+sentinel://$(printf '127.0.0.1:%s\n' "${sentinels[@]}" | paste -sd,)/$name
      if [ "$1" = redis-sentinel-wait ]; then url+="?min_replicas=1"; fi
      epsilon=500ms ;;
    redis-cluster)
      # Every node is a server the nemeses may hit (a fault on a master that does not
      # serve the torture lock's slot shows that it does not matter).
      local seeds=()
      for i in 0 1 2 3 4 5; do
        port=$(free_port)
        mkdir -p "$cell/node$i"
        server "node$i" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
          --dir "$cell/node$i" --cluster-enabled yes --cluster-config-file nodes.conf \
          --cluster-node-timeout 2000 --repl-diskless-sync-delay 0
        wait_until 10 redis-cli -p "$port" ping || { cat "$cell/node$i.log" >&2; exit 1; }
        seeds+=("127.0.0.1:$port")
      done
      redis-cli --cluster create "${seeds[@]}" --cluster-replicas 1 --cluster-yes \
        >"$cell/create.log" 2>&1 || { cat "$cell/create.log" >&2; exit 1; }
      port=${seeds[0]#127.0.0.1:}
      wait_until 30 bash -c "redis-cli -p $port CLUSTER INFO | grep -q cluster_state:ok" \
        || { cat "$cell/create.log" >&2; exit 1; }
      # The PID of the master serving the torture lock's slot now (the failover nemesis),
      # as the first node that answers sees it (CLUSTER NODES: a master's line ends with
      # its slot ranges).
      printf '%s\n' "${seeds[@]#127.0.0.1:}" >"$cell/ports"
      cat >"$cell/master.sh" <<'EOF'
#!/usr/bin/env bash
while read -r p; do
  slot=$(redis-cli -p "$p" CLUSTER KEYSLOT '{warden:torture/lock}:i' 2>/dev/null) || continue
  port=$(redis-cli -p "$p" CLUSTER NODES 2>/dev/null | awk -v s="$slot" '
    $3 ~ /master/ && $3 !~ /fail/ {
      for (i = 9; i <= NF; i++) {
        n = split($i, r, "-"); if (n == 1) r[2] = r[1]
        if (s + 0 >= r[1] + 0 && s + 0 <= r[2] + 0) { split($2, a, "[:@]"); print a[2] }
      }
    }' | head -1)
  [ -n "$port" ] && break
done <"$(dirname "$0")/ports"
ss -Hltnp "sport = :$port" | grep -o "pid=[0-9]*" | head -1 | cut -d= -f2
EOF
      chmod +x "$cell/master.sh"
      server_args+=(--master-command "$cell/master.sh")
      url=redis+cluster://$(printf '%s\n' "${seeds[@]}" | paste -sd,)
      epsilon=500ms ;;
    *)
      echo "torture-matrix.sh: unknown engine '$1'" >&2
      exit 1 ;;
  esac
}

echo "warden torture matrix, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(nproc) CPUs, $(uname -sr); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "engines: $engines; nemeses: $nemeses; $primitive; $clients clients, $duration each, ttl $ttl"

failed=0
for engine in $engines; do
  for nemesis in $nemeses; do
    if [ "$nemesis" = failover ] && [[ $engine != redis-sentinel* && $engine != redis-cluster ]]; then
      continue
    fi
    case $nemesis in
      kill-leader | pause-leader | restart-cell | partition-leader)
        [ "$engine" = warden-cell ] || continue ;;
    esac
    cell=$tmp/$engine-$nemesis
    mkdir -p "$cell"
    server_args=()
    start_engine "$engine"
    dir=$out/$(cell_name "$engine")/$nemesis
    mkdir -p "$dir"
    rm -f "$dir/row.md"
    echo
    echo "== $engine × $nemesis ($url)"
    if ! "$warden" torture --url "$url" --label "$engine" --clients "$clients" \
      --duration "$duration" --ttl "$ttl" --epsilon "$epsilon" --nemesis "$nemesis" \
      --seed 1 --out "$dir" "${primitive_args[@]}" "${server_args[@]}"; then
      failed=1
    fi
    if [ ! -f "$dir/row.md" ]; then
      echo "| $(row_label "$engine") | $nemesis | the run did not complete | | | | | | | | | **FAIL** |" >"$dir/row.md"
      failed=1
    fi
    stop_servers "$cell"
    netns_down "$cell"
  done
done

if [ "$doc" != none ] && [ -f "$doc" ]; then
  table=$tmp/table.md
  {
    echo "<!-- matrix:begin (generated by scripts/torture-matrix.sh; edit around it) -->"
    echo "Generated $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs ($(uname -sr)) by"
    echo
    echo '```sh'
    if [ "$primitive" != lock ]; then echo "TORTURE_PRIMITIVE=$primitive \\"; fi
    echo "TORTURE_ENGINES=\"$engines\" TORTURE_NEMESES=\"$nemeses\" \\"
    echo "  TORTURE_DURATION=$duration TORTURE_CLIENTS=$clients scripts/torture-matrix.sh"
    echo '```'
    echo
    echo "Cells this command did not run are from earlier runs of the script (their"
    echo "results under build/torture). $clients client processes, $duration per cell, ttl $ttl."
    echo "Any cell again:"
    echo '`TORTURE_ENGINES=ENGINE TORTURE_NEMESES=NEMESIS scripts/torture-matrix.sh`.'
    echo
    echo "| engine | nemesis | grants | faults | holds overlapped by a newer one | rejected writes | stale writes accepted | tokens backwards | max recovery / bound (ms) | lost: told / untold | unanswered waits | verdict |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    # Every cell with a result under $out: this run's, and earlier runs' of the cells
    # it did not repeat.
    for engine in $all_engines; do
      for nemesis in $all_nemeses; do
        if [ -f "$out/$engine/$nemesis/row.md" ]; then cat "$out/$engine/$nemesis/row.md"; fi
      done
    done
    for cell in semaphore election; do
      for engine in $all_engines; do
        for nemesis in $all_nemeses; do
          row=$out/$engine-$cell/$nemesis/row.md
          if [ -f "$row" ]; then cat "$row"; fi
        done
      done
    done
    echo "<!-- matrix:end -->"
  } >"$table"
  awk -v table="$table" '
    /<!-- matrix:begin/ { while ((getline line < table) > 0) print line; skip = 1; next }
    /<!-- matrix:end/ { skip = 0; next }
    !skip { print }
  ' "$doc" >"$tmp/doc.md"
  cp "$tmp/doc.md" "$doc"
  echo
  echo "updated ${doc#"$root"/}"
fi
exit "$failed"
