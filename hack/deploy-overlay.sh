#!/usr/bin/env bash
# Write a kustomization that deploys manifests/ (and, with MONITORING=1, its monitoring
# component; with NODE_MAINTENANCE=1, its node-maintenance component) with the image IMG,
# into the directory $1: the `images:` entry that
# `kustomize edit set image daemonjob-controller=IMG` would write, without editing the
# kustomization kept in the repository.
set -euo pipefail
dir=$1 img=${IMG:-}
# kustomize 5 takes relative paths only.
root=$(realpath --relative-to="$dir" "$(dirname "$0")/..")
case "$img" in
    "") name=daemonjob-controller field="" ;;  # the image pinned in manifests/
    *@*) name=${img%%@*} field="digest: \"${img#*@}\"" ;;
    *) last=${img##*/}
       if [[ $last == *:* ]]; then name=${img%:*} field="newTag: \"${img##*:}\""
       else name=$img field="newTag: latest"; fi ;;
esac
{
    echo "resources: [\"$root/manifests\"]"
    components=()
    [ -n "${MONITORING:-}" ] && components+=("\"$root/manifests/monitoring\"")
    [ -n "${NODE_MAINTENANCE:-}" ] && components+=("\"$root/manifests/node-maintenance\"")
    if [ ${#components[@]} -gt 0 ]; then (IFS=,; echo "components: [${components[*]}]"); fi
    if [ -n "$field" ]; then
        echo "images:"
        echo "  - name: daemonjob-controller"
        echo "    newName: \"$name\""
        echo "    $field"
    fi
} > "$dir/kustomization.yaml"
