#!/usr/bin/env bash
# Installs the system packages the tests and benchmarks need that pip cannot: Debian's
# redis-server (the real server the Redis Streams connector is tested against). Idempotent: does
# nothing when redis-server is already on PATH, so CI and developers can run it every time.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
    echo "install-system-deps: redis-server already installed ($(command -v redis-server))"
    exit 0
fi

# apt-get needs root; use sudo when it is there and we are not root.
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-system-deps: need root (or sudo) to apt-get install redis-server" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y redis-server
# Debian's package starts a system-wide server on port 6379; the tests start their own on a free
# port, so the system one is not needed, but it is left as the package set it up.
echo "install-system-deps: installed $(command -v redis-server)"
