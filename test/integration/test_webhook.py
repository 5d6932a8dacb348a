"""The admission webhook served by the controller, against the real API server.

Two controller replicas (leader election, each as its own user with the manifests' RBAC)
serve the webhook behind a Service stand-in on loopback; the manifests' Secret and
ValidatingWebhookConfiguration are applied with two test-bed changes: the API server
reaches the webhook by URL (no Service networking here), and a namespaceSelector limits it
to this module's namespaces, so no other test's DaemonJobs depend on it.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from prometheus_client import CollectorRegistry

from daemonjob import cli, defaults
from daemonjob.admission import webhook as admission
from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.machinery.server import certs
from daemonjob.testing.cluster import CONTROLLER_NAMESPACE, LocalCluster
from daemonjob.testing.doubles.builders import daemonjob, job_template
from daemonjob.testing.process import ControllerProcess
from daemonjob.testing.serviceproxy import ServiceProxy
from daemonjob.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
DJ_API = "daemonjob.io/v1alpha1"
WEBHOOKS = "admissionregistration.k8s.io/v1"
SECRET = defaults.WEBHOOK_CERT_SECRET
CONFIG = defaults.WEBHOOK_CONFIGURATION
SCOPE_LABEL = "daemonjob.io/webhook-test"
HOOK = "validate.daemonjob.io"
urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # replicas are reached by IP, unverified


def nowhere(name: str, **spec: Any) -> dict[str, Any]:
    """Selecting no node: what these tests look at is admission alone."""
    return daemonjob(
        name,
        manifest=True,
        template=job_template(backoff_limit=None, container={"image": "busybox:1.36"}),
        **{"nodeSelector": {"matchLabels": {"webhook-test": "none"}}, **spec},
    )


def pod_spec(body: dict[str, Any]) -> dict[str, Any]:
    return body["spec"]["jobTemplate"]["spec"]["template"]["spec"]


@dataclass
class Bed:
    cluster: LocalCluster
    kube: Kube
    ns: str  # under the webhook
    ns_off: str  # not (yet) under it
    replicas: list[ControllerProcess]
    proxy: ServiceProxy
    tmp: Path
    environ: dict[str, str] = field(default_factory=dict)

    def kubectl(self, *args: str, stdin: str | None = None, ns: str | None = None) -> subprocess.CompletedProcess[str]:
        assert self.cluster.bin_dir is not None
        return subprocess.run(
            [
                str(self.cluster.bin_dir / "kubectl"),
                f"--kubeconfig={self.cluster.kubeconfig}",
                "-n",
                ns or self.ns,
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            env=self.environ or None,
        )

    def apply(self, body: dict[str, Any], *extra: str, ns: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.kubectl("apply", "-f", "-", *extra, stdin=json.dumps(body), ns=ns)

    def exists(self, name: str, ns: str | None = None) -> bool:
        try:
            self.kube.get(path_for(DJ_API, "daemonjobs", ns or self.ns, name))
            return True
        except ApiError as exc:
            if exc.not_found:
                return False
            raise

    def secret(self) -> dict[str, bytes]:
        data = self.kube.get(path_for("v1", "secrets", CONTROLLER_NAMESPACE, SECRET)).get("data") or {}
        return {k: base64.b64decode(v) for k, v in data.items()}

    def bundle(self) -> bytes:
        config = self.kube.get(path_for(WEBHOOKS, "validatingwebhookconfigurations", name=CONFIG))
        return base64.b64decode(config["webhooks"][0]["clientConfig"].get("caBundle") or "")

    def served_cert(self, port: int) -> bytes:
        return served_cert(port)

    def refused_message(self, body: dict[str, Any]) -> str:
        """What the webhook answers to a server-side dry-run create of `body`."""
        try:
            self.kube.create(path_for(DJ_API, "daemonjobs", self.ns), body, dryRun="All")
        except ApiError as exc:
            assert HOOK in exc.message, exc.message
            return exc.message.split("denied the request: ", 1)[1]
        raise AssertionError("allowed")


def served_cert(port: int) -> bytes:
    """The certificate a replica serves (PEM), read without verifying it."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return ssl.DER_cert_to_PEM_cert(der).encode()


