"""Refused at apply for what the cluster would refuse: the webhook's dry run of the node Job
and its pod, against the real API server.

One controller replica (as its own user, with the manifests' RBAC) serves the webhook behind
a Service stand-in on loopback; the manifests' configuration is applied with the test bed's
changes (reached by URL, limited by a namespaceSelector to this module's namespaces). It
shares the webhook's Secret and configuration names with test_webhook.py (the controller's
RBAC names them), so the two modules run one after the other, never at once.

Pod Security: the local control plane is Kubernetes 1.20, which has no Pod Security
admission plugin (it came in 1.22/1.25), so a validating webhook on pods stands in for it in
a namespace labelled `pod-security.kubernetes.io/enforce: restricted`, refusing a privileged
container with Pod Security's words. What it shows is what matters here: the pod the Job
controller would make is put to the namespace's pod admission at apply time (a Job alone is
never refused by Pod Security, which only warns on workloads).
"""

from __future__ import annotations

import copy
import json
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob import defaults
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.cluster import CONTROLLER_NAMESPACE, LocalCluster
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.process import ControllerProcess
from daemonjob.testing.serviceproxy import ServiceProxy
from daemonjob.testing.sim.kubelet import NodeSpec, SimKubelet
from daemonjob.testing.waiting import wait_for
from daemonjob.testing.webhook import JOB_CREATE, ValidatingWebhook

ROOT = Path(__file__).resolve().parents[2]
DJ_API = "daemonjob.io/v1alpha1"
WEBHOOKS = "admissionregistration.k8s.io/v1"
CONFIG = defaults.WEBHOOK_CONFIGURATION
SCOPE_LABEL = "daemonjob.io/dryrun-test"
ENFORCE = "pod-security.kubernetes.io/enforce"
SLOW_LABEL = "daemonjob.io/dryrun-test-slow"
HOOK = "validate.daemonjob.io"
POD_CREATE = {**JOB_CREATE, "apiGroups": [""], "resources": ["pods"]}


def dj(name: str, **pod: Any) -> dict[str, Any]:
    """A DaemonJob selecting the bed's node, its pod spec fields laid over one busybox container."""
    body = daemonjob(
        name,
        manifest=True,
        template=job_template(backoff_limit=None, container={"name": "main", "image": "busybox:1.36"}),
        nodeSelector={"matchLabels": {SCOPE_LABEL: "node"}},
        nodeParameters=[{"env": "ZONE", "fromLabel": "topology.kubernetes.io/zone"}],
    )
    pod_spec(body).update(pod)
    return body


def pod_spec(body: dict[str, Any]) -> dict[str, Any]:
    return body["spec"]["jobTemplate"]["spec"]["template"]["spec"]


