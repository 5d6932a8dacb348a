#!/usr/bin/env bash
# Build the controller image from the Dockerfile: with Docker when its engine answers, else
# with buildah (root, vfs storage, chroot isolation) on a Debian base made once by
# hack/image-base.sh, since the official python base may not be pullable.
#
#   IMG              the image to build (default daemonjob-controller:dev)
#   ENGINE           auto (default), docker or buildah
#   BASE             the Dockerfile's BASE build argument; default: the Dockerfile's own
#                    (docker), the locally made Debian base (buildah)
#   BUILDAH_FLAGS    global flags of buildah (default: --storage-driver vfs)
#   BUILD_MOUNTS     -v flags for RUN steps, never baked into the image (default: the
#                    machine's CA bundle and /etc/pip.conf, so pip works behind a proxy
#                    that re-signs TLS)
set -euo pipefail
cd "$(dirname "$0")/.."

IMG="${IMG:-daemonjob-controller:dev}"
ENGINE="${ENGINE:-auto}"
log() { echo "build-image: $*" >&2; }
die() { echo "build-image: error: $*" >&2; exit 1; }

if [ "$ENGINE" = auto ]; then
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then ENGINE=docker; else ENGINE=buildah; fi
fi

case "$ENGINE" in
docker)
    exec docker build ${BASE:+--build-arg "BASE=$BASE"} -t "$IMG" .
    ;;
buildah)
    bash hack/provision-image-tools.sh >/dev/null
    read -r -a BUILDAH <<< "buildah ${BUILDAH_FLAGS---storage-driver vfs}"
    base="${BASE:-$(bash hack/image-base.sh)}"
    if [ -z "${BUILD_MOUNTS+x}" ]; then
        BUILD_MOUNTS="-v /etc/ssl/certs:/etc/ssl/certs:ro"
        [ -f /etc/pip.conf ] && BUILD_MOUNTS+=" -v /etc/pip.conf:/etc/pip.conf:ro"
    fi
    read -r -a mounts <<< "$BUILD_MOUNTS"
    previous=$("${BUILDAH[@]}" images --quiet --no-trunc "$IMG" 2>/dev/null || true)
    log "buildah bud on $base"
    "${BUILDAH[@]}" bud --isolation chroot --layers=false --build-arg "BASE=$base" "${mounts[@]}" \
        --tag "$IMG" -f Dockerfile . >&2
    # The image the name pointed at before, now nameless: removed unless a container uses it.
    current=$("${BUILDAH[@]}" images --quiet --no-trunc "$IMG")
    if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
        "${BUILDAH[@]}" rmi "$previous" >/dev/null 2>&1 || true
    fi
    log "built $IMG: $("${BUILDAH[@]}" images --format '{{.Size}}' "$IMG" | head -n1) (uncompressed)"
    echo "$IMG"
    ;;
*) die "ENGINE=$ENGINE: use auto, docker or buildah" ;;
esac
