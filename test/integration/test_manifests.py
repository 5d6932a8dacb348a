"""The deployment manifests against a real API server.

The CRD is applied for real and left in place (it is cluster-scoped and shared by other
tests); so are the daemonjob-system namespace and the RBAC objects, which are needed to
ask the API server what the controller's ServiceAccount may do. Applying is idempotent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.cluster import LocalCluster
from daemonjob.testing.crd import install_crd
from daemonjob.testing.doubles.builders import daemonjob, job_template

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
EXAMPLES_DIR = ROOT / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))
CONTROLLER_NS = "daemonjob-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{CONTROLLER_NS}:daemonjob-controller"
CRD_NAME = "daemonjobs.daemonjob.io"
GROUP_VERSION = "daemonjob.io/v1alpha1"

pytestmark = pytest.mark.cluster


# -- helpers ------------------------------------------------------------------------------
def kubectl(
    cluster: LocalCluster, *args: str, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    assert cluster.bin_dir is not None
    cmd = [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={cluster.kubeconfig}", *args]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd[1:])} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def load_all(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def written(value: Any, stored: Any) -> bool:
    """`value` is in `stored` as written: the schema's defaults may have been added beside it."""
    if isinstance(value, dict):
        return isinstance(stored, dict) and all(k in stored and written(v, stored[k]) for k, v in value.items())
    return bool(value == stored)


def table_row(header: str, line: str) -> dict[str, str]:
    """One row of kubectl's table output, cut at the header's column starts (cells may be empty).

    A column name may hold single spaces (LAST SCHEDULE); columns are apart by more.
    """
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    bounds = [*starts[1:], None]
    return {header[a:b].strip(): line[a:b].strip() for a, b in zip(starts, bounds, strict=True)}


def manifest(name: str, **spec: Any) -> dict[str, Any]:
    """As a user writes one: its Job runs `true` on every node."""
    container = {"name": "main", "image": "busybox:1.36", "command": ["true"]}
    return daemonjob(name, manifest=True, template=job_template(backoff_limit=None, container=container), **spec)


@pytest.fixture(scope="module")
def crd(cluster: LocalCluster) -> None:
    """The CRD, applied for real (never deleted: other tests share it)."""
    install_crd(cluster.kubectl_command(), MANIFESTS / "crd.yaml")


@pytest.fixture(scope="module")
def rbac(cluster: LocalCluster, crd: None) -> None:
    """The controller's namespace, ServiceAccount and roles, applied for real."""
    kubectl(cluster, "apply", "-f", str(MANIFESTS / "namespace.yaml"))
    kubectl(cluster, "apply", "-f", str(MANIFESTS / "rbac.yaml"))
    kubectl(cluster, "apply", "-f", str(MANIFESTS / "metrics-rbac.yaml"))


@pytest.fixture(scope="module")
def rbac_only_cluster() -> Iterator[LocalCluster]:
    """A control plane of its own, holding the manifests' RBAC and nothing else: the session's
    cluster also carries what other tests grant the same ServiceAccount (the e2e suite's
    Lease role), which `kubectl auth can-i` would count as the manifests'."""
    with LocalCluster() as own:
        install_crd(own.kubectl_command(), MANIFESTS / "crd.yaml")
        for name in ("namespace.yaml", "rbac.yaml", "metrics-rbac.yaml"):
            kubectl(own, "apply", "-f", str(MANIFESTS / name))
        yield own


# -- static checks ------------------------------------------------------------------------
def test_every_manifest_parses() -> None:
    for path in [*MANIFESTS.glob("*.yaml"), *EXAMPLES]:
        docs = load_all(path)
        assert docs, f"{path} holds no document"
        for doc in docs:
            assert doc.get("apiVersion") and doc.get("kind"), f"{path}: a document without apiVersion/kind"
    assert {p.name for p in EXAMPLES} >= {
        "node-setup.yaml",
        "kernel-audit.yaml",
        "rolling-cleanup.yaml",
        "nightly-image-cleanup.yaml",
    }


def test_deploy_target_can_replace_the_image() -> None:
    # kustomize's `images:` names the Deployment's image; `make deploy IMG=...` overrides it.
    assert (MANIFESTS / "deployment.yaml").read_text().count("image: daemonjob-controller\n") == 1
    images = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["images"]
    assert images == [{"name": "daemonjob-controller", "newTag": "0.1.0"}]


