#!/usr/bin/env bash
# deps.sh: what `make test` needs on the machine besides Go, in one list.
# `make check` runs it before `make test`, and `.ci/run` runs `make check`.
#
#   scripts/deps.sh          install what is missing when it can (root with
#                            apt-get), else say what to install and fail
#   scripts/deps.sh --list   print the Debian packages, one a line
#
# DEPS_EXTRA, space-separated Debian package names, adds to the list (a
# name that does not exist shows what happens when one cannot be
# installed).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian and Ubuntu packages the tests need: redis-cli and redis-server
# (integration tests, the Redis store, the differential tests against a real
# Redis), PostgreSQL and MariaDB (the database/sql validator), etcd (the etcd
# validator), redis-py, psycopg2 and pytest (the Python client), Node.js and
# PHP with four PHP lock libraries (the lock-library tests; the tests
# install their npm packages themselves, at the versions their lock files
# pin), iptables and iproute2 (the fault campaign's network namespaces),
# gnuplot (the soak's plot), podman and runc (the container image's test,
# integration/image_test.go; the test finds the runtime, cgroup manager and
# rlimits the machine needs), a JDK and Maven (integration/java-libs: the
# Java lock libraries, and clients/java: the Java client, whose
# dependencies Maven fetches itself at the versions their pom.xml pin),
# openssl (the clients' TLS tests make a certificate), python3-venv (the
# Python lock libraries of integration/pylibs, which the test installs in a
# venv at the versions its requirements.txt pins; and make
# test-python-venv: fresh venvs of Debian's Python, where pip builds
# psycopg2 from PyPI's source with python3-dev, libpq-dev and gcc). The
# Rust lock libraries (integration/rustlibs) need cargo with Rust 1.88 or
# later, newer than Debian 12's: rustup's. chromium: the web console's
# browser tests (integration/console_test.go drive it headless with
# playwright-core, which the test installs at the version its
# package-lock.json pins). Add to this list.
PACKAGES="make redis-tools redis-server postgresql mariadb-server etcd-server python3-psycopg2 python3-pytest iptables iproute2 gnuplot-nox python3-redis nodejs php-cli php-redis php-predis php-symfony-lock php-symfony-semaphore php-malkusch-lock php-illuminate-cache php-illuminate-redis podman runc openjdk-17-jdk-headless maven openssl python3-venv python3-dev libpq-dev gcc chromium"
PACKAGES="$PACKAGES ${DEPS_EXTRA:-}"

if [ "${1:-}" = "--list" ]; then
  printf '%s\n' $PACKAGES
  exit 0
fi
if [ $# -gt 0 ]; then
  echo "usage: $0 [--list]" >&2
  exit 2
fi

# missing prints the packages that are not installed, space-separated.
missing() {
  local m="" p
  for p in $PACKAGES; do
    dpkg -s "$p" >/dev/null 2>&1 || m="$m $p"
  done
  # npm: Debian's package, unless the installed Node.js brings its own.
  command -v npm >/dev/null 2>&1 || m="$m npm"
  echo "${m# }"
}

GO="${GO:-go}"
if ! command -v "$GO" >/dev/null 2>&1; then
  echo "deps: $GO is not on PATH: install Go $(sed -n 's/^go //p' go.mod 2>/dev/null) or later (https://go.dev/dl/)" >&2
  exit 1
fi
if ! command -v dpkg >/dev/null 2>&1; then
  echo "deps: no dpkg here, so this script cannot tell what is installed; the tests need these Debian packages or their equivalents:" >&2
  echo "  $PACKAGES npm" >&2
  exit 1
fi

todo="$(missing)"
if [ -z "$todo" ]; then
  echo "deps: every package the tests need is installed"
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "deps: installing $todo"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || true
  # shellcheck disable=SC2086
  apt-get install -y -qq $todo >/dev/null || true
  todo="$(missing)"
  [ -z "$todo" ] && exit 0
  echo "deps: apt-get could not install: $todo" >&2
else
  echo "deps: the tests need packages that are not installed: $todo" >&2
fi
echo "Install them, as root, with" >&2
echo "  apt-get install -y $todo" >&2
echo "then run make check again." >&2
exit 1
