#!/usr/bin/env bash
# Lua 5.1 (Debian's lua5.1), the language of Argo CD's health checks (gopher-lua implements
# Lua 5.1), for the tests of manifests/argocd/health.lua. Installed with the machine's own
# apt when missing, which needs root. Prints the path of lua5.1 on its last line.
set -euo pipefail

log() { echo "provision-lua: $*" >&2; }
die() { echo "provision-lua: error: $*" >&2; exit 1; }

if ! command -v lua5.1 >/dev/null; then
    command -v apt-get >/dev/null || die "apt-get not found: install Lua 5.1 (lua5.1) with the system's package manager"
    [ "$(id -u)" = 0 ] || die "lua5.1 missing; as root: apt-get install lua5.1"
    # One install at a time (parallel test workers on a fresh machine).
    lock="${XDG_CACHE_HOME:-$HOME/.cache}/daemonjob/.lua.lock"
    mkdir -p "$(dirname "$lock")"
    exec 9>"$lock"
    flock 9
    if ! command -v lua5.1 >/dev/null; then
        log "installing lua5.1"
        export DEBIAN_FRONTEND=noninteractive
        apt-get -q -o Dpkg::Use-Pty=0 install -y --no-install-recommends lua5.1 >&2 \
            || { apt-get -q update >&2 && apt-get -q -o Dpkg::Use-Pty=0 install -y --no-install-recommends lua5.1 >&2; } \
            || die "apt-get install lua5.1 failed"
    fi
fi
command -v lua5.1 || die "lua5.1 still missing after provisioning"
