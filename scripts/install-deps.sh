#!/usr/bin/env bash
# Installs every Debian 12 package that building, testing and benchmarking warden needs.
# Idempotent: packages already present are skipped, so a second run costs one dpkg query.
set -euo pipefail

packages=(
  # toolchain (ccache: the package build takes the release build's objects; lld links the
  # sanitizer build's ~70 test executables in a fifth of the CPU time GNU ld takes)
  build-essential cmake ninja-build pkg-config git clang libclang-rt-14-dev lld ccache
  # libraries warden links against
  libcli11-dev libfmt-dev nlohmann-json3-dev libasio-dev libhiredis-dev
  libzookeeper-mt-dev libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libcpp-httplib-dev libssl-dev libsodium-dev libpq-dev libmariadb-dev
  # a wardend cell's replicated log: Debian's C Raft library on libuv
  libraft-dev libuv1-dev
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  # real backends the tests start on loopback
  redis-server redis-tools etcd-server etcd-client zookeeper libslf4j-java default-jre-headless
  postgresql mariadb-server
  # process tools the fixtures use; openssl makes the TLS tests' certificates;
  # stress-ng loads the machine for the loaded runs of docs/testing.md
  procps iproute2 openssl stress-ng
  # scripts/check-skips.py reads the test report; the interop tests' foreign clients
  # (etcdctl above, redis-py's Lock, kazoo's Lock) run as real processes
  python3 python3-redis python3-kazoo
  # make package: man pages, the packages' tools, the unit check, wardend's postinst
  help2man dpkg-dev fakeroot systemd adduser
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=sudo
else
  sudo_cmd=
fi
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