def post_review(port: int, obj: dict[str, Any]) -> dict[str, Any]:
    """POST an AdmissionReview of creating `obj` straight to one replica; its response."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "operation": "CREATE",
            "name": obj["metadata"]["name"],
            "namespace": "x",
            "kind": {"group": "daemonjob.io", "version": "v1alpha1", "kind": "DaemonJob"},
            "object": obj,
        },
    }
    http = urllib3.PoolManager(cert_reqs="CERT_NONE")
    r = http.request(
        "POST",
        f"https://127.0.0.1:{port}{defaults.WEBHOOK_PATH}",
        body=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
        retries=False,
        timeout=10,
    )
    assert r.status == 200, r.data
    return json.loads(r.data)["response"]


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


def _webhook_serves(bed: Bed, ns: str | None = None) -> bool:
    """A dry-run create of a bad DaemonJob is refused by the webhook (not by a failure to call it)."""
    try:
        bed.kube.create(path_for(DJ_API, "daemonjobs", ns or bed.ns), nowhere("probe", schedule="bad"), dryRun="All")
    except ApiError as exc:
        return f'admission webhook "{HOOK}" denied the request' in exc.message
    return False


@pytest.fixture(scope="module")
def bed(
    cluster: LocalCluster, kube: Kube, installed_crd: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Bed]:
    tmp = tmp_path_factory.mktemp("webhook")
    ns, ns_off = f"wh-{uuid.uuid4().hex[:6]}", f"wh-off-{uuid.uuid4().hex[:6]}"
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": ns, "labels": {SCOPE_LABEL: "true"}}})
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": ns_off}})
    _put_or_create(kube, path_for("v1", "secrets", CONTROLLER_NAMESPACE), _manifest(SECRET, "Secret"))
    replicas: list[ControllerProcess] = []
    proxy = ServiceProxy(lambda: [r.webhook_port for r in replicas if r.running()])
    config = _manifest(CONFIG, "ValidatingWebhookConfiguration")
    hook = config["webhooks"][0]
    hook["clientConfig"] = {"url": f"https://127.0.0.1:{proxy.port}{defaults.WEBHOOK_PATH}"}
    hook["namespaceSelector"] = {"matchLabels": {SCOPE_LABEL: "true"}}
    config_path = path_for(WEBHOOKS, "validatingwebhookconfigurations")
    _put_or_create(kube, config_path, config)
    lease = f"webhook-{uuid.uuid4().hex[:6]}"
    for user in ("daemonjob-a", "daemonjob-b"):
        replicas.append(
            ControllerProcess(
                cluster.kubeconfig_for(user),
                tmp / f"{user}.log",
                "--leader-elect",
                f"--leader-election-namespace={CONTROLLER_NAMESPACE}",
                f"--leader-election-id={lease}",
                "--webhook-cert-dir",
                str(tmp / f"certs-{user}"),
                f"--webhook-service-namespace={CONTROLLER_NAMESPACE}",
                "--webhook-cert-extra-names=127.0.0.1",
                webhook=True,
            )
        )
    b = Bed(cluster, kube, ns, ns_off, replicas, proxy, tmp)
    try:
        with proxy:
            for r in replicas:
                r.start()
            for r in replicas:
                r.wait_ready(90)
            wait_for(lambda: _webhook_serves(b), 60, "the API server to call the webhook")
            yield b
    finally:
        for r in replicas:
            r.stop()
        for path in (
            f"{config_path}/{CONFIG}",
            path_for("v1", "namespaces", name=ns),
            path_for("v1", "namespaces", name=ns_off),
        ):
            try:
                kube.delete(path)
            except ApiError as exc:
                if not exc.not_found:
                    raise


# -- refused at apply time --------------------------------------------------------------------
def _big_template() -> dict[str, Any]:
    body = nowhere("big")
    body["spec"]["jobTemplate"]["metadata"] = {"annotations": {"blob": "x" * (defaults.JOB_TEMPLATE_MAX_BYTES + 1)}}
    return body


def _with_pod(name: str, **fields: Any) -> dict[str, Any]:
    body = nowhere(name)
    pod_spec(body).update(fields)
    for key in [k for k, v in fields.items() if v is None]:
        del pod_spec(body)[key]
    return body


def _with_job(name: str, **fields: Any) -> dict[str, Any]:
    body = nowhere(name)
    body["spec"]["jobTemplate"]["spec"].update(fields)
    return body


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "cron": (nowhere("cron", schedule="0 25 * * *"), "spec.schedule"),
    "cron-fields": (nowhere("cron-fields", schedule="0 3 * *"), "spec.schedule"),
    "cron-tz-prefix": (nowhere("cron-tz-prefix", schedule="CRON_TZ=UTC 0 3 * * *"), "spec.schedule"),
    "time-zone": (nowhere("time-zone", schedule="@daily", timeZone="Mars/Olympus"), "spec.timeZone"),
    "selector": (nowhere("selector", nodeSelector={"matchLabels": {"bad key!": "x"}}), "spec.nodeSelector"),
    "selector-op": (
        nowhere("selector-op", nodeSelector={"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
        "spec.nodeSelector.matchExpressions[0].values",
    ),
    "restart-always": (
        _with_pod("restart-always", restartPolicy="Always"),
        "spec.jobTemplate.spec.template.spec.restartPolicy",
    ),
    "restart-default": (
        _with_pod("restart-default", restartPolicy=None),
        "spec.jobTemplate.spec.template.spec.restartPolicy",
    ),
    "ttl": (_with_job("ttl", ttlSecondsAfterFinished=60), "spec.jobTemplate.spec.ttlSecondsAfterFinished"),
    "max-parallel-percent": (nowhere("max-parallel-percent", maxParallel="150%"), "spec.maxParallel"),
    "max-parallel-zero": (nowhere("max-parallel-zero", maxParallel=0), "spec.maxParallel"),
    "max-failed-percent": (nowhere("max-failed-percent", maxFailedNodes="101%"), "spec.maxFailedNodes"),
    "history-limit": (nowhere("history-limit", historyLimit=defaults.HISTORY_LIMIT_MAX + 1), "spec.historyLimit"),
    "template-size": (_big_template(), "spec.jobTemplate"),
    "managed-by": (_with_job("managed-by", managedBy="kueue.x-k8s.io/multikueue"), "spec.jobTemplate.spec.managedBy"),
    "retry-backoff": (
        nowhere("retry-backoff", retry={"limit": 1, "backoff": "5m", "maxBackoff": "1m"}),
        "spec.retry.maxBackoff",
    ),
    "start-timeout": (nowhere("start-timeout", startTimeout="0s"), "spec.startTimeout"),
    "name": (nowhere("n" * 64), "metadata.name"),
    "toleration": (
        _with_pod("toleration", tolerations=[{"operator": "Equal", "value": "x"}]),
        "spec.jobTemplate.spec.template.spec.tolerations[0].operator",
    ),
    "affinity": (
        _with_pod(
            "affinity",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}]
                    }
                }
            },
        ),
        "spec.jobTemplate.spec.template.spec.affinity",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_daemonjob_is_refused_with_its_field_and_nothing_created(bed: Bed, case: str) -> None:
    body, field_path = copy.deepcopy(BAD[case][0]), BAD[case][1]
    for extra in (("--dry-run=server",), ()):
        out = bed.apply(body, *extra)
        assert out.returncode != 0, f"{case}: accepted ({extra}): {out.stdout}"
        assert f"{field_path}" in out.stderr, out.stderr
        assert bed.exists(body["metadata"]["name"]) is False


def test_every_problem_is_named_at_once(bed: Bed) -> None:
    body = nowhere("many", schedule="0 25 * * *", timeZone="Mars/Olympus")
    pod_spec(body)["restartPolicy"] = "Always"
    out = bed.apply(body)
    assert out.returncode != 0
    # kubectl lists the causes of a 422, as for a Deployment the API server refuses.
    assert out.stderr.splitlines()[1:4] == [
        '* spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
        '"Never", "OnFailure"',
        '* spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone (use an IANA name such as '
        '"Europe/Berlin" or "UTC")',
        '* spec.schedule: Invalid value: "0 25 * * *": Bad hour',
    ], out.stderr
    # The API server's message names the webhook and every problem, `; `-separated.
    message = bed.refused_message(body)
    assert message.startswith('spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: "Always"')
    assert '; spec.timeZone: Invalid value: "Mars/Olympus"' in message
    assert '; spec.schedule: Invalid value: "0 25 * * *"' in message


def _written(value: Any, stored: Any) -> bool:
    """`value` is in `stored` as written: the schema's defaults may have been added beside it."""
    if isinstance(value, dict):
        return isinstance(stored, dict) and all(k in stored and _written(v, stored[k]) for k, v in value.items())
    return bool(value == stored)


