#!/usr/bin/env bash
# Checks that warden builds and installs with one engine (WARDEN_ENGINES=redis, the
# release-redis preset) and that such an install carries no other engine:
#
#   1. the configure looked for none of the other engines' dependencies: gRPC and
#      protobuf are disabled outright (CMAKE_DISABLE_FIND_PACKAGE_*: a find_package of
#      them would fail), and the cache holds no result of a search for the ZooKeeper
#      client, libpq or libmariadb;
#   2. the build installs libwarden and libwarden-redis only, with the warden command
#      and its redis module;
#   3. examples/consumer, asking for COMPONENTS redis and linked with --as-needed, has
#      redis:// and says "libwarden-etcd0" for etcd:// (warden_engines), through CMake
#      and pkg-config alike, and nothing it loads is a library of an absent engine (ldd);
#   4. asking that install for COMPONENTS etcd fails at configure time, naming etcd;
#   5. the installed command tries redis:// (unavailable: nothing listens, exit 69) and
#      refuses etcd:// naming the package to install (exit 64).
#
# Usage: scripts/check-components.sh BUILD_DIR STAGE_DIR CONSUMER_DIR
set -euo pipefail

build_dir=${1:?usage: check-components.sh BUILD_DIR STAGE_DIR CONSUMER_DIR}
stage=${2:?usage: check-components.sh BUILD_DIR STAGE_DIR CONSUMER_DIR}
consumer=${3:?usage: check-components.sh BUILD_DIR STAGE_DIR CONSUMER_DIR}
fail() { echo "check-components: $*" >&2; exit 1; }
absent_libraries='libgrpc|libgpr|libprotobuf|libzookeeper|libpq\.|libmariadb'

# 1. what the configure looked for
cache=$build_dir/CMakeCache.txt
[ -f "$cache" ] || fail "no $cache: configure first (cmake --preset release-redis)"
grep -q '^WARDEN_ENGINES:STRING=redis$' "$cache" || fail "$cache is not a redis-only build"
if grep -E '^(ZOOKEEPER_[A-Z_]*|LIBPQ_[A-Z_]*|MARIADB_[A-Z_]*|__pkg_config_checked_(LIBPQ|MARIADB)|gRPC_DIR|Protobuf_[A-Z_]*)[:=]' \
  "$cache"; then
  fail "the redis-only configure looked for another engine's dependency (above)"
fi
echo "check-components: the configure looked for no dependency of etcd, zookeeper, postgres or mysql"

# 2. what it installs
rm -rf "$stage"
cmake --install "$build_dir" --prefix "$stage" >/dev/null
libs=$(cd "$stage/lib" && ls libwarden*.so.* | sed 's/\.so\..*//' | sort -u | tr '\n' ' ')
[ "$libs" = "libwarden libwarden-redis " ] || fail "installed libraries: $libs"
modules=$(ls "$stage/lib/warden/engines")
[ "$modules" = "redis.so" ] || fail "installed engine modules: $modules"
[ ! -e "$stage/lib/pkgconfig/warden-etcd.pc" ] || fail "warden-etcd.pc installed"
echo "check-components: installed $libs+ the command's redis module"

# 3. a consumer of COMPONENTS redis
rm -rf "$consumer"
cmake -S examples/consumer -B "$consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$stage" -DWARDEN_COMPONENTS=redis \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--as-needed >/dev/null
cmake --build "$consumer" >/dev/null
for program in warden_engines warden_engines_pc; do
  "$consumer/$program" redis >"$consumer/$program.log" 2>&1 \
    || { cat "$consumer/$program.log"; fail "$program: the engines are not exactly redis"; }
  grep -q 'etcd://127.0.0.1:1: unsupported: .*libwarden-etcd0' "$consumer/$program.log" \
    || { cat "$consumer/$program.log"; fail "$program: etcd:// did not name libwarden-etcd0"; }
done
"$consumer/warden_consumer" >/dev/null || fail "warden_consumer failed"
for file in "$consumer"/warden_* "$stage"/lib/libwarden*.so.* "$stage"/lib/warden/engines/*.so \
  "$stage"/bin/warden "$stage"/bin/wardend; do
  [ -x "$file" ] || [ "${file%.so*}" != "$file" ] || continue
  if ldd "$file" | grep -E "$absent_libraries"; then
    fail "$file loads a library of an absent engine (above)"
  fi
done
readelf -d "$consumer/warden_engines" | grep -q 'NEEDED.*libwarden-redis\.so' \
  || fail "--as-needed dropped libwarden-redis from warden_engines"
echo "check-components: examples/consumer with COMPONENTS redis: redis:// only, nothing of gRPC, ZooKeeper, libpq or libmariadb loaded"

# 4. a component this install lacks
if cmake -S examples/consumer -B "$consumer-etcd" -G Ninja -DCMAKE_PREFIX_PATH="$stage" \
  -DWARDEN_COMPONENTS=etcd >"$consumer-etcd.log" 2>&1; then
  fail "find_package(warden COMPONENTS etcd) succeeded against a redis-only install"
fi
grep -q "component 'etcd' is not installed" "$consumer-etcd.log" \
  || { cat "$consumer-etcd.log"; fail "find_package(COMPONENTS etcd) failed without naming etcd"; }
rm -rf "$consumer-etcd" "$consumer-etcd.log"
echo "check-components: find_package(warden COMPONENTS etcd) fails, naming etcd"

# 5. the command
warden=$stage/bin/warden
status=0
"$warden" run --url redis://127.0.0.1:1 --group check --name components --wait 2s -- true \
  2>"$consumer/run-redis.log" || status=$?
[ "$status" -eq 69 ] || { cat "$consumer/run-redis.log"; fail "warden run redis:// exited $status, not 69"; }
status=0
"$warden" run --url etcd://127.0.0.1:1 --group check --name components --wait 2s -- true \
  2>"$consumer/run-etcd.log" || status=$?
[ "$status" -eq 64 ] || { cat "$consumer/run-etcd.log"; fail "warden run etcd:// exited $status, not 64"; }
grep -q 'libwarden-etcd0.*built without it' "$consumer/run-etcd.log" \
  || { cat "$consumer/run-etcd.log"; fail "warden run etcd:// did not name libwarden-etcd0"; }
echo "check-components: the command runs redis:// and says: $(head -n 1 "$consumer/run-etcd.log")"
echo "check-components: all checks passed"