# -- (a) server-side dry-run ----------------------------------------------------------------
def test_controller_manifests_pass_server_dry_run(cluster: LocalCluster, rbac: None) -> None:
    for name in ("crd.yaml", "namespace.yaml", "rbac.yaml", "deployment.yaml", "service.yaml", "webhook.yaml"):
        out = kubectl(cluster, "apply", "--dry-run=server", "-f", str(MANIFESTS / name))
        assert "(server dry run)" in out.stdout, out.stdout


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_passes_server_dry_run(cluster: LocalCluster, crd: None, namespace: str, example: Path) -> None:
    out = kubectl(cluster, "apply", "--dry-run=server", "-n", namespace, "-o", "json", "-f", str(example))
    applied = json.loads(out.stdout)
    originals = load_all(example)
    applied_items = applied["items"] if applied.get("kind") == "List" else [applied]
    assert len(applied_items) == len(originals)
    for got, original in zip(applied_items, originals, strict=True):
        spec = got["spec"]
        # Defaults from the schema are filled in...
        assert spec["rerunPolicy"] in ("OnTemplateChange", "Never")
        assert spec["suspend"] is False
        assert isinstance(spec["historyLimit"], int)
        # ...and nothing of the Job template, nor any other field written, is pruned.
        assert spec["jobTemplate"] == original["spec"]["jobTemplate"]
        for key, value in original["spec"].items():
            assert written(value, spec[key]), key


def test_example_defaults(cluster: LocalCluster, crd: None, namespace: str) -> None:
    out = kubectl(
        cluster,
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-o",
        "json",
        "-f",
        str(EXAMPLES_DIR / "node-setup.yaml"),
    )
    spec = json.loads(out.stdout)["spec"]
    assert (spec["rerunPolicy"], spec["suspend"], spec["historyLimit"]) == ("OnTemplateChange", False, 1)
    out = kubectl(
        cluster,
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-o",
        "json",
        "-f",
        str(EXAMPLES_DIR / "rolling-cleanup.yaml"),
    )
    spec = json.loads(out.stdout)["spec"]
    assert (spec["maxParallel"], spec["maxFailedNodes"]) == ("25%", 1)
    out = kubectl(
        cluster,
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-o",
        "json",
        "-f",
        str(EXAMPLES_DIR / "nightly-image-cleanup.yaml"),
    )
    spec = json.loads(out.stdout)["spec"]
    assert (spec["schedule"], spec["timeZone"], spec["startingDeadlineSeconds"]) == ("0 3 * * *", "Europe/Berlin", 3600)
    assert (spec["concurrencyPolicy"], spec["rerunOnConfigChange"]) == ("Forbid", False)


def test_node_maintenance_defaults(kube: Kube, crd: None, namespace: str) -> None:
    created = kube.create(
        path_for(GROUP_VERSION, "daemonjobs", namespace),
        manifest("maintenance-defaults", nodeMaintenance={"cordon": True, "drain": {}}),
        dryRun="All",
    )
    assert created["spec"]["nodeMaintenance"] == {
        "cordon": True,
        "keepFailedCordoned": False,
        "drain": {"timeout": "10m", "deleteEmptyDirData": False, "force": False, "onTimeout": "Fail"},
    }
    assert (
        "drain"
        not in kube.create(
            path_for(GROUP_VERSION, "daemonjobs", namespace),
            manifest("cordon-only", nodeMaintenance={"cordon": True}),
            dryRun="All",
        )["spec"]["nodeMaintenance"]
    )


