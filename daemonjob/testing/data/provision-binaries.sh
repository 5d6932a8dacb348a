#!/usr/bin/env bash
# Provide etcd, kube-apiserver, kube-controller-manager, kube-scheduler (and kubectl)
# for the local test cluster. Prints the directory holding them on its last line.
#
# Order of preference:
#   1. DAEMONJOB_KUBE_BIN: a directory the user names, holding all of them;
#      KUBEBUILDER_ASSETS (the envtest convention) is honoured for etcd and kube-apiserver.
#   2. The cache: ${XDG_CACHE_HOME:-~/.cache}/daemonjob/kube-v1.20.2/bin.
#   3. A build of Kubernetes v1.20.2 from Debian's source package with Go 1.15 from
#      Debian bullseye, fetched with apt into the cache (the machine's apt configuration
#      is not changed; only the mirror it already uses is read).
set -euo pipefail

KUBE_VERSION=1.20.2
DEB_SRC_VERSION="1.20.5+really1.20.2-1.1+deb12u1"
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/daemonjob/kube-v${KUBE_VERSION}"
BIN_DIR="$CACHE_ROOT/bin"
SERVER_BINS=(etcd kube-apiserver kube-controller-manager kube-scheduler)

log() { echo "provision: $*" >&2; }
die() { echo "provision: error: $*" >&2; exit 1; }

have_all() {  # dir bins...
    local dir=$1; shift
    for b in "$@"; do [ -x "$dir/$b" ] || return 1; done
}

