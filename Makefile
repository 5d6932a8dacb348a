# DaemonJob: every target provisions what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
NODES  ?= 3
N      ?= 5000
DJS    ?= 10
SCENARIO ?= default
BENCH_ARGS ?=
IMG    ?= daemonjob-controller:dev
KUBECTL ?= kubectl
CLUSTER_DIR := .cluster
# The local cluster of `make cluster-up` when it is running, else the usual kubectl default.
KUBECONFIG ?= $(if $(wildcard $(CLUSTER_DIR)/kubeconfig),$(abspath $(CLUSTER_DIR))/kubeconfig,)
ifneq ($(KUBECONFIG),)
export KUBECONFIG
endif
KIND_CLUSTER ?= daemonjob-e2e
KIND_KUBECONFIG ?= $(abspath $(CLUSTER_DIR))/kind-kubeconfig

.PHONY: help venv binaries test lint format unit cluster-up cluster-down demo run bench bench-informer bench-job-events bench-scale bench-scale-ordered bench-sim \
        install uninstall deploy undeploy helm-install helm-uninstall checkov docker-build image image-tools lua lock e2e-kind \
        dist docs

help:
	@echo "make demo          run DaemonJob on a local control plane with simulated nodes"
	@echo "make test          provision everything and run every test (make lint first)"
	@echo "make lint / format ruff, mypy and the import contracts; ruff's fixes and formatting"
	@echo "make cluster-up NODES=n [PROMETHEUS=1] / cluster-down   a background local cluster (.cluster/kubeconfig)"
	@echo "make run           the controller against the cluster in KUBECONFIG"
	@echo "make image         the controller image (Docker, else buildah); make lock  its dependency locks"
	@echo "make docs          the documentation site (mkdocs --strict) into site/; its reference pages are generated"
	@echo "make dist [IMAGE=0] the release in dist/: wheel, sdist, the plugin's archive and krew manifest, chart, image"
	@echo "make bench NODES=n [SCENARIO=tick] / bench-informer N=n / bench-job-events N=n / bench-scale N=n DJS=d  benchmarks"
	@echo "make bench-sim [NODES=n] [DJS=d]  no cluster: the controller on a simulated API, 5000/20000/65000 nodes unless NODES"

$(VENV)/.installed: setup.cfg pyproject.toml requirements-lint.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --require-hashes -r requirements-lint.txt
	$(PY) -m pip install -q -e '.[test,lint]'
	touch $@

venv: $(VENV)/.installed

binaries:
	bash hack/provision-binaries.sh >/dev/null
	bash hack/provision-prometheus.sh >/dev/null
	bash hack/provision-helm.sh >/dev/null

# Test files run on TEST_WORKERS processes, each with a local cluster of its own; most
# tests wait on the cluster rather than compute, so three share two cores well (12 min warm).
TEST_WORKERS ?= 3
test: lint docs binaries image-tools lua
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# ruff (lint and format), mypy and the import contracts (lint-imports: the layers, no circles),
# configured in pyproject.toml; `make format` applies ruff's fixes.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# The site of docs/ (mkdocs.yml), built with --strict: a broken link or a page missing from the nav
# fails. The generated reference is checked first (hack/gen_reference.py; a unit test does too).
docs: venv
	$(PY) hack/gen_reference.py --check
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

unit: venv
	$(PY) -m pytest -q test/unit

# PROMETHEUS=1: a Prometheus beside it, with the shipped alerts, scraping `make run` (:8080).
PROMETHEUS ?=
cluster-up: venv binaries
	$(PY) -m daemonjob.testing up --dir $(CLUSTER_DIR) --nodes $(NODES) $(if $(PROMETHEUS),--prometheus)

cluster-down: venv
	$(PY) -m daemonjob.testing down --dir $(CLUSTER_DIR)

demo: venv binaries
	$(PY) hack/demo.py

run: venv
	$(PY) -m daemonjob $(if $(KUBECONFIG),--kubeconfig "$(KUBECONFIG)") --log-format console --metrics-secure=false --webhook-bind-address=0

bench-informer: venv binaries
	$(PY) hack/bench_informer.py --n $(N)

# CPU per Job watch event through the informer loop and the controller's handlers (no cluster)
bench-job-events: venv
	$(PY) hack/bench_job_events.py --nodes $(N)

# NODES and N have defaults for other targets; a scenario or script with a size of its own
# (tick: 5000 nodes, bench-scale: 10,000) gets it unless the size is given.
given = $(filter command line environment environment override,$(origin $(1)))
BENCH_NODES = $(if $(or $(call given,NODES),$(filter default,$(SCENARIO))),--nodes $(NODES))

bench: venv binaries
	$(PY) hack/bench.py --scenario $(SCENARIO) $(BENCH_NODES) $(BENCH_ARGS)

bench-scale: venv binaries
	$(PY) hack/bench_scale.py $(if $(call given,N),--nodes $(N)) --daemonjobs $(DJS) $(BENCH_ARGS)

# The controller on an in-memory API server, no cluster: one size with NODES, else 5000,
# 20000 and 65000 nodes, each in a process of its own, and a table.
bench-sim: venv
	$(PY) hack/bench_sim.py $(if $(call given,NODES),--nodes $(NODES)) --daemonjobs $(DJS) $(BENCH_ARGS)

# 200 DaemonJobs over 500 nodes, half in exclusion groups, half in spec.after chains
bench-scale-ordered: venv binaries
	$(PY) hack/bench_scale.py --nodes 500 --daemonjobs 200 --ordered $(BENCH_ARGS)

install:
	$(KUBECTL) apply -f manifests/crd.yaml -f manifests/reports-crd.yaml

