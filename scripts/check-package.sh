#!/usr/bin/env bash
# Checks the Debian packages that `make package` built, the way a user gets them:
#
#   1. each .deb holds what it should (dpkg-deb --contents);
#   2. they install with dpkg -i (as root; otherwise they are unpacked into a staging
#      root with dpkg -x, and the maintainer scripts are not exercised);
#   3. the packaged wardend starts from the packaged /etc/warden/wardend.conf (with its
#      port and data dir overridden on the command line: flags win), the packaged
#      `warden` takes a lock on it, SIGTERM stops it with status 0;
#   4. the systemd unit passes `systemd-analyze verify`;
#   5. the man pages are there and name their program;
#   6. libwarden-dev builds examples/consumer (find_package and pkg-config);
#   7. `dpkg --purge` removes it all again (root only).
#
# Usage: scripts/check-package.sh PACKAGE_BUILD_DIR
set -euo pipefail

build_dir=${1:?usage: check-package.sh PACKAGE_BUILD_DIR}
work=$(mktemp -d "${TMPDIR:-/tmp}/warden-package.XXXXXX")
wardend_pid=
cleanup() {
  if [ -n "$wardend_pid" ]; then kill -9 "$wardend_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-package: $*" >&2; exit 1; }

shopt -s nullglob
debs=("$build_dir"/*.deb)
[ ${#debs[@]} -eq 4 ] || fail "expected 4 .deb files in $build_dir, found ${#debs[@]}"
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
depends=$(dpkg-deb --field "$(deb_of wardend)" Depends)
[[ $depends == *"libwarden0 (= "* ]] || fail "wardend does not depend on libwarden0: $depends"
[[ $depends == *adduser* ]] || fail "wardend does not depend on adduser (its postinst needs it)"
echo "check-package: contents ok"

# 2. install
if [ "$(id -u)" -eq 0 ]; then
  root=
  dpkg -i "${debs[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i failed"; }
  getent passwd wardend >/dev/null || fail "the postinst did not create the wardend user"
  echo "check-package: installed with dpkg -i"
else
  root=$work/root
  for d in "${debs[@]}"; do dpkg -x "$d" "$root"; done
  export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu
  echo "check-package: not root: unpacked into $root (maintainer scripts not run)"
fi

# 3. run the packaged server from the packaged config, flags winning
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
token=$("$root/usr/bin/warden" run --url "warden://127.0.0.1:$port" --group package \
  --name check --wait 10s -- sh -c 'echo "$WARDEN_TOKEN"')
[ "$token" -ge 1 ] || fail "warden run printed no token"
kill -TERM "$wardend_pid"
status=0
wait "$wardend_pid" || status=$?
wardend_pid=
[ "$status" -eq 0 ] || { cat "$work/wardend.log"; fail "wardend exited $status on SIGTERM"; }
[ -f "$work/data/state" ] || fail "wardend kept no state in the data dir given on the command line"
echo "check-package: wardend --config ran, granted token $token, stopped cleanly"

# 4. the unit
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

# 5. man pages
for page in warden wardend; do
  zcat "$root/usr/share/man/man1/$page.1.gz" | grep -q "^\.TH \"*${page^^}" \
    || fail "man page $page.1.gz has no .TH for $page"
done
echo "check-package: man pages ok"

# 6. libwarden-dev as a consumer sees it
if [ -z "$root" ]; then
  cmake -S examples/consumer -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/consumer" >/dev/null
  "$work/consumer/warden_consumer" >/dev/null
  echo "check-package: examples/consumer built and ran against the installed libwarden-dev"
fi

# 7. purge
if [ -z "$root" ]; then
  dpkg --purge wardend warden libwarden-dev libwarden0 >"$work/dpkg.log" 2>&1 \
    || { cat "$work/dpkg.log"; fail "dpkg --purge failed"; }
  for path in /usr/bin/wardend /usr/bin/warden /etc/warden/wardend.conf \
    /usr/lib/systemd/system/wardend.service; do
    [ ! -e "$path" ] || fail "$path is still there after purge"
  done
  echo "check-package: purged"
fi
echo "check-package: all checks passed"