# -- (b) kustomize --------------------------------------------------------------------------
def test_kustomize_renders_the_controller_install(cluster: LocalCluster) -> None:
    out = kubectl(cluster, "kustomize", str(MANIFESTS))
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == sorted(
        [
            ("CustomResourceDefinition", CRD_NAME),
            ("CustomResourceDefinition", "daemonjobreports.daemonjob.io"),
            ("Namespace", CONTROLLER_NS),
            ("ServiceAccount", "daemonjob-controller"),
            ("ClusterRole", "daemonjob-controller"),
            ("ClusterRoleBinding", "daemonjob-controller"),
            ("Role", "daemonjob-leader-election"),
            ("RoleBinding", "daemonjob-leader-election"),
            ("Secret", "daemonjob-turn-seal"),
            ("Role", "daemonjob-turn-seal"),
            ("RoleBinding", "daemonjob-turn-seal"),
            ("Deployment", "daemonjob-controller"),
            ("Service", "daemonjob-controller-metrics"),
            ("ClusterRole", "daemonjob-webhook-configuration"),
            ("ClusterRoleBinding", "daemonjob-webhook-configuration"),
            ("ClusterRole", "daemonjob-webhook-access-review"),
            ("ClusterRoleBinding", "daemonjob-webhook-access-review"),
            ("ClusterRole", "daemonjob-webhook-dry-run"),
            ("ClusterRoleBinding", "daemonjob-webhook-dry-run"),
            ("Role", "daemonjob-webhook-certificates"),
            ("RoleBinding", "daemonjob-webhook-certificates"),
            ("Secret", "daemonjob-webhook-tls"),
            ("Service", "daemonjob-webhook"),
            ("ValidatingWebhookConfiguration", "daemonjob-validating-webhook"),
            ("ClusterRole", "daemonjob-metrics-auth"),
            ("ClusterRoleBinding", "daemonjob-metrics-auth"),
            ("ClusterRole", "daemonjob-metrics-reader"),
            ("NetworkPolicy", "daemonjob-controller"),
            ("PodDisruptionBudget", "daemonjob-controller"),
            ("ClusterRole", "daemonjob-view"),
            ("ClusterRole", "daemonjob-edit"),
        ]
    )
    assert "image: daemonjob-controller:0.1.0" in out.stdout
    assert ":latest" not in out.stdout
    # What `make deploy` applies is valid as a whole, too (this API server, 1.20, predates
    # policy/v1 PodDisruptionBudgets: that one is checked as policy/v1beta1).
    for doc in docs:
        if doc["kind"] == "PodDisruptionBudget":
            doc["apiVersion"] = "policy/v1beta1"
    kubectl(cluster, "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(docs))


# -- (c) RBAC -------------------------------------------------------------------------------
CAN: list[tuple[str, ...]] = [
    ("list", "daemonjobs.daemonjob.io", "--all-namespaces"),
    ("watch", "daemonjobs.daemonjob.io", "--all-namespaces"),
    ("get", "daemonjobs.daemonjob.io", "-n", "default"),
    ("patch", "daemonjobs.daemonjob.io", "--subresource=status", "-n", "default"),
    ("update", "daemonjobs.daemonjob.io", "--subresource=status", "-n", "default"),
    ("list", "jobs.batch", "--all-namespaces"),
    ("list", "pods", "--all-namespaces"),
    ("watch", "jobs.batch", "--all-namespaces"),
    ("create", "jobs.batch", "-n", "default"),
    ("delete", "jobs.batch", "-n", "default"),
    ("patch", "jobs.batch", "-n", "default"),
    ("list", "nodes"),
    ("watch", "nodes"),
    ("get", "nodes"),
    ("get", "configmaps", "-n", "default"),
    ("list", "configmaps", "--all-namespaces"),
    ("watch", "configmaps", "--all-namespaces"),
    ("create", "events", "-n", "default"),
    ("patch", "events", "-n", "default"),
    ("create", "events.events.k8s.io", "-n", "default"),
    # per-node results: the report objects, and the pods of finished Jobs read (never written)
    ("list", "daemonjobreports.daemonjob.io", "-n", "default"),
    ("create", "daemonjobreports.daemonjob.io", "-n", "default"),
    ("patch", "daemonjobreports.daemonjob.io", "-n", "default"),
    ("delete", "daemonjobreports.daemonjob.io", "-n", "default"),
    ("list", "pods", "-n", "default"),
    ("get", "pods", "-n", "default"),
    ("get", "leases.coordination.k8s.io/daemonjob-controller", "-n", CONTROLLER_NS),
    ("create", "leases.coordination.k8s.io", "-n", CONTROLLER_NS),
    ("update", "leases.coordination.k8s.io/daemonjob-controller", "-n", CONTROLLER_NS),
    ("get", "secrets/daemonjob-webhook-tls", "-n", CONTROLLER_NS),
    ("update", "secrets/daemonjob-webhook-tls", "-n", CONTROLLER_NS),
    ("get", "secrets/daemonjob-turn-seal", "-n", CONTROLLER_NS),
    ("update", "secrets/daemonjob-turn-seal", "-n", CONTROLLER_NS),
    ("get", "validatingwebhookconfigurations.admissionregistration.k8s.io/daemonjob-validating-webhook"),
    ("update", "validatingwebhookconfigurations.admissionregistration.k8s.io/daemonjob-validating-webhook"),
    # secure metrics: who a scraper's token is, and whether it may get /metrics
    ("create", "tokenreviews.authentication.k8s.io"),
    ("create", "subjectaccessreviews.authorization.k8s.io"),
    # the webhook's dry run of a node Job's pod (daemonjob-webhook-dry-run, dryRun=All only)
    ("create", "pods", "-n", "default"),
]

CANNOT: list[tuple[str, ...]] = [
    ("get", "secrets", "-n", CONTROLLER_NS),
    ("list", "secrets", "--all-namespaces"),
    ("update", "configmaps", "-n", "default"),
    ("patch", "configmaps", "-n", "default"),
    ("create", "configmaps", "-n", "default"),
    ("delete", "configmaps", "-n", "default"),
    ("delete", "pods", "-n", "default"),
    ("update", "pods", "-n", "default"),
    ("patch", "pods", "-n", "default"),
    ("watch", "pods", "--all-namespaces"),
    ("get", "pods", "--subresource=log", "-n", "default"),
    ("update", "daemonjobreports.daemonjob.io", "-n", "default"),
    ("update", "leases.coordination.k8s.io", "-n", "kube-system"),
    ("update", "leases.coordination.k8s.io/another-controller", "-n", CONTROLLER_NS),
    ("get", "leases.coordination.k8s.io/another-controller", "-n", CONTROLLER_NS),
    ("update", "leases.coordination.k8s.io", "-n", "default"),
    ("create", "leases.coordination.k8s.io", "-n", "kube-node-lease"),
    ("delete", "nodes"),
    ("patch", "nodes"),
    ("update", "daemonjobs.daemonjob.io", "-n", "default"),
    ("patch", "daemonjobs.daemonjob.io", "-n", "default"),
    ("create", "daemonjobs.daemonjob.io", "-n", "default"),
    ("delete", "daemonjobs.daemonjob.io", "-n", "default"),
    ("update", "jobs.batch", "-n", "default"),
    ("create", "deployments.apps", "-n", CONTROLLER_NS),
    ("create", "rolebindings.rbac.authorization.k8s.io", "-n", CONTROLLER_NS),
    ("get", "secrets/other", "-n", CONTROLLER_NS),
    ("create", "secrets", "-n", CONTROLLER_NS),
    ("delete", "secrets/daemonjob-webhook-tls", "-n", CONTROLLER_NS),
    ("delete", "secrets/daemonjob-turn-seal", "-n", CONTROLLER_NS),
    ("update", "validatingwebhookconfigurations.admissionregistration.k8s.io/other"),
    ("create", "validatingwebhookconfigurations.admissionregistration.k8s.io"),
    ("list", "validatingwebhookconfigurations.admissionregistration.k8s.io"),
    ("get", "/metrics"),  # reading metrics is the scraper's role (daemonjob-metrics-reader), not the controller's
]


def can_i(cluster: LocalCluster, check: tuple[str, ...]) -> bool:
    out = kubectl(cluster, "auth", "can-i", *check, f"--as={SERVICE_ACCOUNT}", check=False)
    answer = out.stdout.strip()
    if answer not in ("yes", "no"):
        raise AssertionError(f"kubectl auth can-i {' '.join(check)}: {out.stdout}{out.stderr}")
    return answer == "yes"


def answers(cluster: LocalCluster, checks: Sequence[tuple[str, ...]]) -> list[bool]:
    """can_i of each check, several kubectl processes at once (one by one, a list takes half a minute)."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda check: can_i(cluster, check), checks))


def test_service_account_has_what_the_controller_needs(rbac_only_cluster: LocalCluster) -> None:
    denied = [" ".join(c) for c, yes in zip(CAN, answers(rbac_only_cluster, CAN), strict=True) if not yes]
    assert not denied, f"{SERVICE_ACCOUNT} lacks: {denied}"


def test_service_account_has_nothing_more(rbac_only_cluster: LocalCluster) -> None:
    allowed = [" ".join(c) for c, yes in zip(CANNOT, answers(rbac_only_cluster, CANNOT), strict=True) if yes]
    assert not allowed, f"{SERVICE_ACCOUNT} may: {allowed}"


def test_the_webhooks_access_reviews_come_with_its_own_rbac_not_with_secure_metrics() -> None:
    """The webhook asks whether who applies node maintenance may cordon and drain (SubjectAccessReview)
    whatever --metrics-secure says: rbac.yaml grants it to the ServiceAccount itself."""
    docs = load_all(MANIFESTS / "rbac.yaml")
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    bound = {
        d["roleRef"]["name"]
        for d in docs
        if d["kind"] == "ClusterRoleBinding"
        and {"kind": "ServiceAccount", "name": "daemonjob-controller", "namespace": CONTROLLER_NS} in d["subjects"]
    }
    granting = [
        name
        for name in bound
        for rule in roles[name]["rules"]
        if "authorization.k8s.io" in rule["apiGroups"]
        and "subjectaccessreviews" in rule["resources"]
        and "create" in rule["verbs"]
    ]
    assert granting == ["daemonjob-webhook-access-review"]


MAINTENANCE_CAN: list[tuple[str, ...]] = [
    ("get", "nodes"),
    ("patch", "nodes"),
    ("list", "pods", "--all-namespaces"),
    ("get", "pods", "-n", "default"),
    ("create", "pods", "--subresource=eviction", "-n", "default"),
    ("patch", "daemonjobs.daemonjob.io", "-n", "default"),
]
MAINTENANCE_CANNOT: list[tuple[str, ...]] = [
    ("update", "nodes"),
    ("delete", "nodes"),
    ("delete", "pods", "-n", "default"),
    ("update", "pods", "-n", "default"),  # (create: the webhook's dry run has it, daemonjob-webhook-dry-run)
    ("watch", "pods", "--all-namespaces"),
    ("update", "daemonjobs.daemonjob.io", "-n", "default"),
    ("delete", "daemonjobs.daemonjob.io", "-n", "default"),
    ("get", "secrets", "-n", CONTROLLER_NS),
]


def test_node_maintenance_component_grants_what_the_contract_names_and_no_more(
    rbac_only_cluster: LocalCluster,
) -> None:
    """manifests/node-maintenance's RBAC, applied for real and removed again (the tests above
    check the controller without it). On the control plane of the manifests' RBAC alone: the
    session's cluster holds this component already once an e2e test of node maintenance ran
    in the same process, and the files may run in any order."""
    cluster = rbac_only_cluster
    assert not can_i(cluster, ("patch", "nodes"))  # the base install writes no Node
    rbac_file = str(MANIFESTS / "node-maintenance" / "rbac.yaml")
    kubectl(cluster, "apply", "-f", rbac_file)
    try:
        denied = [
            " ".join(c) for c, yes in zip(MAINTENANCE_CAN, answers(cluster, MAINTENANCE_CAN), strict=True) if not yes
        ]
        allowed = [
            " ".join(c) for c, yes in zip(MAINTENANCE_CANNOT, answers(cluster, MAINTENANCE_CANNOT), strict=True) if yes
        ]
        assert (denied, allowed) == ([], []), f"lacks: {denied}; may: {allowed}"
    finally:
        kubectl(cluster, "delete", "--ignore-not-found", "--wait=true", "-f", rbac_file)


def test_node_maintenance_component_adds_the_flag_and_the_roles(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(MANIFESTS, overlay)
    (overlay / "kustomization.yaml").write_text(f"resources: [{base}]\ncomponents: [{base}/node-maintenance]\n")
    modern = shutil.which("kubectl")
    assert modern is not None, "a kubectl >= 1.21 on PATH renders kustomize components"
    out = subprocess.run([modern, "kustomize", str(overlay)], capture_output=True, text=True, timeout=60, check=True)
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(out.stdout) if d}
    assert (
        by_kind[("ClusterRoleBinding", "daemonjob-node-maintenance")]["roleRef"]["name"] == "daemonjob-node-maintenance"
    )
    assert ("ClusterRole", "daemonjob-node-maintenance") in by_kind
    args = by_kind[("Deployment", "daemonjob-controller")]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-1] == "--node-maintenance-namespaces=ops"  # the sample value, to be edited


def test_explain_prints_every_field(cluster: LocalCluster, crd: None) -> None:
    out = kubectl(cluster, "explain", "dj", "--recursive").stdout
    for field in (
        "jobTemplate",
        "nodeSelector",
        "matchExpressions",
        "rerunPolicy",
        "maxParallel",
        "maxFailedNodes",
        "suspend",
        "historyLimit",
        "failedNodeNames",
        "conditions",
        "schedule",
        "timeZone",
        "startingDeadlineSeconds",
        "concurrencyPolicy",
        "rerunOnConfigChange",
        "currentRun",
        "lastScheduleTime",
        "nextScheduleTime",
        "lastSuccessfulTime",
        "nodeMaintenance",
        "ignorePodSelector",
        "keepFailedCordoned",
        "keptCordonedNodes",
    ):
        assert field in out
    for field in (
        "spec.maxParallel",
        "spec.maxFailedNodes",
        "spec.jobTemplate",
        "spec.nodeSelector",
        "spec.schedule",
        "spec.timeZone",
        "spec.concurrencyPolicy",
        "spec.rerunOnConfigChange",
        "spec.nodeMaintenance",
        "spec.nodeMaintenance.drain.onTimeout",
        "status.nodeMaintenance",
    ):
        text = kubectl(cluster, "explain", f"dj.{field}").stdout
        assert "DESCRIPTION" in text and "MISSING" not in text and "%!" not in text, text


# -- (d) kubectl get dj -----------------------------------------------------------------------
def test_short_name_and_printer_columns(cluster: LocalCluster, kube: Kube, crd: None, namespace: str) -> None:
    name = f"cols-{uuid.uuid4().hex[:6]}"
    # Selects no node, so a controller running in this cluster has nothing to start.
    kube.create(
        path_for(GROUP_VERSION, "daemonjobs", namespace),
        manifest(name, nodeSelector={"matchLabels": {"daemonjob.io/test-no-such-node": "true"}}, schedule="0 3 * * *"),
    )
    status = {
        "desiredNodes": 7,
        "activeNodes": 2,
        "succeededNodes": 4,
        "failedNodes": 1,
        "pendingNodes": 0,
        "lastScheduleTime": "2024-01-01T03:00:00Z",
        "conditions": [
            {
                "type": "Complete",
                "status": "False",
                "reason": "InProgress",
                "message": "4/7",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ],
    }
    kube.patch(path_for(GROUP_VERSION, "daemonjobs", namespace, name, "status"), {"status": status})

    plain = kubectl(cluster, "get", "dj", "-n", namespace).stdout.splitlines()
    assert re.split(r"\s{2,}", plain[0].strip()) == [
        "NAME",
        "DESIRED",
        "ACTIVE",
        "SUCCEEDED",
        "FAILED",
        "COMPLETE",
        "AGE",
    ]
    lines = kubectl(cluster, "get", "dj", "-n", namespace, "-o", "wide").stdout.splitlines()
    header = re.split(r"\s{2,}", lines[0].strip())
    assert header == [
        "NAME",
        "DESIRED",
        "ACTIVE",
        "SUCCEEDED",
        "FAILED",
        "COMPLETE",
        "SCHEDULE",
        "LAST SCHEDULE",
        "RESULTS",
        "AGE",
    ]
    rows = {row["NAME"]: row for row in (table_row(lines[0], line) for line in lines[1:])}
    # The row shows whatever the status is when read: normally the values patched above,
    # or a controller's own if one reconciled the object in between.
    current = kube.get(path_for(GROUP_VERSION, "daemonjobs", namespace, name)).get("status") or {}
    complete = [c["status"] for c in current.get("conditions") or [] if c["type"] == "Complete"]
    expected = {
        column: str(current.get(field, ""))
        for column, field in (
            ("DESIRED", "desiredNodes"),
            ("ACTIVE", "activeNodes"),
            ("SUCCEEDED", "succeededNodes"),
            ("FAILED", "failedNodes"),
        )
    }
    expected["COMPLETE"] = complete[0] if complete else ""
    expected["SCHEDULE"] = "0 3 * * *"
    assert {k: rows[name][k] for k in expected} == expected
    assert rows[name]["AGE"]
    # An age, as the CronJob shows its last schedule.
    assert re.fullmatch(r"[0-9]+[smhdy].*", rows[name]["LAST SCHEDULE"]), rows[name]

    # The full name and the kind name work as well as the short name.
    for resource in ("daemonjobs", "daemonjob", "daemonjobs.daemonjob.io"):
        assert name in kubectl(cluster, "get", resource, "-n", namespace, "-o", "name").stdout


def test_status_is_a_subresource(kube: Kube, crd: None, namespace: str) -> None:
    name = f"sub-{uuid.uuid4().hex[:6]}"
    body = manifest(name)
    body["status"] = {"desiredNodes": 99}
    created = kube.create(path_for(GROUP_VERSION, "daemonjobs", namespace), body)
    assert "desiredNodes" not in (created.get("status") or {})  # status is ignored on create
    schedule_status = {
        "currentRun": "20261123t030000z",
        "lastScheduleTime": "2026-11-23T03:00:00Z",
        "nextScheduleTime": "2026-11-24T03:00:00Z",
        "lastSuccessfulTime": "2026-11-23T03:04:00Z",
        "lastSkippedTime": "2026-11-22T03:00:00Z",
        "lastSkipReason": "ConcurrencyForbid",
        "lastRunNowTrigger": "1",
        "observedSchedule": "0 3 * * * (UTC)",
    }
    patched = kube.patch(
        path_for(GROUP_VERSION, "daemonjobs", namespace, name, "status"),
        {"spec": {"suspend": True}, "status": {"desiredNodes": 3, "failedNodeNames": ["a"], **schedule_status}},
    )
    assert patched["spec"]["suspend"] is False  # spec is ignored through /status
    assert patched["status"]["desiredNodes"] == 3
    assert {k: patched["status"].get(k) for k in schedule_status} == schedule_status  # none pruned
    assert patched["metadata"]["generation"] == created["metadata"]["generation"]


# -- (e) schema validation ----------------------------------------------------------------------
def _without_job_template(name: str) -> dict[str, Any]:
    body = manifest(name)
    del body["spec"]["jobTemplate"]
    return body


def _without_pod_template(name: str) -> dict[str, Any]:
    body = manifest(name)
    body["spec"]["jobTemplate"]["spec"] = {"backoffLimit": 1}
    return body


REJECTED: list[tuple[str, Any, list[str]]] = [
    (
        "rerun-policy",
        lambda n: manifest(n, rerunPolicy="Sometimes"),
        ["spec.rerunPolicy", "Unsupported value", '"Sometimes"', '"OnTemplateChange"', '"Never"'],
    ),
    ("max-parallel-text", lambda n: manifest(n, maxParallel="abc"), ["spec.maxParallel", '"abc"', "should match"]),
    ("max-parallel-percent", lambda n: manifest(n, maxParallel="150%"), ["spec.maxParallel", '"150%"']),
    ("max-parallel-zero", lambda n: manifest(n, maxParallel=0), ["spec.maxParallel", "greater than or equal to 1"]),
    (
        "max-failed-negative",
        lambda n: manifest(n, maxFailedNodes=-1),
        ["spec.maxFailedNodes", "greater than or equal to 0"],
    ),
    ("max-failed-type", lambda n: manifest(n, maxFailedNodes=1.5), ["spec.maxFailedNodes"]),
    (
        "history-limit",
        lambda n: manifest(n, historyLimit=-1),
        ["spec.historyLimit", "-1", "greater than or equal to 0"],
    ),
    (
        "history-limit-maximum",
        lambda n: manifest(n, historyLimit=11),
        ["spec.historyLimit", "11", "less than or equal to 10"],
    ),
    ("suspend-type", lambda n: manifest(n, suspend="yes"), ["spec.suspend", "boolean"]),
    ("no-job-template", _without_job_template, ["spec.jobTemplate", "Required value"]),
    (
        "concurrency-policy",
        lambda n: manifest(n, schedule="0 3 * * *", concurrencyPolicy="Allow"),
        ["spec.concurrencyPolicy", "Unsupported value", '"Allow"', '"Forbid"', '"Replace"'],
    ),
    (
        "deadline-negative",
        lambda n: manifest(n, schedule="0 3 * * *", startingDeadlineSeconds=-1),
        ["spec.startingDeadlineSeconds", "greater than or equal to 0"],
    ),
    ("schedule-type", lambda n: manifest(n, schedule=3), ["spec.schedule", "string"]),
    (
        "rerun-on-config-type",
        lambda n: manifest(n, rerunOnConfigChange="yes"),
        ["spec.rerunOnConfigChange", "boolean"],
    ),
    ("no-pod-template", _without_pod_template, ["spec.jobTemplate.spec.template", "Required value"]),
    (
        "selector-operator",
        lambda n: manifest(n, nodeSelector={"matchExpressions": [{"key": "a", "operator": "Is"}]}),
        ["spec.nodeSelector.matchExpressions", "operator", "Unsupported value", '"Is"'],
    ),
    (
        "selector-no-key",
        lambda n: manifest(n, nodeSelector={"matchExpressions": [{"operator": "Exists"}]}),
        ["spec.nodeSelector.matchExpressions", "key", "Required value"],
    ),
    (
        "drain-on-timeout",
        lambda n: manifest(n, nodeMaintenance={"cordon": True, "drain": {"onTimeout": "Retry"}}),
        ["spec.nodeMaintenance.drain.onTimeout", "Unsupported value", '"Retry"', '"Fail"', '"Skip"'],
    ),
    (
        "drain-grace-negative",
        lambda n: manifest(n, nodeMaintenance={"cordon": True, "drain": {"gracePeriodSeconds": -1}}),
        ["spec.nodeMaintenance.drain.gracePeriodSeconds", "greater than or equal to 1"],
    ),
    (  # 0 would remove evicted pods from the API while their containers still run
        "drain-grace-zero",
        lambda n: manifest(n, nodeMaintenance={"cordon": True, "drain": {"gracePeriodSeconds": 0}}),
        ["spec.nodeMaintenance.drain.gracePeriodSeconds", "greater than or equal to 1"],
    ),
    (
        "drain-timeout",
        lambda n: manifest(n, nodeMaintenance={"cordon": True, "drain": {"timeout": "ten minutes"}}),
        ["spec.nodeMaintenance.drain.timeout", "should match"],
    ),
    (
        "cordon-type",
        lambda n: manifest(n, nodeMaintenance={"cordon": "yes"}),
        ["spec.nodeMaintenance.cordon", "boolean"],
    ),
]


@pytest.mark.parametrize(("case", "make", "phrases"), REJECTED, ids=[r[0] for r in REJECTED])
def test_schema_rejects_bad_input(
    kube: Kube, crd: None, namespace: str, case: str, make: Any, phrases: list[str]
) -> None:
    with pytest.raises(ApiError) as info:
        kube.create(path_for(GROUP_VERSION, "daemonjobs", namespace), make(f"bad-{case}"))
    err = info.value
    assert (err.status, err.reason) == (422, "Invalid"), str(err)
    for phrase in phrases:
        assert phrase in err.message, f"{phrase!r} not in: {err.message}"


ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("percentages", {"maxParallel": "25%", "maxFailedNodes": "0%"}),
    ("bounds", {"maxParallel": "100%", "maxFailedNodes": 0, "historyLimit": 0}),
    ("history-limit-maximum", {"historyLimit": 10}),
    ("integers", {"maxParallel": 1, "maxFailedNodes": 10, "rerunPolicy": "Never", "suspend": True}),
    (
        "selector",
        {
            "nodeSelector": {
                "matchLabels": {"kubernetes.io/os": "linux"},
                "matchExpressions": [
                    {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"},
                    {"key": "zone", "operator": "In", "values": ["a", "b"]},
                ],
            }
        },
    ),
    (
        "schedule",
        {
            "schedule": "0 3 * * *",
            "timeZone": "Europe/Berlin",
            "startingDeadlineSeconds": 0,
            "concurrencyPolicy": "Replace",
            "rerunOnConfigChange": True,
        },
    ),
    ("schedule-macro", {"schedule": "@daily", "concurrencyPolicy": "Forbid"}),
    (
        "node-maintenance",
        {
            "nodeMaintenance": {
                "cordon": True,
                "keepFailedCordoned": True,
                "drain": {
                    "timeout": "1h30m",
                    "gracePeriodSeconds": 30,
                    "deleteEmptyDirData": True,
                    "force": True,
                    "onTimeout": "Skip",
                    "ignorePodSelector": {
                        "matchLabels": {"app": "keep"},
                        "matchExpressions": [{"key": "tier", "operator": "Exists"}],
                    },
                },
            }
        },
    ),
]


@pytest.mark.parametrize(("case", "spec"), ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_schema_accepts_good_input(kube: Kube, crd: None, namespace: str, case: str, spec: dict[str, Any]) -> None:
    created = kube.create(path_for(GROUP_VERSION, "daemonjobs", namespace), manifest(f"ok-{case}", **spec))
    for key, value in spec.items():
        assert created["spec"][key] == value


def test_unknown_spec_fields_are_pruned_but_job_spec_is_kept(kube: Kube, crd: None, namespace: str) -> None:
    body = manifest("pruning", bogus=True)
    job_spec = body["spec"]["jobTemplate"]["spec"]
    job_spec["backoffLimit"] = 3
    job_spec["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    body["spec"]["jobTemplate"]["metadata"] = {"labels": {"a": "b"}, "annotations": {"c": "d"}}
    created = kube.create(path_for(GROUP_VERSION, "daemonjobs", namespace), body)
    assert "bogus" not in created["spec"]
    assert created["spec"]["jobTemplate"] == body["spec"]["jobTemplate"]


def test_cert_manager_component_swaps_self_managed_certificates(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(MANIFESTS, overlay)
    (overlay / "kustomization.yaml").write_text(f"resources: [{base}]\ncomponents: [{base}/cert-manager]\n")
    # Components need kustomize >= 3.7: the machine's kubectl, not the cluster's 1.20 one.
    modern = shutil.which("kubectl")
    assert modern is not None, "a kubectl >= 1.21 on PATH renders kustomize components"
    out = subprocess.run([modern, "kustomize", str(overlay)], capture_output=True, text=True, timeout=60, check=True)
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert ("Secret", "daemonjob-webhook-tls") not in by_kind  # cert-manager writes it
    assert ("Role", "daemonjob-webhook-certificates") not in by_kind
    assert ("ClusterRole", "daemonjob-webhook-configuration") not in by_kind
    certificate = by_kind[("Certificate", "daemonjob-webhook")]
    assert certificate["spec"]["secretName"] == "daemonjob-webhook-tls"
    assert "daemonjob-webhook.daemonjob-system.svc" in certificate["spec"]["dnsNames"]
    config = by_kind[("ValidatingWebhookConfiguration", "daemonjob-validating-webhook")]
    assert config["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "daemonjob-system/daemonjob-webhook"}
    pod = by_kind[("Deployment", "daemonjob-controller")]["spec"]["template"]["spec"]
    assert "--webhook-cert-secret=" in pod["containers"][0]["args"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "webhook-certs")
    assert mount["mountPath"] == "/tmp/k8s-webhook-server/serving-certs"
    assert (
        next(v for v in pod["volumes"] if v["name"] == "webhook-certs")["secret"]["secretName"]
        == "daemonjob-webhook-tls"
    )
