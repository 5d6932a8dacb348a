#!/usr/bin/env bash
# Provide `prometheus` and `promtool` for the monitoring tests and `up --prometheus`.
# Prints the directory holding them on its last line.
#
# Order of preference:
#   1. DAEMONJOB_PROMETHEUS_BIN: a directory the user names, holding both.
#   2. The cache: ${XDG_CACHE_HOME:-~/.cache}/daemonjob/prometheus-2.42/bin.
#   3. Both on PATH, in one directory (a distribution's package, an official release).
#   4. Debian bookworm's `prometheus` package (2.42, both binaries), fetched with apt into
#      the cache (the machine's apt configuration is not changed; only the mirror it already
#      uses is read).
set -euo pipefail

PROM_SERIES=2.42
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/daemonjob/prometheus-${PROM_SERIES}"
BIN_DIR="$CACHE_ROOT/bin"
BINS=(prometheus promtool)

log() { echo "provision-prometheus: $*" >&2; }
die() { echo "provision-prometheus: error: $*" >&2; exit 1; }

have_all() {  # dir
    for b in "${BINS[@]}"; do [ -x "$1/$b" ] || return 1; done
}

# 1. A directory the user names.
if [ -n "${DAEMONJOB_PROMETHEUS_BIN:-}" ]; then
    have_all "$DAEMONJOB_PROMETHEUS_BIN" \
        || die "DAEMONJOB_PROMETHEUS_BIN=$DAEMONJOB_PROMETHEUS_BIN lacks prometheus or promtool (or unset it to use the cache)"
    echo "$DAEMONJOB_PROMETHEUS_BIN"; exit 0
fi

# 2. The cache.
if have_all "$BIN_DIR"; then echo "$BIN_DIR"; exit 0; fi

# 3. PATH: both in one directory (a distribution's package, an official release).
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
    dir=$(dirname "$(command -v prometheus)")
    if have_all "$dir"; then echo "$dir"; exit 0; fi
fi

# 4. Debian's package.
command -v apt-get >/dev/null || die "apt-get not found: put prometheus and promtool on PATH or in DAEMONJOB_PROMETHEUS_BIN"
WORK="$CACHE_ROOT/work"
mkdir -p "$BIN_DIR" "$WORK/apt/lists/partial" "$WORK/apt/archives/partial" "$WORK/root"
# One fetch at a time (parallel test workers on a fresh machine); the winner fills the cache.
if command -v flock >/dev/null; then
    exec 9>"$CACHE_ROOT/.lock"
    flock 9
    if have_all "$BIN_DIR"; then echo "$BIN_DIR"; exit 0; fi
fi

. "$(dirname "$0")/debian-apt.sh"
mirror=$(debian_mirror) || die "no Debian mirror found in /etc/apt/sources.list*; put prometheus and promtool on PATH or in DAEMONJOB_PROMETHEUS_BIN"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
apt_use "$WORK" "deb [signed-by=$keyring] $mirror bookworm main"
apt_update_once "$WORK" bookworm
log "downloading prometheus/bookworm"
(cd "$WORK/apt/archives" && "${APT[@]}" download prometheus/bookworm >&2) || die "could not download Debian package prometheus"
deb=$(ls -t "$WORK/apt/archives"/prometheus_*.deb | head -n1)
dpkg -x "$deb" "$WORK/root"
for b in "${BINS[@]}"; do
    cp "$WORK/root/usr/bin/$b" "$BIN_DIR/$b.tmp" && mv "$BIN_DIR/$b.tmp" "$BIN_DIR/$b"
done
# The web UI's files, where the binary looks for them when started from here.
if [ -d "$WORK/root/usr/share/prometheus" ]; then
    rm -rf "$CACHE_ROOT/share"; cp -r "$WORK/root/usr/share/prometheus" "$CACHE_ROOT/share"
fi
rm -rf "$WORK/apt/archives"/*.deb
have_all "$BIN_DIR" || die "prometheus or promtool missing in $BIN_DIR after provisioning"
echo "$BIN_DIR"
