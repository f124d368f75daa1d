#!/usr/bin/env bash
# Checks the Debian packages that `make package` built, the way a user gets them:
#
#   1. each .deb holds what it should (dpkg-deb --contents), and only an engine's own
#      packages depend on its backend's client library;
#   2. libwarden0, libwarden-redis0 and warden alone install, and that `warden` takes a
#      lock on a throwaway redis-server and says which package brings etcd://;
#   3. all of them install with dpkg -i (as root; otherwise they are unpacked into a
#      staging root with dpkg -x, and the maintainer scripts are not exercised);
#   4. the packaged wardend starts from the packaged /etc/warden/wardend.conf (with its
#      port and data dir overridden on the command line: flags win), the packaged
#      `warden` takes a lock on it, SIGTERM stops it with status 0;
#   5. the systemd unit passes `systemd-analyze verify`;
#   6. the man pages are there and name their program;
#   7. the -dev packages build examples/consumer (find_package and pkg-config), which
#      then has every engine;
#   8. `dpkg --purge` removes it all again (root only).
#
# Usage: scripts/check-package.sh PACKAGE_BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: check-package.sh PACKAGE_BUILD_DIR}
work=$(mktemp -d "${TMPDIR:-/tmp}/warden-package.XXXXXX")
wardend_pid=
redis_pid=
cleanup() {
  if [ -n "$wardend_pid" ]; then kill -9 "$wardend_pid" 2>/dev/null || true; fi
  if [ -n "$redis_pid" ]; then kill -9 "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-package: $*" >&2; exit 1; }