uninstall:
	$(KUBECTL) delete --ignore-not-found -f manifests/crd.yaml -f manifests/reports-crd.yaml

# helm and a kubectl with kustomize 5.6 from the cache (hack/provision-helm.sh), unless given.
HELM_BIN_DIR = $(shell bash hack/provision-helm.sh 2>/dev/null | tail -n1)
HELM ?= $(HELM_BIN_DIR)/helm
KUSTOMIZE_KUBECTL ?= $(HELM_BIN_DIR)/kubectl

# MONITORING=1 adds the component manifests/monitoring (ServiceMonitor, PrometheusRule,
# Grafana dashboard ConfigMap; needs prometheus-operator's CRDs). NODE_MAINTENANCE=1 adds
# manifests/node-maintenance (Node RBAC and --node-maintenance-namespaces with its sample
# value, ops). Without IMG, the image pinned in manifests/kustomization.yaml.
MONITORING ?=
NODE_MAINTENANCE ?=
deploy:
	dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	IMG="$(if $(call given,IMG),$(IMG))" MONITORING="$(MONITORING)" NODE_MAINTENANCE="$(NODE_MAINTENANCE)" \
	bash hack/deploy-overlay.sh "$$dir" && \
	$(KUSTOMIZE_KUBECTL) kustomize "$$dir" | $(KUBECTL) apply -f -

# Nodes first: release-nodes (daemonjob/release.py) releases every node a DaemonJob holds and
# removes the DaemonJobs' finalizers while the controller still has its node powers; then
# the node-maintenance RBAC (if NODE_MAINTENANCE=1 deployed it) and everything else go.
undeploy:
	if $(KUBECTL) get deployment daemonjob-controller -n daemonjob-system >/dev/null 2>&1; then \
	  $(VENV)/bin/python -m daemonjob release-nodes --leader-election-namespace=daemonjob-system; fi
	$(KUBECTL) delete --ignore-not-found -f manifests/node-maintenance/rbac.yaml
	$(KUBECTL) delete --ignore-not-found -k manifests

# The Helm chart (charts/daemonjob): HELM_ARGS for --set/-f.
HELM_ARGS ?=
helm-install:
	$(HELM) upgrade --install daemonjob charts/daemonjob -n daemonjob-system --create-namespace $(HELM_ARGS)

helm-uninstall:
	$(HELM) uninstall daemonjob -n daemonjob-system

# checkov over the rendered manifests and chart, from a virtualenv of its own in the cache.
checkov:
	bash hack/checkov.sh

# The controller image. docker-build: with Docker. image: with Docker when its engine
# answers, else with buildah (as root) on a Debian bookworm base made once with mmdebstrap.
# BASE=... replaces the Dockerfile's base (the official python slim image, pinned by digest).
BASE ?=
docker-build:
	docker build $(if $(BASE),--build-arg BASE=$(BASE)) -t $(IMG) .

image:
	IMG='$(IMG)' BASE='$(BASE)' bash hack/build-image.sh

# buildah and mmdebstrap (Debian packages) for `image` and the image test.
image-tools:
	bash hack/provision-image-tools.sh >/dev/null

# Lua 5.1 (a Debian package), Argo CD's language for health checks: the tests run
# manifests/argocd/health.lua with it.
lua:
	bash hack/provision-lua.sh >/dev/null

# The lock files the image installs with --require-hashes: requirements.txt from setup.cfg's
# install_requires, requirements-build.txt from pyproject.toml's build requirements; and
# requirements-lint.txt, the linters with the libraries they check against, for `make venv`. Pins are
# kept unless a declared range excludes them; LOCK_ARGS=--upgrade moves all to the newest.
LOCK_ARGS ?=
PIP_COMPILE = CUSTOM_COMPILE_COMMAND="make lock" $(VENV)/bin/pip-compile -q --generate-hashes --allow-unsafe \
	--strip-extras --no-emit-index-url --no-emit-find-links $(LOCK_ARGS)
lock: venv
	@$(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11) and "make lock: the image runs Python 3.11; use a venv of it (PYTHON=python3.11 VENV=.venv311)")'
	$(PY) -m pip install -q 'pip-tools>=7.4'
	$(PIP_COMPILE) --output-file requirements.txt setup.cfg
	$(PIP_COMPILE) --only-build-deps --all-build-deps --output-file requirements-build.txt pyproject.toml
	$(PIP_COMPILE) --extra lint --output-file requirements-lint.txt setup.cfg

# The release's files in dist/, all of daemonjob/__init__.py's version (hack/dist.sh says which):
# IMAGE=0 leaves the image out; RELEASE_URL is where the krew manifest says the plugin is downloaded from.
IMAGE ?= 1
RELEASE_URL ?=
dist: venv
	PY=$(PY) IMAGE=$(IMAGE) RELEASE_URL=$(RELEASE_URL) bash hack/dist.sh

e2e-kind: docker-build venv
	mkdir -p $(CLUSTER_DIR)
	kind create cluster --name $(KIND_CLUSTER) --kubeconfig $(KIND_KUBECONFIG)
	kind load docker-image $(IMG) --name $(KIND_CLUSTER)
	$(MAKE) deploy IMG=$(IMG) KUBECONFIG=$(KIND_KUBECONFIG)
	KUBECONFIG=$(KIND_KUBECONFIG) $(KUBECTL) -n daemonjob-system rollout status deployment/daemonjob-controller --timeout=180s
	KUBECONFIG=$(KIND_KUBECONFIG) DAEMONJOB_E2E_EXTERNAL=1 $(PY) -m pytest -q e2e
