#!/usr/bin/env bash
# `make dist`: the release's files, in DIST (default dist/, emptied first), all of one version:
# daemonjob/__init__.py's __version__, which Chart.yaml (version, appVersion) and the
# manifests' image tag repeat (test/unit/test_versions.py keeps them equal; this refuses to
# build when they differ).
#
#   daemonjob-V.tar.gz, daemonjob-V-py3-none-any.whl   the package: the sdist, and the wheel built from it
#   kubectl-daemonjob_vV_linux_amd64.tar.gz              the plugin alone (hack/plugin_dist.py), and
#   daemonjob.yaml                                       its krew manifest, naming that archive's sha256
#   daemonjob-V.tgz                                      the Helm chart (helm package)
#   daemonjob-controller_V.tar                           the image daemonjob-controller:V (make image),
#                                                        as `docker save` writes it (docker load, podman load)
#   SHA256SUMS
#
#   PY             the Python of `make venv` (default .venv/bin/python)
#   IMAGE=0        leave the image out (building it takes minutes)
#   RELEASE_URL    where the release's files are downloaded from (the krew manifest's uri)
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PY:-.venv/bin/python}"
DIST="${DIST:-dist}"
IMAGE="${IMAGE:-1}"
log() { echo "dist: $*" >&2; }
die() { echo "dist: error: $*" >&2; exit 1; }

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' daemonjob/__init__.py)
[ -n "$version" ] || die "no __version__ in daemonjob/__init__.py"
chart_version=$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' charts/daemonjob/Chart.yaml)
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' charts/daemonjob/Chart.yaml)
image_tag=$(sed -n 's/^ *newTag: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' manifests/kustomization.yaml)
for pair in "Chart.yaml version:$chart_version" "Chart.yaml appVersion:$app_version" \
            "manifests/kustomization.yaml newTag:$image_tag"; do
    [ "${pair##*:}" = "$version" ] || die "${pair%%:*} is ${pair##*:}, __version__ is $version: make them one"
done

case "$DIST" in "" | / | . | .. | "$HOME") die "DIST=$DIST: name a directory of its own, it is emptied first" ;; esac
rm -rf "$DIST" && mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The package, with the locked build backend (requirements-build.txt), as the Dockerfile builds it.
log "sdist and wheel $version"
"$PY" -m venv "$work/build"
"$work/build/bin/pip" install -q --disable-pip-version-check --require-hashes --no-deps -r requirements-build.txt
"$work/build/bin/python" -c 'import sys; from setuptools import build_meta as b; b.build_sdist(sys.argv[1])' "$DIST" >/dev/null
tar -xzf "$DIST/daemonjob-$version.tar.gz" -C "$work"
(cd "$work/daemonjob-$version" && "$work/build/bin/python" -m pip wheel -q --disable-pip-version-check \
    --no-deps --no-build-isolation --wheel-dir "$DIST" .)

log "the plugin's archive and krew manifest"
"$PY" hack/plugin_dist.py --out "$DIST" ${RELEASE_URL:+--release-url "$RELEASE_URL"} >/dev/null

log "the chart"
helm_dir=$(bash hack/provision-helm.sh | tail -n1)
"$helm_dir/helm" package charts/daemonjob --destination "$DIST" >/dev/null

if [ "$IMAGE" != 0 ]; then
    img="daemonjob-controller:$version"
    log "the image $img"
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
        IMG="$img" ENGINE=docker bash hack/build-image.sh
        docker save "$img" -o "$DIST/daemonjob-controller_$version.tar"
    else
        IMG="$img" ENGINE=buildah bash hack/build-image.sh >/dev/null
        read -r -a buildah <<< "buildah ${BUILDAH_FLAGS---storage-driver vfs}"
        "${buildah[@]}" push "$img" "docker-archive:$DIST/daemonjob-controller_$version.tar:$img" >/dev/null
    fi
fi

(cd "$DIST" && sha256sum -- * > SHA256SUMS)
log "$DIST:"
(cd "$DIST" && ls -l | sed 1d >&2)