# 1. A directory the user names.
if [ -n "${DAEMONJOB_KUBE_BIN:-}" ]; then
    missing=()
    for b in "${SERVER_BINS[@]}"; do [ -x "$DAEMONJOB_KUBE_BIN/$b" ] || missing+=("$b"); done
    [ ${#missing[@]} -eq 0 ] || die "DAEMONJOB_KUBE_BIN=$DAEMONJOB_KUBE_BIN lacks: ${missing[*]} (put executables of these names there, or unset it to use the cache/build)"
    echo "$DAEMONJOB_KUBE_BIN"; exit 0
fi

mkdir -p "$BIN_DIR"
if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
    for b in etcd kube-apiserver; do
        [ -x "$KUBEBUILDER_ASSETS/$b" ] || die "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS has no executable '$b' (envtest assets hold etcd and kube-apiserver)"
    done
fi

# 2. The cache.
if have_all "$BIN_DIR" "${SERVER_BINS[@]}" kubectl && [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
    echo "$BIN_DIR"; exit 0
fi

# 3. Fetch and build.
command -v apt-get >/dev/null || die "apt-get not found: cannot fetch Kubernetes sources. Provide the binaries with DAEMONJOB_KUBE_BIN=<dir holding ${SERVER_BINS[*]}> or KUBEBUILDER_ASSETS"
WORK="$CACHE_ROOT/work"
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/archives/partial" "$WORK/src" "$WORK/root"

. "$(dirname "$0")/debian-apt.sh"
mirror=$(debian_mirror) || die "no Debian mirror found in /etc/apt/sources.list*; provide binaries with DAEMONJOB_KUBE_BIN or KUBEBUILDER_ASSETS"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
apt_use "$WORK" "deb [signed-by=$keyring] $mirror bullseye main" "deb [signed-by=$keyring] $mirror bookworm main" \
    "deb-src [signed-by=$keyring] $mirror bookworm main"
apt_update_once "$WORK" "bullseye, bookworm"

fetch_deb() {  # package -> extracts into $WORK/root
    local pkg=$1 stamp="$WORK/root/.${1%%/*}"
    [ -f "$stamp" ] && return 0
    log "downloading $pkg"
    (cd "$WORK/apt/archives" && "${APT[@]}" download "$pkg" >&2) || die "could not download Debian package $pkg"
    local name=${pkg%%/*} deb
    deb=$(ls -t "$WORK/apt/archives/${name%%=*}"_*.deb | head -n1)
    dpkg -x "$deb" "$WORK/root"
    touch "$stamp"
}

# etcd (3.4 from bookworm), unless envtest assets give it.
if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
    ln -sf "$KUBEBUILDER_ASSETS/etcd" "$BIN_DIR/etcd"
elif [ ! -x "$BIN_DIR/etcd" ]; then
    fetch_deb etcd-server/bookworm
    cp "$WORK/root/usr/bin/etcd" "$BIN_DIR/etcd"
fi

# kubectl matching the server (kubernetes-client from bookworm, the same source).
if [ ! -x "$BIN_DIR/kubectl" ]; then
    fetch_deb kubernetes-client/bookworm
    cp "$WORK/root/usr/bin/kubectl" "$BIN_DIR/kubectl"
fi

need_build=0
for b in kube-controller-manager kube-scheduler; do [ -x "$BIN_DIR/$b" ] || need_build=1; done
if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
    ln -sf "$KUBEBUILDER_ASSETS/kube-apiserver" "$BIN_DIR/kube-apiserver"
else
    [ -x "$BIN_DIR/kube-apiserver" ] || need_build=1
fi

if [ $need_build -eq 1 ]; then
    # Go 1.15: newer Go builds a 1.20 apiserver that crashes at run time (vendored reflect2).
    fetch_deb golang-1.15-go/bullseye
    fetch_deb golang-1.15-src/bullseye
    command -v rsync >/dev/null || { fetch_deb rsync/bookworm; fetch_deb libpopt0/bookworm; fetch_deb libxxhash0/bookworm; }
    GOROOT="$WORK/root/usr/lib/go-1.15"
    [ -x "$GOROOT/bin/go" ] || die "Go 1.15 not found after unpacking golang-1.15-go"

    tree="$WORK/src/kubernetes-$KUBE_VERSION"
    if [ ! -f "$tree/.unpacked" ]; then
        log "downloading Kubernetes source ($DEB_SRC_VERSION)"
        (cd "$WORK/src" && "${APT[@]}" source --download-only "kubernetes=$DEB_SRC_VERSION" >&2) \
            || die "could not download the Debian source package kubernetes=$DEB_SRC_VERSION"
        orig=$(ls "$WORK/src"/kubernetes_*.orig.tar.* | head -n1)
        rm -rf "$tree"; mkdir -p "$tree"
        tar -xf "$orig" -C "$tree" --strip-components=1
        touch "$tree/.unpacked"
    fi
    log "building kube-apiserver, kube-controller-manager, kube-scheduler (several minutes on 2 cores)"
    (
        cd "$tree"
        export PATH="$GOROOT/bin:$WORK/root/usr/bin:$PATH" GOROOT GOFLAGS= GO111MODULE=
        export LD_LIBRARY_PATH="$WORK/root/usr/lib/x86_64-linux-gnu:$WORK/root/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
        export CGO_ENABLED=0 KUBE_GIT_VERSION="v$KUBE_VERSION" KUBE_GIT_TREE_STATE=clean
        export GOCACHE="$WORK/gocache" HOME="$WORK"
        make WHAT="cmd/kube-apiserver cmd/kube-scheduler cmd/kube-controller-manager" GOLDFLAGS="-s -w" >&2
    ) || die "building Kubernetes v$KUBE_VERSION failed (see the output above); provide the binaries with DAEMONJOB_KUBE_BIN instead"
    for b in kube-apiserver kube-controller-manager kube-scheduler; do
        [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ "$b" = kube-apiserver ] && continue
        cp "$tree/_output/bin/$b" "$BIN_DIR/$b.tmp" && mv "$BIN_DIR/$b.tmp" "$BIN_DIR/$b"
    done
    rm -rf "$tree/_output" "$WORK/gocache"
fi

have_all "$BIN_DIR" "${SERVER_BINS[@]}" kubectl || die "binaries missing in $BIN_DIR after provisioning"
echo "$BIN_DIR"
