# syntax=docker/dockerfile:1
# The DaemonJob controller image: docker build -t daemonjob-controller:dev .
ARG PYTHON_IMAGE=python:3.11.10-slim-bookworm

# -- build: the project and its dependencies as wheels ------------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml setup.cfg README.md LICENSE ./
COPY daemonjob ./daemonjob
# daemonjob/testing/data/crd.yaml links to it
COPY manifests/crd.yaml ./manifests/crd.yaml
RUN pip wheel --wheel-dir /wheels .

# -- runtime ------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# The wheels are mounted, not copied, so they take no space in the image.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels daemonjob \
    && groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin nonroot
USER 65532:65532
WORKDIR /
# metrics, health probes
EXPOSE 8080 8081
ENTRYPOINT ["daemonjob-controller"]
