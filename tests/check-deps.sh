#!/bin/sh
# Checks (and with --install, or as root when something is missing, installs) the Debian
# packages dtrain's build and tests need. The one list of dependencies lives here; the
# Makefile's `deps` target, `make test` and .ci/run all call this script.
PKGS="build-essential pkg-config libopenblas-openmp-dev libconfig-dev zlib1g-dev
libcurl4-openssl-dev libssl-dev libpng-dev libjpeg62-turbo-dev libcmocka-dev
dataset-fashion-mnist python3 python3-numpy python3-torch openmpi-bin libopenmpi-dev iproute2
procps libopenblas0-pthread clang libclang-rt-14-dev libomp-dev"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ]; then
    echo "dtrain: installing:$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null || {
        echo "dtrain: apt-get install failed for:$missing" >&2
        exit 1
    }
    exit 0
fi
echo "dtrain: missing packages:$missing" >&2
echo "run: sudo apt-get install -y$missing" >&2
[ "$1" = "--install" ] && exit 0
exit 1
