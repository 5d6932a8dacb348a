# The DaemonJob controller image.
#   make docker-build         docker build -t daemonjob-controller:dev .
#   make image                the same with buildah when no Docker engine answers, on a Debian
#                             bookworm base made locally with mmdebstrap (hack/image-base.sh)
#
# BASE: a Debian-based image with python3 and its venv module. The default is the official
# python slim image, pinned by digest; to move it to a newer build of the tag:
#   docker buildx imagetools inspect python:3.11-slim-bookworm   (or: crane digest ...)
# and replace the digest below (the lock files are for Python 3.11: `make lock` with it).
ARG BASE=python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

# -- build: the locked dependencies and the project in a virtualenv -----------------------
FROM ${BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Exact versions, each file checked against its hash (make lock writes both files).
COPY requirements.txt requirements-build.txt ./
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --no-deps -r requirements.txt \
    && python3 -m venv /opt/build \
    && /opt/build/bin/pip install --require-hashes --no-deps -r requirements-build.txt
COPY pyproject.toml setup.cfg README.md LICENSE ./
COPY daemonjob ./daemonjob
# daemonjob/testing/data/crd.yaml and reports-crd.yaml link to them
COPY manifests/crd.yaml manifests/reports-crd.yaml ./manifests/
# The project itself, built with the locked build backend; then pip and setuptools leave the
# runtime venv (setuptools: venv seeds it in Python < 3.12).
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /tmp/wheels . \
    && /opt/venv/bin/pip install --no-deps /tmp/wheels/daemonjob-*.whl \
    && /opt/venv/bin/pip check \
    && /opt/venv/bin/python -m pip uninstall --yes pip setuptools

# -- runtime ------------------------------------------------------------------------------
FROM ${BASE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/venv /opt/venv
RUN groupadd --gid 65532 nonroot \
    && useradd --no-log-init --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin nonroot
LABEL org.opencontainers.image.title="daemonjob-controller" \
      org.opencontainers.image.description="Runs a Job on every eligible Kubernetes node" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
WORKDIR /
# metrics, health probes
EXPOSE 8080 8081
ENTRYPOINT ["/opt/venv/bin/daemonjob-controller"]
