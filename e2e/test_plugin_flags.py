"""kubectl's global flags of `kubectl daemonjob`, through the real API server: `--as` and
`--as-group` reach the admission webhook as the requester, whose own power to cordon and drain
nodes decides whether a DaemonJob with node maintenance is admitted."""

from __future__ import annotations

import base64
import copy
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from harness import EXTERNAL
from prometheus_client import CollectorRegistry

from daemonjob import cli, defaults
from daemonjob.admission import webhook as admission
from daemonjob.kubectl.cluster.client import EXIT_ERROR, EXIT_OK
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.machinery.server import certs
from daemonjob.testing.waiting import wait_for

pytestmark = pytest.mark.skipif(
    EXTERNAL, reason="the webhook listens on loopback, which only a local API server reaches"
)

ROOT = Path(__file__).resolve().parents[1]
RBAC = "rbac.authorization.k8s.io/v1"
WEBHOOKS = "admissionregistration.k8s.io/v1"
DJ_API = "daemonjob.io/v1alpha1"
SCOPE = "daemonjob.io/plugin-flags-test"


@pytest.fixture
def webhook(kube: Kube, crd: None, namespace: str, tmp_path: Path) -> Iterator[None]:
    """The controller's webhook (--node-maintenance-namespaces naming this test's namespace), in
    this process on loopback, registered for this test's namespace alone."""
    ca = certs.new_ca("plugin-flags-test-ca", 3600)
    serving = certs.issue(ca, ["127.0.0.1"], 3600)
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    args = cli.parser().parse_args(
        ["--webhook-cert-secret=", "--webhook-cert-dir", str(tmp_path), f"--node-maintenance-namespaces={namespace}"]
    )
    server = admission.start(
        args, ("127.0.0.1", 0), kube, CollectorRegistry(), maintenance_namespaces=args.node_maintenance_namespaces
    )
    docs = yaml.safe_load_all((ROOT / "manifests" / "webhook.yaml").read_text())
    config = copy.deepcopy(next(d for d in docs if d and d["kind"] == "ValidatingWebhookConfiguration"))
    config["metadata"] = {"name": f"plugin-flags-test-{namespace}"}
    hook = config["webhooks"][0]
    hook["clientConfig"] = {
        "url": f"https://127.0.0.1:{server.server.port}{defaults.WEBHOOK_PATH}",
        "caBundle": base64.b64encode(ca.cert_pem).decode(),
    }
    hook["namespaceSelector"] = {"matchLabels": {SCOPE: namespace}}
    configs = path_for(WEBHOOKS, "validatingwebhookconfigurations")
    try:
        kube.patch(path_for("v1", "namespaces", name=namespace), {"metadata": {"labels": {SCOPE: namespace}}})
        kube.create(configs, config)
        probe = {
            "apiVersion": DJ_API,
            "kind": "DaemonJob",
            "metadata": {"name": "probe"},
            "spec": {"schedule": "bad", "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}},
        }

        def served() -> bool:
            try:
                kube.create(path_for(DJ_API, "daemonjobs", namespace), probe, dryRun="All")
            except ApiError as exc:
                return "admission webhook" in exc.message and "denied the request" in exc.message
            return False

        wait_for(served, 60, "the API server to call the webhook")
        yield
    finally:
        server.stop()
        try:
            kube.delete(f"{configs}/{config['metadata']['name']}")
        except ApiError as exc:
            if not exc.not_found:
                raise


def plugin(kubeconfig: Path, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl daemonjob ARGS` with the admin's kubeconfig: who acts is what --as says."""
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "kubectl-daemonjob"),
            "-n",
            namespace,
            "--kubeconfig",
            str(kubeconfig),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def _subject(kind: str, name: str) -> dict[str, str]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def test_as_and_as_group_reach_the_webhooks_node_power_check(
    kube: Kube, admin_kubeconfig: Path, namespace: str, webhook: None
) -> None:
    """Jane may edit DaemonJobs but not cordon nor drain: her `create --drain` is refused by the
    webhook, naming her. Olga, who may patch nodes and evict pods, is admitted; and so is anyone
    acting as a member of the group holding those powers (--as-group)."""
    suffix = uuid.uuid4().hex[:6]
    jane, olga, mallory, operators = f"jane-{suffix}", f"olga-{suffix}", f"mallory-{suffix}", f"node-ops-{suffix}"
    powers = f"plugin-flags-node-powers-{suffix}"
    editors = [_subject("User", u) for u in (jane, olga, mallory)]
    edit = {"apiGroups": ["daemonjob.io"], "resources": ["daemonjobs"], "verbs": ["*"]}
    kube.create(path_for(RBAC, "roles", namespace), {"metadata": {"name": "dj-editors"}, "rules": [edit]})
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "dj-editors"}
    binding = {"metadata": {"name": "dj-editors"}, "roleRef": role, "subjects": editors}
    kube.create(path_for(RBAC, "rolebindings", namespace), binding)
    cleanup = [path_for(RBAC, "clusterrolebindings", name=powers), path_for(RBAC, "clusterroles", name=powers)]
    try:
        kube.create(
            path_for(RBAC, "clusterroles"),
            {
                "metadata": {"name": powers},
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]},
                    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
                ],
            },
        )
        kube.create(
            path_for(RBAC, "clusterrolebindings"),
            {
                "metadata": {"name": powers},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": powers},
                "subjects": [_subject("User", olga), _subject("Group", operators)],
            },
        )

        def create(name: str, *who: str) -> subprocess.CompletedProcess[str]:
            return plugin(
                admin_kubeconfig, namespace, "create", name, "--image", "busybox:1.36", "-l", "plugin-flags=none",
                "--drain", *who, "--", "true",
            )  # fmt: skip

        def in_force() -> bool:
            review = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {"user": olga, "resourceAttributes": {"verb": "patch", "resource": "nodes"}},
            }
            allowed = kube.create(path_for("authorization.k8s.io/v1", "subjectaccessreviews"), review)
            return bool(allowed["status"].get("allowed"))

        wait_for(in_force, 30, "the roles to be in force")
        refused = create("drain-jane", "--as", jane)
        assert refused.returncode == EXIT_ERROR, refused.stderr
        assert (
            f'user "{jane}" may not patch nodes nor create pods/eviction in all namespaces: '
            "asking for node maintenance takes the permissions to cordon and drain nodes oneself"
        ) in refused.stderr, refused.stderr
        with pytest.raises(ApiError) as info:
            kube.get(path_for(DJ_API, "daemonjobs", namespace, "drain-jane"))
        assert info.value.not_found
        admitted = create("drain-olga", "--as", olga)
        assert admitted.returncode == EXIT_OK, admitted.stderr
        assert admitted.stdout == "daemonjob.daemonjob.io/drain-olga created\n"
        created = kube.get(path_for(DJ_API, "daemonjobs", namespace, "drain-olga"))
        assert created["spec"]["nodeMaintenance"]["cordon"] is True and "drain" in created["spec"]["nodeMaintenance"]
        alone = create("drain-mallory", "--as", mallory)
        assert alone.returncode == EXIT_ERROR and f'user "{mallory}" may not patch nodes' in alone.stderr
        grouped = create("drain-mallory", "--as", mallory, "--as-group", operators)
        assert grouped.returncode == EXIT_OK, grouped.stderr
        # Without --as, the admin (system:masters) is admitted as ever.
        assert create("drain-admin").returncode == EXIT_OK
    finally:
        for path in cleanup:
            try:
                kube.delete(path)
            except ApiError as exc:
                if not exc.not_found:
                    raise
