#!/usr/bin/env bash
# buildah and mmdebstrap, for `make image` and the image test on machines without a Docker
# engine. Both are Debian packages (bookworm: buildah 1.28, mmdebstrap 1.3); they are
# installed with the machine's own apt when missing, which needs root. Prints the path of
# buildah on its last line.
set -euo pipefail

log() { echo "provision-image-tools: $*" >&2; }
die() { echo "provision-image-tools: error: $*" >&2; exit 1; }

have_all() { command -v buildah >/dev/null && command -v mmdebstrap >/dev/null; }

if ! have_all; then
    command -v apt-get >/dev/null || die "apt-get not found: install buildah and mmdebstrap with the system's package manager"
    [ "$(id -u)" = 0 ] || die "buildah or mmdebstrap missing; as root: apt-get install buildah mmdebstrap"
    # One install at a time (parallel test workers on a fresh machine).
    lock="${XDG_CACHE_HOME:-$HOME/.cache}/daemonjob/.image-tools.lock"
    mkdir -p "$(dirname "$lock")"
    exec 9>"$lock"
    flock 9
    if ! have_all; then
        log "installing buildah and mmdebstrap"
        export DEBIAN_FRONTEND=noninteractive
        apt-get -q -o Dpkg::Use-Pty=0 install -y --no-install-recommends buildah mmdebstrap uidmap >&2 \
            || { apt-get -q update >&2 && apt-get -q -o Dpkg::Use-Pty=0 install -y --no-install-recommends buildah mmdebstrap uidmap >&2; } \
            || die "apt-get install buildah mmdebstrap failed"
    fi
fi
have_all || die "buildah or mmdebstrap still missing after provisioning"
command -v buildah