def test_valid_daemonjobs_are_accepted_unchanged(bed: Bed) -> None:
    # The examples that need no node maintenance (which this namespace is not allowed).
    examples = [
        d
        for p in sorted((ROOT / "examples").glob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
        if d and d.get("kind") == "DaemonJob" and "nodeMaintenance" not in d["spec"]
    ]
    assert len(examples) >= 7
    mine = nowhere(
        "every-knob",
        schedule="*/5 * * * *",
        timeZone="Europe/Berlin",
        maxParallel="100%",
        maxFailedNodes="10%",
        historyLimit=defaults.HISTORY_LIMIT_MAX,
        concurrencyPolicy="Replace",
        startingDeadlineSeconds=30,
        suspend=True,
    )
    for body in [*examples, mine]:
        assert bed.apply(body, "--dry-run=server").returncode == 0
        out = bed.apply(body)
        assert out.returncode == 0, out.stderr
        stored = bed.kube.get(path_for(DJ_API, "daemonjobs", bed.ns, body["metadata"]["name"]))
        for key, value in body["spec"].items():
            assert _written(value, stored["spec"][key]), key


# -- objects that got in while the webhook was away ---------------------------------------------
def test_an_already_invalid_daemonjob_stalls_with_the_same_messages_and_can_be_fixed_and_deleted(bed: Bed) -> None:
    def invalid(name: str, restart: str = "Always", **spec: Any) -> dict[str, Any]:
        body = nowhere(name, **spec)
        pod_spec(body)["restartPolicy"] = restart
        return body

    for name in ("old-bad", "old-bad-2"):  # no webhook in this namespace yet
        bed.kube.create(path_for(DJ_API, "daemonjobs", bed.ns_off), invalid(name, schedule="0 25 * * *"))
    path = path_for(DJ_API, "daemonjobs", bed.ns_off, "old-bad")

    def stalled() -> str | None:
        conditions = (bed.kube.get(path).get("status") or {}).get("conditions") or []
        return next((c["message"] for c in conditions if c["type"] == "Stalled" and c["status"] == "True"), None)

    message = wait_for(stalled, 60, "old-bad to be Stalled")
    assert message == bed.refused_message(invalid("old-bad", schedule="0 25 * * *"))
    assert "restartPolicy" in message and "spec.schedule" in message
    bed.kube.patch(path_for("v1", "namespaces", name=bed.ns_off), {"metadata": {"labels": {SCOPE_LABEL: "true"}}})
    wait_for(lambda: _webhook_serves(bed, bed.ns_off), 30, "the webhook to cover the namespace")
    # An edit that keeps the problems (a label) passes, with the problems as warnings.
    labelled = bed.kubectl("label", "daemonjob", "old-bad", "team=ops", ns=bed.ns_off)
    assert labelled.returncode == 0, labelled.stderr
    assert "spec.schedule" in labelled.stderr  # the warnings
    # One that adds a problem is refused; one that removes a problem passes.
    worse = bed.apply(invalid("old-bad", schedule="0 25 * * *", timeZone="Mars/Olympus"), ns=bed.ns_off)
    assert worse.returncode != 0 and "spec.timeZone" in worse.stderr
    better = bed.apply(invalid("old-bad", restart="Never", schedule="0 25 * * *"), ns=bed.ns_off)
    assert better.returncode == 0, better.stderr
    wait_for(
        lambda: (stalled() or "").startswith("spec.schedule:") and "restartPolicy" not in (stalled() or ""),
        60,
        "the Stalled message to follow the fix",
    )
    fixed = bed.apply(invalid("old-bad", restart="Never", schedule="0 3 * * *"), ns=bed.ns_off)
    assert fixed.returncode == 0, fixed.stderr
    wait_for(lambda: stalled() is None, 60, "old-bad to be no longer Stalled")
    deleted = bed.kubectl("delete", "daemonjob", "old-bad-2", "--wait=true", ns=bed.ns_off)  # still invalid
    assert deleted.returncode == 0, deleted.stderr
    assert not bed.exists("old-bad-2", ns=bed.ns_off)


def test_kubectl_daemonjob_create_dry_run_server_goes_through_the_webhook(bed: Bed) -> None:
    before = sum(r.metric("daemonjob_webhook_reviews_total", operation="CREATE") for r in bed.replicas)
    environ = {
        **os.environ,
        "KUBECONFIG": str(bed.cluster.kubeconfig),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    out = subprocess.run(
        [
            "kubectl-daemonjob",
            "create",
            "adhoc",
            "--image",
            "busybox:1.36",
            "-n",
            bed.ns,
            "-l",
            "webhook-test=none",
            "--dry-run=server",
        ],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "created (server dry run)" in out.stdout
    after = sum(r.metric("daemonjob_webhook_reviews_total", operation="CREATE") for r in bed.replicas)
    assert after == before + 1
    assert not bed.exists("adhoc")


# -- availability ----------------------------------------------------------------------------
def test_every_replica_serves_and_applies_work_with_one_killed(bed: Bed) -> None:
    for r in bed.replicas:
        assert bed.served_cert(r.webhook_port) == bed.secret()["tls.crt"]
        assert post_review(r.webhook_port, nowhere("direct", schedule="nope"))["allowed"] is False
    for i in range(3):
        assert bed.apply(nowhere(f"pair-{i}"), "--dry-run=server").returncode == 0
    # The API server keeps its connection, so one replica answers it: kill that one.
    victim = max(bed.replicas, key=lambda r: r.metric("daemonjob_webhook_reviews_total", operation="CREATE"))
    assert victim.metric("daemonjob_webhook_reviews_total", operation="CREATE") > 0
    os.kill(victim.pid, signal.SIGKILL)
    victim.kill()  # reaps it
    try:
        for i in range(5):
            good = bed.apply(nowhere(f"after-kill-{i}"))
            assert good.returncode == 0, good.stderr
            bad = bed.apply(nowhere(f"after-kill-bad-{i}", schedule="nope"))
            assert bad.returncode != 0 and "spec.schedule: Invalid value" in bad.stderr, bad.stderr
    finally:
        victim.start()
        victim.wait_ready(90)


def test_fifty_concurrent_applies_are_answered_within_the_timeout(bed: Bed) -> None:
    def one(i: int) -> str:
        body = nowhere(f"many-{i}", **({"schedule": "0 25 * * *"} if i % 2 else {}))
        try:
            bed.kube.create(path_for(DJ_API, "daemonjobs", bed.ns), body)
            return "created"
        except ApiError as exc:
            if "denied the request" in exc.message and "spec.schedule" in exc.message:
                return "refused"
            return f"error: {exc.message}"

    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(one, range(50)))
    figures = {a: answers.count(a) for a in set(answers)}
    print(f"50 concurrent creates: {figures}")
    assert figures == {"created": 25, "refused": 25}, figures  # no timeouts, no failures to call


# -- certificates --------------------------------------------------------------------------------
def _short_lived(secret: dict[str, bytes], new_ca: bool) -> dict[str, bytes]:
    """The Secret's data with a serving certificate (and CA) that expires within the hour."""
    ca = certs.new_ca("soon-expiring-ca", 3600) if new_ca else certs.KeyPair(secret["ca.crt"], secret["ca.key"])
    serving = certs.issue(ca, ["daemonjob-webhook.daemonjob-system.svc", "127.0.0.1"], 3600)
    return {"ca.crt": ca.cert_pem, "ca.key": ca.key_pem, "tls.crt": serving.cert_pem, "tls.key": serving.key_pem}


def _write_secret(bed: Bed, data: dict[str, bytes]) -> None:
    path = path_for("v1", "secrets", CONTROLLER_NAMESPACE, SECRET)
    secret = bed.kube.get(path)
    secret["data"] = {k: base64.b64encode(v).decode() for k, v in data.items()}
    bed.kube.put(path, secret)


@pytest.mark.parametrize("new_ca", [False, True], ids=["serving-certificate", "ca-and-serving-certificate"])
def test_a_certificate_expiring_soon_is_rotated_while_applies_keep_working(bed: Bed, new_ca: bool) -> None:
    before = bed.secret()
    failures: list[str] = []
    applies = 0
    stop = threading.Event()

    def keep_applying() -> None:
        nonlocal applies
        while not stop.is_set():
            out = bed.apply(nowhere("rotating", schedule="nope"), "--dry-run=server")
            applies += 1
            if "spec.schedule: Invalid value" not in out.stderr:
                failures.append(out.stderr)

    worker = threading.Thread(target=keep_applying)
    worker.start()
    try:
        soon = _short_lived(before, new_ca)
        _write_secret(bed, soon)
        wait_for(
            lambda: bed.secret()["tls.crt"] not in (soon["tls.crt"], before["tls.crt"]),
            60,
            "the controller to renew the certificate",
        )
        after = bed.secret()
        assert certs.not_after(after["tls.crt"]) > certs.not_after(soon["tls.crt"])
        assert (after["ca.crt"] != before["ca.crt"]) is new_ca  # a CA still far from expiry is kept
        assert after["ca.crt"] not in (soon["ca.crt"],) or not new_ca  # the short-lived CA is replaced too
        assert after["ca.crt"].strip() in bed.bundle()
        if new_ca:
            assert before["ca.crt"].strip() in bed.bundle()  # still trusted while replicas catch up
        for r in bed.replicas:
            wait_for(
                lambda r=r: bed.served_cert(r.webhook_port) == after["tls.crt"],
                60,
                "every replica to serve the new certificate",
            )
        for _ in range(3):
            assert "spec.schedule: Invalid value" in bed.apply(nowhere("x", schedule="nope"), "--dry-run=server").stderr
    finally:
        stop.set()
        worker.join(60)
    print(f"rotation (new CA: {new_ca}): {applies} applies during it, {len(failures)} failed")
    assert not failures, failures[:3]


# -- the server ------------------------------------------------------------------------------------
def test_malformed_and_oversized_reviews_get_a_clear_answer(bed: Bed) -> None:
    http = urllib3.PoolManager(cert_reqs="CERT_NONE")
    url = f"https://127.0.0.1:{bed.replicas[1].webhook_port}{defaults.WEBHOOK_PATH}"
    for body in (b"{not json", b'{"apiVersion": "v1", "kind": "Pod"}'):
        r = http.request("POST", url, body=body, headers={"Content-Type": "application/json"}, retries=False)
        assert r.status == 400 and b"malformed AdmissionReview" in r.data
    # Refused on its Content-Length, before a byte of the body is read.
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    port = bed.replicas[1].webhook_port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw) as tls:
        tls.sendall(
            f"POST {defaults.WEBHOOK_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {defaults.WEBHOOK_MAX_REQUEST_BYTES + 1}\r\n\r\n".encode()
        )
        assert tls.recv(4096).startswith(b"HTTP/1.1 413 ")
    assert bed.replicas[1].running()
    assert _webhook_serves(bed)


def test_provided_certificate_files_are_served_and_reloaded_and_readiness_waits_for_them(
    cluster: LocalCluster, installed_crd: None, tmp_path: Path
) -> None:
    """The cert-manager way: the controller keeps nothing, only reads the mounted files."""
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    replica = ControllerProcess(
        cluster.kubeconfig_for("daemonjob-a"),
        tmp_path / "c.log",
        f"--leader-election-namespace={CONTROLLER_NAMESPACE}",  # where its turn seal key is
        "--webhook-cert-secret=",
        "--webhook-cert-dir",
        str(cert_dir),
        webhook=True,
    )
    ca = certs.new_ca("provided-ca", 3600)
    try:
        replica.start()
        wait_for(
            lambda: "webhook" in replica.get(replica.health_port, "/readyz")[1],
            60,
            "/readyz to say the webhook does not serve yet",
        )
        assert replica.get(replica.health_port, "/readyz")[0] == 500
        for n in range(2):
            serving = certs.issue(ca, [f"127.0.0.{n + 1}"], 3600)
            # Written as the kubelet updates a mounted Secret: both files, each replaced at once.
            for name, pem in (("tls.key", serving.key_pem), ("tls.crt", serving.cert_pem)):
                (cert_dir / f".{name}").write_bytes(pem)
                os.replace(cert_dir / f".{name}", cert_dir / name)
            replica.wait_ready(60)
            wait_for(
                lambda serving=serving: served_cert(replica.webhook_port) == serving.cert_pem,
                60,
                "the controller to serve the new files",
            )
        assert len(replica.exit_codes) == 0 and replica.running()  # reloaded, not restarted
    finally:
        replica.stop()


# -- node maintenance: only where --node-maintenance-namespaces allows it -------------------------
MAINTENANCE_SCOPE = "daemonjob.io/webhook-maintenance-test"


@dataclass
class AllowanceBed:
    kube: Kube
    allowed: str  # a namespace the flag names
    other: str  # one it does not
    cluster: LocalCluster

    def kubectl_as(self, user: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """kubectl as `user` (the admin impersonating them: the webhook sees their userInfo)."""
        return subprocess.run(
            [*self.cluster.kubectl_command(), f"--as={user}", "-n", self.allowed, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def create(self, ns: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        return self.kube.create(path_for(DJ_API, "daemonjobs", ns), body, **params)

    def refusal(self, ns: str, body: dict[str, Any]) -> str:
        """The API server's message refusing a create of `body` in `ns`."""
        with pytest.raises(ApiError) as info:
            self.create(ns, body)
        assert f'admission webhook "{HOOK}" denied the request: ' in info.value.message, info.value.message
        return info.value.message.split("denied the request: ", 1)[1]


@pytest.fixture
def allowance(cluster: LocalCluster, kube: Kube, installed_crd: None, tmp_path: Path) -> Iterator[AllowanceBed]:
    """The controller's webhook, started from its own flags (--node-maintenance-namespaces naming
    one namespace), serving the provided certificate files, registered for two namespaces."""
    suffix = uuid.uuid4().hex[:6]
    bed = AllowanceBed(kube, f"wh-maint-{suffix}", f"wh-no-maint-{suffix}", cluster)
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    ca = certs.new_ca("maintenance-test-ca", 3600)
    serving = certs.issue(ca, ["127.0.0.1"], 3600)
    (cert_dir / "tls.crt").write_bytes(serving.cert_pem)
    (cert_dir / "tls.key").write_bytes(serving.key_pem)
    args = cli.parser().parse_args(
        [
            "--webhook-cert-secret=",
            "--webhook-cert-dir",
            str(cert_dir),
            f"--node-maintenance-namespaces={bed.allowed},ops",
            "--node-parameter-keys=topology.kubernetes.io/zone",
        ]
    )
    webhook = admission.start(
        args, ("127.0.0.1", 0), kube, CollectorRegistry(), maintenance_namespaces=args.node_maintenance_namespaces
    )
    config = copy.deepcopy(_manifest(CONFIG, "ValidatingWebhookConfiguration"))
    config["metadata"] = {"name": f"daemonjob-maintenance-test-{suffix}"}
    hook = config["webhooks"][0]
    hook["clientConfig"] = {
        "url": f"https://127.0.0.1:{webhook.server.port}{defaults.WEBHOOK_PATH}",
        "caBundle": base64.b64encode(ca.cert_pem).decode(),
    }
    hook["namespaceSelector"] = {"matchLabels": {MAINTENANCE_SCOPE: suffix}}
    config_path = path_for(WEBHOOKS, "validatingwebhookconfigurations")
    cleanup = [path_for("v1", "namespaces", name=ns) for ns in (bed.allowed, bed.other)]
    try:
        for ns in (bed.allowed, bed.other):
            kube.create(path_for("v1", "namespaces"), {"metadata": {"name": ns, "labels": {MAINTENANCE_SCOPE: suffix}}})
        kube.create(config_path, config)
        cleanup.insert(0, f"{config_path}/{config['metadata']['name']}")
        probe = nowhere("probe", schedule="bad")

        def refused() -> bool:
            try:
                bed.create(bed.other, probe, dryRun="All")
            except ApiError as exc:
                return f'admission webhook "{HOOK}" denied the request' in exc.message
            return False

        wait_for(refused, 60, "the API server to call the webhook")
        yield bed
    finally:
        webhook.stop()
        for path in cleanup:
            try:
                kube.delete(path)
            except ApiError as exc:
                if not exc.not_found:
                    raise


def test_node_maintenance_is_refused_outside_the_allowed_namespaces_and_admitted_inside(
    allowance: AllowanceBed,
) -> None:
    maintenance = {"cordon": True, "drain": {"timeout": "5m", "onTimeout": "Skip"}}
    expected = (
        f'spec.nodeMaintenance: Forbidden: node maintenance is not allowed in namespace "{allowance.other}" '
        f"(the controller allows it in: ops, {allowance.allowed})"
    )
    assert allowance.refusal(allowance.other, nowhere("patch-kernel", nodeMaintenance=maintenance)) == expected
    with pytest.raises(ApiError) as info:
        allowance.kube.get(path_for(DJ_API, "daemonjobs", allowance.other, "patch-kernel"))
    assert info.value.not_found
    # With a rule book problem too, both are named.
    both = allowance.refusal(allowance.other, nowhere("both", schedule="0 25 * * *", nodeMaintenance=maintenance))
    assert both.startswith('spec.schedule: Invalid value: "0 25 * * *"') and both.endswith("; " + expected)
    # Admitted where the flag allows it, stored with the schema's defaults.
    created = allowance.create(allowance.allowed, nowhere("patch-kernel", nodeMaintenance=maintenance))
    assert created["spec"]["nodeMaintenance"] == {
        "cordon": True,
        "keepFailedCordoned": False,
        "drain": {"timeout": "5m", "onTimeout": "Skip", "deleteEmptyDirData": False, "force": False},
    }
    # A DaemonJob without maintenance is welcome anywhere; an update that adds it is refused.
    # (merge patches: a controller running in this cluster may write the status meanwhile)
    allowance.create(allowance.other, nowhere("plain"))
    plain = path_for(DJ_API, "daemonjobs", allowance.other, "plain")
    with pytest.raises(ApiError) as info:
        allowance.kube.patch(plain, {"spec": {"nodeMaintenance": {"cordon": True}}})
    assert info.value.message.endswith(expected), info.value.message
    patched = allowance.kube.patch(plain, {"spec": {"nodeMaintenance": {"cordon": False}}})  # asks for nothing
    assert patched["spec"]["nodeMaintenance"]["cordon"] is False


# -- node maintenance: only for who may cordon and drain nodes themselves ------------------------
RBAC = "rbac.authorization.k8s.io/v1"


def test_node_maintenance_takes_the_requesters_own_power_to_cordon_and_drain(allowance: AllowanceBed) -> None:
    """Two editors of DaemonJobs in an allowed namespace; only the one who may patch nodes and
    create pods/eviction (as kubectl cordon and drain need) may ask for node maintenance."""
    suffix = uuid.uuid4().hex[:6]
    editors, powers = f"dj-editors-{suffix}", f"node-powers-{suffix}"
    jane, olga = f"jane-{suffix}", f"olga-{suffix}"
    kube, ns = allowance.kube, allowance.allowed
    kube.create(
        path_for(RBAC, "roles", ns),
        {
            "metadata": {"name": editors},
            "rules": [{"apiGroups": ["daemonjob.io"], "resources": ["daemonjobs"], "verbs": ["*"]}],
        },
    )
    kube.create(
        path_for(RBAC, "rolebindings", ns),
        {
            "metadata": {"name": editors},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": editors},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u} for u in (jane, olga)],
        },
    )
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
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": olga}],
            },
        )

        def may(user: str, *check: str) -> bool:
            return allowance.kubectl_as(user, "auth", "can-i", *check).stdout.strip() == "yes"

        wait_for(
            lambda: may(jane, "create", "daemonjobs.daemonjob.io") and may(olga, "patch", "nodes"),
            30,
            "the roles to be in force",
        )
        maintenance = {"cordon": True, "drain": {"timeout": "5m", "onTimeout": "Skip"}}
        body = json.dumps(nowhere("drain-all", nodeMaintenance=maintenance))
        refused = allowance.kubectl_as(jane, "create", "-f", "-", stdin=body)
        assert refused.returncode != 0
        assert (
            f'The DaemonJob "drain-all" is invalid: spec.nodeMaintenance: Forbidden: user "{jane}" may not '
            "patch nodes nor create pods/eviction in all namespaces: asking for node maintenance takes the "
            "permissions to cordon and drain nodes oneself"
        ) in refused.stderr, refused.stderr
        with pytest.raises(ApiError) as info:
            kube.get(path_for(DJ_API, "daemonjobs", ns, "drain-all"))
        assert info.value.not_found
        # Olga holds them: admitted. Jane may not use hers either (a new template drains every node again).
        admitted = allowance.kubectl_as(olga, "create", "-f", "-", stdin=body)
        assert admitted.returncode == 0, admitted.stderr
        edit = allowance.kubectl_as(
            jane, "patch", "daemonjob", "drain-all", "--type=merge", "-p", '{"spec":{"maxParallel":2}}'
        )
        assert edit.returncode != 0 and f'user "{jane}" may not patch nodes' in edit.stderr, edit.stderr
        # Without node maintenance Jane is welcome, and she may give it up on Olga's DaemonJob.
        plain = allowance.kubectl_as(jane, "create", "-f", "-", stdin=json.dumps(nowhere("plain")))
        assert plain.returncode == 0, plain.stderr
        gave_up = allowance.kubectl_as(
            jane,
            "patch",
            "daemonjob",
            "drain-all",
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/spec/nodeMaintenance"}]',
        )
        assert gave_up.returncode == 0, gave_up.stderr
    finally:
        for path in cleanup:
            try:
                kube.delete(path)
            except ApiError as exc:
                if not exc.not_found:
                    raise


def test_a_grace_period_of_zero_is_refused(allowance: AllowanceBed) -> None:
    """0 would have evicted pods vanish from the API while their containers still run."""
    body = nowhere("zero", nodeMaintenance={"cordon": True, "drain": {"gracePeriodSeconds": 0}})
    with pytest.raises(ApiError) as info:
        allowance.create(allowance.allowed, body)
    assert "spec.nodeMaintenance.drain.gracePeriodSeconds" in info.value.message, info.value.message
    assert "should be greater than or equal to 1" in info.value.message, info.value.message


# -- node parameters: a read of Nodes, for who may get nodes or keys the operator allows --------
def _bind(kube: Kube, ns: str, name: str, rules: list[dict[str, Any]], users: list[str], cluster: bool) -> list[str]:
    """A Role (or ClusterRole) of `rules` bound to `users`; the paths to delete afterwards."""
    role, binding = ("clusterroles", "clusterrolebindings") if cluster else ("roles", "rolebindings")
    where = None if cluster else ns
    kube.create(path_for(RBAC, role, where), {"metadata": {"name": name}, "rules": rules})
    kube.create(
        path_for(RBAC, binding, where),
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole" if cluster else "Role",
                "name": name,
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u} for u in users],
        },
    )
    return [path_for(RBAC, binding, where, name), path_for(RBAC, role, where, name)]