@dataclass
class Bed:
    cluster: LocalCluster
    kube: Kube
    ns: str
    ns_restricted: str
    ns_slow: str
    ns_quota: str

    def apply(self, body: Mapping[str, Any], ns: str) -> subprocess.CompletedProcess[str]:
        assert self.cluster.bin_dir is not None
        return subprocess.run(
            [str(self.cluster.bin_dir / "kubectl"), f"--kubeconfig={self.cluster.kubeconfig}", "-n", ns]
            + ["apply", "-f", "-"],
            input=json.dumps(body),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def exists(self, name: str, ns: str) -> bool:
        try:
            self.kube.get(path_for(DJ_API, "daemonjobs", ns, name))
            return True
        except ApiError as exc:
            if exc.not_found:
                return False
            raise

    def jobs_and_pods(self, ns: str) -> list[str]:
        return [
            o["metadata"]["name"]
            for kind in (("batch/v1", "jobs"), ("v1", "pods"))
            for o in self.kube.get(path_for(*kind, ns))["items"]
        ]


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
    probe = dj("probe")
    probe["spec"]["schedule"] = "bad"
    try:
        kube.create(path_for(DJ_API, "daemonjobs", ns), probe, dryRun="All")
    except ApiError as exc:
        return f'admission webhook "{HOOK}" denied the request' in exc.message
    return False


def _restricted(request: Mapping[str, Any]) -> str | None:
    """Part of Pod Security's `restricted` level, in its own words: privileged containers,
    privilege escalation, running as root."""
    spec = (request.get("object") or {}).get("spec") or {}
    pod_non_root = (spec.get("securityContext") or {}).get("runAsNonRoot") is True
    found = []
    for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        sc, name = c.get("securityContext") or {}, c.get("name")
        if sc.get("privileged"):
            found.append(f'privileged (container "{name}" must not set securityContext.privileged=true)')
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(
                f'allowPrivilegeEscalation != false (container "{name}" must set '
                "securityContext.allowPrivilegeEscalation=false)"
            )
        if not pod_non_root and sc.get("runAsNonRoot") is not True:
            found.append(f'runAsNonRoot != true (pod or container "{name}" must set securityContext.runAsNonRoot=true)')
    return f'violates PodSecurity "restricted:latest": {", ".join(found)}' if found else None


RESTRICTED = {"allowPrivilegeEscalation": False, "runAsNonRoot": True}


def _slow(_: Mapping[str, Any]) -> str | None:
    time.sleep(defaults.WEBHOOK_DRY_RUN_TIMEOUT + 1.5)  # longer than the dry run waits for a call
    return None


def _reviewed(kube: Kube, ns: str, hook: ValidatingWebhook) -> bool:
    """A dry-run create of a Job in `ns` reached `hook` (the API server picks new
    configurations up from a watch: writes right after one is made may pass unreviewed)."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "probe-"}}
    job["spec"] = {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}
    kube.create(path_for("batch/v1", "jobs", ns), job, dryRun="All", request_timeout=30)
    return bool(hook.reviews)


@pytest.fixture(scope="module")
def bed(
    cluster: LocalCluster,
    kube: Kube,
    installed_crd: None,
    kubelet: SimKubelet,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Bed]:
    tmp = tmp_path_factory.mktemp("dryrun")
    suffix = uuid.uuid4().hex[:6]
    ns, restricted, slow = f"dr-{suffix}", f"dr-psa-{suffix}", f"dr-slow-{suffix}"
    quota = f"dr-quota-{suffix}"
    for name, labels in (
        (ns, {}),
        (restricted, {ENFORCE: "restricted"}),
        (slow, {SLOW_LABEL: "true"}),
        (quota, {}),
    ):
        body = {"metadata": {"name": name, "labels": {SCOPE_LABEL: "true", **labels}}}
        kube.create(path_for("v1", "namespaces"), body)
    no_jobs = {"metadata": {"name": "no-jobs"}, "spec": {"hard": {"count/jobs.batch": "0"}}}
    kube.create(path_for("v1", "resourcequotas", quota), no_jobs)
    node = f"dr-node-{suffix}"
    kubelet.add_nodes([NodeSpec(node, labels={SCOPE_LABEL: "node", "topology.kubernetes.io/zone": "zone-a"})])
    kubelet.wait_ready([node], timeout=60)
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
            f"--namespace={ns}",  # its workers stay out of the other namespaces; the webhook serves all
            webhook=True,
        )
    )
    policy = ValidatingWebhook(
        kube,
        f"psa-{suffix}",
        _restricted,
        rules=[POD_CREATE],
        namespace_selector={"matchLabels": {ENFORCE: "restricted"}},
    )
    slow_jobs = ValidatingWebhook(
        kube, f"slow-{suffix}", _slow, namespace_selector={"matchLabels": {SLOW_LABEL: "true"}}, timeout_seconds=10
    )
    try:
        with proxy, policy, slow_jobs:
            replicas[0].start()
            replicas[0].wait_ready(90)
            wait_for(lambda: _serves(kube, ns), 60, "the API server to call the webhook")
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "probe-"}}
            pod["spec"] = {"containers": [{"name": "c", "image": "x"}]}
            policy.wait_denies(path_for("v1", "pods", restricted), pod)
            wait_for(lambda: _reviewed(kube, slow, slow_jobs), 60, "the API server to call the slow webhook")
            wait_for(
                lambda: (kube.get(path_for("v1", "resourcequotas", quota, "no-jobs")).get("status") or {}).get("hard"),
                60,
                "the quota to be counted",
            )
            yield Bed(cluster, kube, ns, restricted, slow, quota)
    finally:
        for r in replicas:
            r.stop()
        kubelet.delete_node(node)
        for path in [
            f"{config_path}/{CONFIG}",
            *(path_for("v1", "namespaces", name=n) for n in (ns, restricted, slow, quota)),
        ]:
            try:
                kube.delete(path)
            except ApiError as exc:
                if not exc.not_found:
                    raise


def _without_image() -> dict[str, Any]:
    body = dj("no-image")
    del pod_spec(body)["containers"][0]["image"]
    return body


def _with_label(name: str, where: str) -> dict[str, Any]:
    body = dj(name)
    target = body["spec"]["jobTemplate"] if where == "job" else body["spec"]["jobTemplate"]["spec"]["template"]
    target.setdefault("metadata", {})["labels"] = {"bad key!": "x"}
    return body


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "no-containers": (
        dj("no-containers", containers=[]),
        "spec.jobTemplate.spec.template.spec.containers: Required value",
    ),
    "no-image": (_without_image(), "spec.jobTemplate.spec.template.spec.containers[0].image: Required value"),
    "pod-label": (
        _with_label("pod-label", "pod"),
        'spec.jobTemplate.spec.template.metadata.labels: Invalid value: "bad key!"',
    ),
    "job-label": (_with_label("job-label", "job"), 'spec.jobTemplate.metadata.labels: Invalid value: "bad key!"'),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_template_the_job_api_refuses_is_refused_at_apply_with_its_field(bed: Bed, case: str) -> None:
    body, expected = copy.deepcopy(BAD[case][0]), BAD[case][1]
    out = bed.apply(body, bed.ns)
    assert out.returncode != 0, f"{case}: accepted: {out.stdout}"
    assert expected in out.stderr, out.stderr
    assert bed.exists(body["metadata"]["name"], bed.ns) is False


def test_a_valid_template_is_accepted_and_the_dry_run_leaves_nothing(bed: Bed) -> None:
    out = bed.apply(dj("fine"), bed.ns)
    assert out.returncode == 0, out.stderr
    assert "Warning" not in out.stderr, out.stderr
    assert bed.exists("fine", bed.ns)


def test_pod_security_restricted_refuses_a_template_at_apply(bed: Bed) -> None:
    out = bed.apply(dj("as-root"), bed.ns_restricted)
    assert out.returncode != 0, out.stdout
    assert "spec.jobTemplate.spec.template.spec: Forbidden: the namespace refuses the node Job's pod" in out.stderr
    assert 'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "main"' in out.stderr
    assert not bed.exists("as-root", bed.ns_restricted)
    assert bed.jobs_and_pods(bed.ns_restricted) == []  # dry runs only
    # the same template, compliant, passes there
    compliant = dj("compliant")
    pod_spec(compliant)["containers"][0]["securityContext"] = dict(RESTRICTED)
    out = bed.apply(compliant, bed.ns_restricted)
    assert out.returncode == 0, out.stderr
    # an edit that changes nothing the Jobs are made of is never held back by a policy
    # that changed since: the namespace now refuses what it admitted
    bed.kube.patch(
        path_for(DJ_API, "daemonjobs", bed.ns_restricted, "compliant"),
        {"metadata": {"labels": {"team": "a"}}},
        content_type="application/merge-patch+json",
    )


def test_a_privileged_template_is_refused_at_apply_where_pod_security_refuses_it(bed: Bed) -> None:
    body = dj("privileged")
    pod_spec(body)["containers"][0]["securityContext"] = {"privileged": True, "runAsNonRoot": True}
    out = bed.apply(body, bed.ns_restricted)
    assert out.returncode != 0, out.stdout
    assert "spec.jobTemplate.spec.template.spec: Forbidden: the namespace refuses the node Job's pod" in out.stderr
    assert (
        'violates PodSecurity "restricted:latest": privileged (container "main" must not set '
        "securityContext.privileged=true)"
    ) in out.stderr, out.stderr
    assert not bed.exists("privileged", bed.ns_restricted)
    # where no policy refuses it, it is admitted
    out = bed.apply({**body, "spec": {**body["spec"], "suspend": True}}, bed.ns)
    assert out.returncode == 0, out.stderr


def test_a_dry_run_that_cannot_be_made_in_time_is_a_warning_not_a_refusal(bed: Bed) -> None:
    started = time.monotonic()
    out = bed.apply(dj("slow"), bed.ns_slow)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert "Warning: the dry run of a node Job could not be made" in out.stderr, out.stderr
    assert bed.exists("slow", bed.ns_slow)
    assert took < defaults.WEBHOOK_TIMEOUT + 5, took  # answered within the webhook's timeout (and kubectl's own)


def test_a_quota_on_the_count_of_jobs_refuses_at_apply(bed: Bed) -> None:
    out = bed.apply(dj("over-quota"), bed.ns_quota)
    assert out.returncode != 0, out.stdout
    assert "spec.jobTemplate: Forbidden: the namespace refuses the node Job: exceeded quota: no-jobs" in out.stderr
    assert not bed.exists("over-quota", bed.ns_quota)
