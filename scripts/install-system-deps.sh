#!/usr/bin/env bash
# Installs the system packages the tests and benchmarks need that pip cannot:
# - Debian's redis-server (the real server the Redis Streams connector is tested against);
# - Debian's chromium (the headless browser tests/ui/test_browser.py drives through Playwright;
#   Playwright's own `playwright install` downloads a browser build from the network, which CI
#   and offline machines cannot do, so the tests use the system one at /usr/bin/chromium);
# - Debian's iproute2 (`ip`: tests/process/test_nodes.py makes machines of network namespaces;
#   without it, or without root, that test skips and its 127.0.0.x twin still runs);
# - Debian's zookeeper (its jars in /usr/share/java: the real ZooKeeper the Nimbus HA tests
#   start themselves, tests/zookeeper_server.py; Java comes with it);
# - gcc, which `pip install` uses to compile squall's C hot path (squall/_speedups.c; without it
#   squall runs on the pure-Python twins and tests/test_native.py says the build is missing);
# - Debian's nodejs (`node`: tests/multilang/test_node.py runs a Node.js component over Storm's
#   multilang protocol; without it those tests skip).
# Idempotent: installs only what is missing, so CI and developers can run it every time.
set -euo pipefail

missing=()
if ! command -v redis-server >/dev/null 2>&1; then
    missing+=(redis-server)
else
    echo "install-system-deps: redis-server already installed ($(command -v redis-server))"
fi
if [ ! -x /usr/bin/chromium ]; then
    missing+=(chromium)
else
    echo "install-system-deps: chromium already installed (/usr/bin/chromium)"
fi
if ! command -v ip >/dev/null 2>&1; then
    missing+=(iproute2)
else
    echo "install-system-deps: iproute2 already installed ($(command -v ip))"
fi
if [ ! -f /usr/share/java/zookeeper.jar ]; then
    missing+=(zookeeper)
else
    echo "install-system-deps: zookeeper already installed (/usr/share/java/zookeeper.jar)"
fi
if ! command -v gcc >/dev/null 2>&1; then
    missing+=(gcc)
else
    echo "install-system-deps: gcc already installed ($(command -v gcc))"
fi
if ! command -v valgrind >/dev/null 2>&1; then  # python -m bench instructions (not the tests)
    missing+=(valgrind)
else
    echo "install-system-deps: valgrind already installed ($(command -v valgrind))"
fi
if ! command -v perf >/dev/null 2>&1; then  # python -m bench profile (not the tests)
    missing+=(linux-perf)
else
    echo "install-system-deps: perf already installed ($(command -v perf))"
fi
if ! command -v node >/dev/null 2>&1; then
    missing+=(nodejs)
else
    echo "install-system-deps: nodejs already installed ($(command -v node))"
fi
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

# apt-get needs root; use sudo when it is there and we are not root.
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-system-deps: need root (or sudo) to apt-get install ${missing[*]}" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
# Debian's redis-server package starts a system-wide server on port 6379; the tests start their
# own on a free port, so the system one is not needed, but it is left as the package set it up.
# Debian's zookeeper package starts no server (zookeeperd would): the tests start their own.
echo "install-system-deps: installed ${missing[*]}"
