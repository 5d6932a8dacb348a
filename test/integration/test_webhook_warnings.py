"""Settings that do nothing, warned of at `kubectl apply` through the real API server: the
webhook's admission warnings reach kubectl, which prints them, and the object is created.

One controller replica (as its own user, with the manifests' RBAC) serves the webhook behind a
Service stand-in on loopback; the manifests' configuration is applied with the test bed's
changes (reached by URL, limited by a namespaceSelector to this module's namespace). It shares
the webhook's Secret and configuration names with test_webhook.py and test_webhook_dryrun.py
(the controller's RBAC names them), so these modules run one after the other, never at once.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob import defaults
from daemonjob.kubectl import cli
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.cluster import CONTROLLER_NAMESPACE, LocalCluster
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.process import ControllerProcess
from daemonjob.testing.serviceproxy import ServiceProxy
from daemonjob.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DJ_API = "daemonjob.io/v1alpha1"
WEBHOOKS = "admissionregistration.k8s.io/v1"
CONFIG = defaults.WEBHOOK_CONFIGURATION
SCOPE_LABEL = "daemonjob.io/warnings-test"
HOOK = "validate.daemonjob.io"
PAUSE = "Warning: spec.rollout.pauseBetweenNodes has no effect without spec.maxParallel"
CANARY = "Warning: spec.rollout.canary has no effect with spec.rerunPolicy: Never"
REBOOT_TIMEOUT = (
    "Warning: spec.nodeMaintenance.rebootTimeout has no effect without spec.nodeMaintenance.reboot: Expected"
)


def dj(name: str, **spec: Any) -> dict[str, Any]:
    """Selecting no node: what matters here is admission alone."""
    return daemonjob(
        name,
        manifest=True,
        template=job_template(backoff_limit=None, container={"image": "busybox:1.36"}),
        **{"nodeSelector": {"matchLabels": {SCOPE_LABEL: "none"}}, **spec},
    )


@dataclass
class Bed:
    cluster: LocalCluster
    kube: Kube
    ns: str

    def apply(self, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        assert self.cluster.bin_dir is not None
        return subprocess.run(
            [str(self.cluster.bin_dir / "kubectl"), f"--kubeconfig={self.cluster.kubeconfig}", "-n", self.ns]
            + ["apply", "-f", "-"],
            input=json.dumps(body),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def get(self, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self.kube.get(path_for(DJ_API, "daemonjobs", self.ns, name))
        return obj


def _manifest(name: str, kind: str) -> dict[str, Any]:
    docs = yaml.safe_load_all((ROOT / "manifests" / "webhook.yaml").read_text())
    return next(d for d in docs if d and d["kind"] == kind and d["metadata"]["name"] == name)


def _put_or_create(kube: Kube, collection: str, body: dict[str, Any]) -> None:
    try:
        kube.delete(f"{collection}/{body['metadata']['name']}")
    except ApiError as exc:
        if not exc.not_found:
            raise
    kube.create(collection, body)


def _serves(kube: Kube, ns: str) -> bool:
    try:
        kube.create(path_for(DJ_API, "daemonjobs", ns), dj("probe", schedule="bad"), dryRun="All")
    except ApiError as exc:
        return f'admission webhook "{HOOK}" denied the request' in exc.message
    return False


@pytest.fixture(scope="module")
def bed(
    cluster: LocalCluster, kube: Kube, installed_crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Bed]:
    tmp = tmp_path_factory.mktemp("warnings")
    ns = f"warn-{uuid.uuid4().hex[:6]}"
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": ns, "labels": {SCOPE_LABEL: "true"}}})
    _put_or_create(
        kube, path_for("v1", "secrets", CONTROLLER_NAMESPACE), _manifest(defaults.WEBHOOK_CERT_SECRET, "Secret")
    )
    replicas: list[ControllerProcess] = []
    proxy = ServiceProxy(lambda: [r.webhook_port for r in replicas if r.running()])
    config = _manifest(CONFIG, "ValidatingWebhookConfiguration")
    hook = config["webhooks"][0]
    hook["clientConfig"] = {"url": f"https://127.0.0.1:{proxy.port}{defaults.WEBHOOK_PATH}"}
    hook["namespaceSelector"] = {"matchLabels": {SCOPE_LABEL: "true"}}
    config_path = path_for(WEBHOOKS, "validatingwebhookconfigurations")
    _put_or_create(kube, config_path, config)
    replicas.append(
        ControllerProcess(
            cluster.kubeconfig_for("daemonjob-a"),
            tmp / "controller.log",
            f"--leader-election-namespace={CONTROLLER_NAMESPACE}",
            "--webhook-cert-dir",
            str(tmp / "certs"),
            f"--webhook-service-namespace={CONTROLLER_NAMESPACE}",
            "--webhook-cert-extra-names=127.0.0.1",
            f"--namespace={ns}",
            webhook=True,
        )
    )
    try:
        with proxy:
            replicas[0].start()
            replicas[0].wait_ready(90)
            wait_for(lambda: _serves(kube, ns), 60, "the API server to call the webhook")
            yield Bed(cluster, kube, ns)
    finally:
        for r in replicas:
            r.stop()
        for path in (f"{config_path}/{CONFIG}", path_for("v1", "namespaces", name=ns)):
            try:
                kube.delete(path)
            except ApiError as exc:
                if not exc.not_found:
                    raise


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Warning: ")]


def test_kubectl_apply_prints_the_warning_and_the_object_is_created(bed: Bed) -> None:
    body = dj("pause", rollout={"pauseBetweenNodes": "5m"})
    out = bed.apply(body)
    assert out.returncode == 0, out.stderr
    assert [w[: len(PAUSE)] for w in _warnings(out.stderr)] == [PAUSE], out.stderr
    assert "daemonjob.daemonjob.io/pause created" in out.stdout
    assert bed.get("pause")["spec"]["rollout"] == {"pauseBetweenNodes": "5m"}  # admitted as written


def test_every_idle_setting_is_warned_of_on_create_and_none_once_fixed_on_update(bed: Bed) -> None:
    body = dj(
        "idle",
        rerunPolicy="Never",
        rollout={"canary": 1},
        nodeMaintenance={"rebootTimeout": "20m"},
    )
    out = bed.apply(body)
    assert out.returncode == 0, out.stderr
    assert [w.split(" (")[0] for w in _warnings(out.stderr)] == [CANARY, REBOOT_TIMEOUT], out.stderr
    assert bed.get("idle")["spec"]["nodeMaintenance"]["rebootTimeout"] == "20m"  # (cordon: false is the CRD's default)

    fixed = dj("idle", rollout={"canary": 1})  # OnTemplateChange; no rebootTimeout
    out = bed.apply(fixed)
    assert out.returncode == 0, out.stderr
    assert _warnings(out.stderr) == [], out.stderr
    assert "rebootTimeout" not in (bed.get("idle")["spec"].get("nodeMaintenance") or {})


def test_an_update_is_warned_too(bed: Bed) -> None:
    out = bed.apply(dj("later", maxParallel=1, rollout={"pauseBetweenNodes": "1m"}))
    assert out.returncode == 0 and _warnings(out.stderr) == [], out.stderr
    out = bed.apply(dj("later", rollout={"pauseBetweenNodes": "1m"}))  # maxParallel removed
    assert out.returncode == 0, out.stderr
    assert [w[: len(PAUSE)] for w in _warnings(out.stderr)] == [PAUSE], out.stderr
    assert "maxParallel" not in bed.get("later")["spec"]


def test_plan_prints_the_same_warnings_on_stderr(bed: Bed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = dj("planned", rollout={"pauseBetweenNodes": "5m"})
    path = tmp_path / "planned.yaml"
    path.write_text(yaml.safe_dump(body))
    code = cli.main(["plan", "-f", str(path), "-n", bed.ns, "--kubeconfig", str(bed.cluster.kubeconfig)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [w[: len(PAUSE)] for w in _warnings(err)] == [PAUSE], err
    assert "DaemonJob" in out and "Warning" not in out
    code = cli.main(["plan", "-f", str(path), "-n", bed.ns, "--kubeconfig", str(bed.cluster.kubeconfig), "-o", "json"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert [w[: len(PAUSE) - len("Warning: ")] for w in json.loads(out)["warnings"]] == [PAUSE[len("Warning: ") :]]