def test_node_parameters_take_the_requesters_own_read_of_nodes_or_an_allowed_key(allowance: AllowanceBed) -> None:
    """Two editors of DaemonJobs; the operator allows the zone label to anyone (--node-parameter-keys);
    any other key only for the one who may get nodes; daemonjob.io/ keys for no one."""
    suffix = uuid.uuid4().hex[:6]
    jane, olga = f"jane-{suffix}", f"olga-{suffix}"
    kube = allowance.kube
    editors = [{"apiGroups": ["daemonjob.io"], "resources": ["daemonjobs"], "verbs": ["*"]}]
    cleanup = _bind(kube, allowance.allowed, f"dj-editors-{suffix}", editors, [jane, olga], cluster=False)
    reads = [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    cleanup += _bind(kube, allowance.allowed, f"node-readers-{suffix}", reads, [olga], cluster=True)
    zone = {"env": "ZONE", "fromLabel": "topology.kubernetes.io/zone"}
    rack = {"env": "RACK", "fromAnnotation": "example.com/rack"}

    def may(user: str, *check: str) -> bool:
        return allowance.kubectl_as(user, "auth", "can-i", *check).stdout.strip() == "yes"

    def create_as(user: str, name: str, *params: dict[str, str]) -> subprocess.CompletedProcess[str]:
        body = json.dumps(nowhere(name, nodeParameters=list(params)))
        return allowance.kubectl_as(user, "create", "-f", "-", stdin=body)

    try:
        wait_for(
            lambda: may(jane, "create", "daemonjobs.daemonjob.io") and may(olga, "get", "nodes"),
            30,
            "the roles to be in force",
        )
        assert not may(jane, "get", "nodes")
        zoned = create_as(jane, "zoned", zone)  # the allowed key: anyone
        assert zoned.returncode == 0, zoned.stderr
        refused = create_as(jane, "racked", zone, rack)
        assert refused.returncode != 0
        assert (
            f'The DaemonJob "racked" is invalid: spec.nodeParameters: Forbidden: user "{jane}" may not get nodes, '
            'and the controller allows no one to read the node\'s annotation "example.com/rack" (it allows: '
            "topology.kubernetes.io/zone): passing a node's labels and annotations to its Job takes the "
            "permission to read Nodes oneself"
        ) in refused.stderr, refused.stderr
        with pytest.raises(ApiError) as info:
            kube.get(path_for(DJ_API, "daemonjobs", allowance.allowed, "racked"))
        assert info.value.not_found
        # Olga may read Nodes: admitted; Jane may not edit it into a new way of showing the value.
        admitted = create_as(olga, "racked", zone, rack)
        assert admitted.returncode == 0, admitted.stderr
        edit = allowance.kubectl_as(
            jane, "patch", "daemonjob", "racked", "--type=merge", "-p", '{"spec":{"maxParallel":2}}'
        )
        assert edit.returncode != 0 and f'user "{jane}" may not get nodes' in edit.stderr, edit.stderr
        gave_up = allowance.kubectl_as(
            jane, "patch", "daemonjob", "racked", "--type=merge", "-p", json.dumps({"spec": {"nodeParameters": [zone]}})
        )
        assert gave_up.returncode == 0, gave_up.stderr
        # Another DaemonJob's record on the Node: for no one, Olga included.
        record = create_as(olga, "records", {"env": "HELD", "fromAnnotation": "daemonjob.io/maintenance"})
        assert record.returncode != 0
        assert (
            'spec.nodeParameters[0].fromAnnotation: Forbidden: "daemonjob.io/maintenance": keys under '
            "daemonjob.io/ are the controllers' records on the Node and are never passed to a Job"
        ) in record.stderr, record.stderr
    finally:
        for path in cleanup:
            try:
                kube.delete(path)
            except ApiError as exc:
                if not exc.not_found:
                    raise