shopt -s nullglob
debs=("$build_dir"/*.deb)
engines=(redis etcd zookeeper postgres mysql)
expected=$((4 + 2 * ${#engines[@]}))
[ ${#debs[@]} -eq $expected ] || fail "expected $expected .deb files in $build_dir, found ${#debs[@]}"
deb_of() {
  local d
  for d in "${debs[@]}"; do
    [ "$(dpkg-deb --field "$d" Package)" = "$1" ] && { echo "$d"; return; }
  done
  fail "no package named $1"
}

# 1. contents
expect() {  # expect PACKAGE PATH...
  local package=$1; shift
  local listing
  listing=$(dpkg-deb --contents "$(deb_of "$package")")
  for path in "$@"; do
    grep -E " \./${path#/}( |$)" <<<"$listing" >/dev/null || fail "$package lacks $path"
  done
}
expect libwarden0 'usr/lib/x86_64-linux-gnu/libwarden\.so\.0.*'
expect libwarden-dev usr/include/warden/client.h usr/lib/x86_64-linux-gnu/pkgconfig/warden.pc \
  usr/lib/x86_64-linux-gnu/cmake/warden/wardenConfig.cmake
expect warden usr/bin/warden usr/share/man/man1/warden.1.gz
expect wardend usr/bin/wardend usr/lib/systemd/system/wardend.service \
  etc/warden/wardend.conf usr/share/man/man1/wardend.1.gz
for engine in "${engines[@]}"; do
  expect "libwarden-${engine}0" "usr/lib/x86_64-linux-gnu/libwarden-$engine\\.so\\.0.*" \
    "usr/lib/x86_64-linux-gnu/warden/engines/$engine\\.so"
  expect "libwarden-$engine-dev" "usr/lib/x86_64-linux-gnu/pkgconfig/warden-$engine\\.pc" \
    "usr/lib/x86_64-linux-gnu/cmake/warden/warden-$engine-targets\\.cmake"
  depends=$(dpkg-deb --field "$(deb_of "libwarden-${engine}0")" Depends)
  [[ $depends == *"libwarden0 (= "* ]] || fail "libwarden-${engine}0 does not depend on libwarden0"
done
depends=$(dpkg-deb --field "$(deb_of wardend)" Depends)
[[ $depends == *"libwarden0 (= "* ]] || fail "wardend does not depend on libwarden0: $depends"
[[ $depends == *adduser* ]] || fail "wardend does not depend on adduser (its postinst needs it)"
# A cell's log is libraft's, on libuv: the server's package brings them.
[[ $depends == *libraft* && $depends == *libuv1* ]] \
  || fail "wardend does not depend on libraft and libuv1 (its cell): $depends"
# Only an engine's package depends on its backend's client library.
engine_libraries='libgrpc|libprotobuf|libzookeeper|libpq5|libmariadb'
for package in libwarden0 libwarden-dev warden wardend libwarden-redis0; do
  depends=$(dpkg-deb --field "$(deb_of "$package")" Depends)
  if grep -Eq "$engine_libraries" <<<"$depends"; then
    fail "$package depends on another engine's client library: $depends"
  fi
done
[[ $(dpkg-deb --field "$(deb_of libwarden-etcd0)" Depends) == *libgrpc* ]] \
  || fail "libwarden-etcd0 does not depend on gRPC"
echo "check-package: contents ok"

# 2. the core, the redis engine and the command alone
if [ "$(id -u)" -eq 0 ]; then
  root=
  install_debs() { dpkg -i "$@" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i failed"; }; }
else
  root=$work/root
  install_debs() { local d; for d in "$@"; do dpkg -x "$d" "$root"; done; }
  export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu
fi
install_debs "$(deb_of libwarden0)" "$(deb_of libwarden-redis0)" "$(deb_of warden)"
redis_port=$(cd "$work" && python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 1 100); do
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
token=$("$root/usr/bin/warden" run --url "redis://127.0.0.1:$redis_port" --group package \
  --name check --wait 10s -- sh -c 'echo "$WARDEN_TOKEN"') \
  || fail "warden run on redis:// failed with only libwarden0, libwarden-redis0 and warden installed"
[ "$token" -ge 1 ] || fail "warden run on redis:// printed no token"
kill -9 "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; redis_pid=
status=0
"$root/usr/bin/warden" run --url etcd://127.0.0.1:1 --group package --name check --wait 2s \
  -- true 2>"$work/etcd.log" || status=$?
[ "$status" -eq 64 ] || { cat "$work/etcd.log"; fail "warden run etcd:// exited $status, not 64"; }
grep -q 'install libwarden-etcd0' "$work/etcd.log" \
  || { cat "$work/etcd.log"; fail "warden run etcd:// did not say to install libwarden-etcd0"; }
echo "check-package: libwarden0 + libwarden-redis0 + warden: redis:// granted token $token;" \
  "etcd:// says: $(head -n 1 "$work/etcd.log")"

# 3. everything
install_debs "${debs[@]}"
if [ -z "$root" ]; then
  getent passwd wardend >/dev/null || fail "the postinst did not create the wardend user"
  echo "check-package: installed with dpkg -i"
else
  echo "check-package: not root: unpacked into $root (maintainer scripts not run)"
fi

# take_token_then_stop PORT NAME LOG: the packaged `warden run` takes the lock
# package/NAME on the wardend at PORT ($wardend_pid) and sets $token; then SIGTERM must
# stop that wardend with status 0 (LOG is shown if not).
take_token_then_stop() {
  token=$("$root/usr/bin/warden" run --url "warden://127.0.0.1:$1" --group package \
    --name "$2" --wait 10s -- sh -c 'echo "$WARDEN_TOKEN"')
  [ "$token" -ge 1 ] || fail "warden run on package/$2 printed no token"
  kill -TERM "$wardend_pid"
  local status=0
  wait "$wardend_pid" || status=$?
  wardend_pid=
  [ "$status" -eq 0 ] || { cat "$3"; fail "wardend exited $status on SIGTERM (package/$2)"; }
}

# 4. run the packaged server from the packaged config, flags winning
"$root/usr/bin/wardend" --config "$root/etc/warden/wardend.conf" --listen 127.0.0.1:0 \
  --data-dir "$work/data" >"$work/wardend.log" 2>&1 &
wardend_pid=$!
port=
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/wardend.log")
  [ -n "$port" ] && break
  kill -0 "$wardend_pid" 2>/dev/null || { cat "$work/wardend.log"; fail "wardend exited"; }
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/wardend.log"; fail "wardend did not start"; }
take_token_then_stop "$port" check "$work/wardend.log"
[ -f "$work/data/state" ] || fail "wardend kept no state in the data dir given on the command line"
echo "check-package: wardend --config ran, granted token $token, stopped cleanly"

# 4b. the packaged wardend as a one-member cell: the packaged config, with --cell and
# --node on the command line (a member listens on its own address from the list; the
# cell's bus takes the next port)
. "$(dirname "$0")/common.sh"
cport=$(free_port_pair)
"$root/usr/bin/wardend" --config "$root/etc/warden/wardend.conf" --data-dir "$work/cell" \
  --cell "1@127.0.0.1:$cport" --node 1 >"$work/cell.log" 2>&1 &
wardend_pid=$!
wait_until 30 grep -q "cell member 1 leads" "$work/cell.log" \
  || { cat "$work/cell.log"; fail "the one-member cell did not lead"; }
take_token_then_stop "$cport" cell "$work/cell.log"
echo "check-package: wardend --cell ran from the packaged config, granted token $token"

# 5. the unit
unit=$root/usr/lib/systemd/system/wardend.service
if command -v systemd-analyze >/dev/null; then
  # --root would need the whole tree; the unit's ExecStart is checked on the real path.
  if [ -z "$root" ]; then
    systemd-analyze verify "$unit" 2>"$work/verify.log" || true
    # Only complaints about this unit count (the host's other units are not ours).
    if grep -i 'wardend' "$work/verify.log"; then fail "systemd-analyze verify: see above"; fi
    echo "check-package: systemd-analyze verify: clean"
  else
    echo "check-package: systemd-analyze verify needs the installed package (run as root)"
  fi
else
  echo "check-package: systemd-analyze not found: unit not verified"
fi

# 6. man pages
for page in warden wardend; do
  zcat "$root/usr/share/man/man1/$page.1.gz" | grep -q "^\.TH \"*${page^^}" \
    || fail "man page $page.1.gz has no .TH for $page"
done
echo "check-package: man pages ok"

# 7. the -dev packages as a consumer sees them
if [ -z "$root" ]; then
  cmake -S examples/consumer -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/consumer" >/dev/null
  "$work/consumer/warden_consumer" >/dev/null
  # shellcheck disable=SC2046 # engines.txt is a list of words
  "$work/consumer/warden_engines" $(cat "$work/consumer/engines.txt") >"$work/engines.log" 2>&1 \
    || { cat "$work/engines.log"; fail "the consumer does not have every engine"; }
  echo "check-package: examples/consumer built and ran against the installed -dev packages"
fi

# 8. purge
if [ -z "$root" ]; then
  packages=(wardend warden)
  for engine in "${engines[@]}"; do packages+=("libwarden-$engine-dev" "libwarden-${engine}0"); done
  dpkg --purge "${packages[@]}" libwarden-dev libwarden0 >"$work/dpkg.log" 2>&1 \
    || { cat "$work/dpkg.log"; fail "dpkg --purge failed"; }
  for path in /usr/bin/wardend /usr/bin/warden /etc/warden/wardend.conf \
    /usr/lib/systemd/system/wardend.service /usr/lib/x86_64-linux-gnu/warden; do
    [ ! -e "$path" ] || fail "$path is still there after purge"
  done
  echo "check-package: purged"
fi
echo "check-package: all checks passed"
