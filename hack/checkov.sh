#!/usr/bin/env bash
# checkov (the IaC scanner) over what users deploy: `kubectl kustomize manifests/` (with the
# monitoring and node-maintenance components) and the chart rendered with its default values
# and with node maintenance on. checkov lives in a
# virtualenv of its own in the cache, so its many dependencies never meet the project's.
# Checks that do not apply to this controller are skipped in hack/checkov.yaml, each with why.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
CHECKOV_VERSION=${CHECKOV_VERSION:-3.3.30}
venv="${XDG_CACHE_HOME:-$HOME/.cache}/daemonjob/checkov-$CHECKOV_VERSION"
if [ -n "${DAEMONJOB_CHECKOV:-}" ]; then
    checkov=$DAEMONJOB_CHECKOV
else
    checkov="$venv/bin/checkov"
    if [ ! -e "$venv/.installed" ]; then
        mkdir -p "$(dirname "$venv")"
        rm -rf "$venv" && python3 -m venv "$venv"
        "$venv/bin/pip" install -q "checkov==$CHECKOV_VERSION" >&2
        touch "$venv/.installed"
    fi
fi
bin=$(bash "$root/hack/provision-helm.sh" | tail -n1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/overlay"
IMG= MONITORING=1 NODE_MAINTENANCE=1 bash "$root/hack/deploy-overlay.sh" "$work/overlay"
"$bin/kubectl" kustomize "$work/overlay" > "$work/kustomize.yaml"
"$bin/helm" template daemonjob "$root/charts/daemonjob" -n daemonjob-system 2>/dev/null > "$work/chart.yaml"
"$bin/helm" template daemonjob "$root/charts/daemonjob" -n daemonjob-system \
    --set 'nodeMaintenance.enabled=true,nodeMaintenance.namespaces={ops}' 2>/dev/null > "$work/chart-node-maintenance.yaml"
"$checkov" --quiet --compact --skip-download --framework kubernetes --config-file "$root/hack/checkov.yaml" \
    -f "$work/kustomize.yaml" -f "$work/chart.yaml" -f "$work/chart-node-maintenance.yaml"
