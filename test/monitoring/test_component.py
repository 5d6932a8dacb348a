"""The kustomize component of manifests/monitoring fits the controller's own manifests:
what it lists exists, the ServiceMonitor finds the metrics Service and its port, and the
job name the rules select on is the one the ServiceMonitor gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from daemonjob.testing.prometheus import JOB

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
COMPONENT = MANIFESTS / "monitoring"


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_component_lists_existing_files() -> None:
    k = load(COMPONENT / "kustomization.yaml")
    assert k["kind"] == "Component" and k["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
    for name in k["resources"]:
        assert (COMPONENT / name).is_file(), name
    (dashboard,) = k["configMapGenerator"]
    assert dashboard["options"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["options"]["disableNameSuffixHash"] is True
    for name in dashboard["files"]:
        json.loads((COMPONENT / name).read_text())


def test_service_monitor_selects_the_metrics_service() -> None:
    monitor = load(COMPONENT / "servicemonitor.yaml")
    service = load(MANIFESTS / "service.yaml")
    labels = service["metadata"]["labels"]
    for key, value in monitor["spec"]["selector"]["matchLabels"].items():
        assert labels.get(key) == value, key
    assert service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["honorLabels"] is True  # the DaemonJob's namespace label survives the scrape
    # prometheus-operator names the job after the Service (no jobLabel set): what the rules select.
    assert "jobLabel" not in monitor["spec"] and service["metadata"]["name"] == JOB


def test_rules_select_the_service_monitor_job() -> None:
    text = (COMPONENT / "prometheusrule.yaml").read_text()
    jobs = set(re.findall(r'job="([^"]+)"', text))
    assert jobs == {JOB}


def test_everything_lands_in_the_controller_namespace() -> None:
    namespace = load(MANIFESTS / "namespace.yaml")["metadata"]["name"]
    for name in ("servicemonitor.yaml", "prometheusrule.yaml"):
        assert load(COMPONENT / name)["metadata"]["namespace"] == namespace
    (dashboard,) = load(COMPONENT / "kustomization.yaml")["configMapGenerator"]
    assert dashboard["namespace"] == namespace
