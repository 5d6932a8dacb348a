#!/usr/bin/env bash
# A Debian bookworm base with Python 3.11 in buildah's storage, for building the image where
# the official python slim base cannot be pulled: made once with mmdebstrap from the Debian
# mirror the machine already uses, then reused. Prints the image's name on its last line.
#
#   DAEMONJOB_BASE_IMAGE  the name to give it (default localhost/daemonjob-base:bookworm-python3)
#   BUILDAH_FLAGS         global flags of buildah (default: --storage-driver vfs)
#   REBUILD=1             make it again even if it exists
set -euo pipefail

IMAGE="${DAEMONJOB_BASE_IMAGE:-localhost/daemonjob-base:bookworm-python3}"
read -r -a BUILDAH <<< "buildah ${BUILDAH_FLAGS---storage-driver vfs}"

log() { echo "image-base: $*" >&2; }
die() { echo "image-base: error: $*" >&2; exit 1; }

exists() { "${BUILDAH[@]}" inspect --type image "$IMAGE" >/dev/null 2>&1; }

if [ "${REBUILD:-}" != 1 ] && exists; then echo "$IMAGE"; exit 0; fi
[ "$(id -u)" = 0 ] || die "making the base needs root (mmdebstrap, buildah with the vfs driver)"

lock="${XDG_CACHE_HOME:-$HOME/.cache}/daemonjob/.image-base.lock"
mkdir -p "$(dirname "$lock")"
exec 9>"$lock"
flock 9
if [ "${REBUILD:-}" != 1 ] && exists; then echo "$IMAGE"; exit 0; fi

. "$(dirname "$0")/../daemonjob/testing/data/debian-apt.sh"
mirror=$(debian_mirror) || die "no Debian mirror found in /etc/apt/sources.list*"

work=$(mktemp -d)
container=
cleanup() {
    [ -n "$container" ] && "${BUILDAH[@]}" rm "$container" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

log "mmdebstrap bookworm with python3 (once)"
# minbase: dpkg, apt, passwd and the essentials; no documentation, manual pages or locales.
mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "$work/rootfs.tar" "deb $mirror bookworm main" "deb $mirror bookworm-updates main" >&2 \
    || die "mmdebstrap failed"

# buildah 1.28 has no `import`: add the tarball to an empty container and commit it.
container=$("${BUILDAH[@]}" from scratch)
"${BUILDAH[@]}" add "$container" "$work/rootfs.tar" / >/dev/null
"${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 \
    --label org.opencontainers.image.description="Debian bookworm with python3 (mmdebstrap)" "$container"
"${BUILDAH[@]}" commit --quiet --rm "$container" "$IMAGE" >/dev/null
container=
log "made $IMAGE"
echo "$IMAGE"
