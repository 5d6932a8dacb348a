"""Building blocks of the end-to-end suite: DaemonJob bodies, polling, the controller as a
process, and a handle on a controller deployed in another cluster. The Job watcher and the
readers of Job state live in `daemonjob.testing.sim.jobwatch` (the integration tests use them
too) and are re-exported here.

Tests import this module by name (e2e/conftest.py puts this directory on sys.path); the
fixtures that wire it to a cluster live in e2e/conftest.py.
"""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from daemonjob.machinery.client.kube import PATCH_MERGE, ApiError, Kube, path_for
from daemonjob.testing import process, waiting
from daemonjob.testing.doubles import builders
from daemonjob.testing.prom import metric_value
from daemonjob.testing.sim.jobwatch import (  # noqa: F401 - re-exported for the tests
    ANNOTATION_NODE,
    LABEL_NAME,
    LABEL_REVISION,
    LABEL_RUN,
    LABEL_TEMPLATE_HASH,
    Created,
    JobWatcher,
    condition,
    is_true,
    job_active,
    job_finished,
    job_node,
    job_revision,
    job_run,
)

GROUP_VERSION = "daemonjob.io/v1alpha1"
PLURAL = "daemonjobs"
ANNOTATION_RUN_NOW = "daemonjob.io/run-now"
SIM_EXIT_CODE = "sim.daemonjob.io/exit-code"
SIM_DURATION = "sim.daemonjob.io/duration"
GROUP_LABEL = "e2e.daemonjob.io/group"
RERUN_ANNOTATION = "e2e.daemonjob.io/rerun"
CONTROLLER_NS = "daemonjob-system"
IMAGE = "busybox:1.36"
# Against a cluster where the controller is deployed (`make deploy`), not a local process.
EXTERNAL = os.environ.get("DAEMONJOB_E2E_EXTERNAL") == "1"

Nodes = Callable[..., list[str]]  # the `nodes` fixture: nodes(count, **NodeSpec fields) -> names
T = TypeVar("T")


# -- DaemonJob bodies -------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """A real busybox command and the simulated kubelet's annotations that mirror it."""

    command: tuple[str, ...]
    exit_code: int = 0
    duration: float = 1

    def annotations(self) -> dict[str, str]:
        return {SIM_EXIT_CODE: str(self.exit_code), SIM_DURATION: f"{self.duration:g}"}


OK = Workload(("sh", "-c", "echo ok"))
FAIL = Workload(("sh", "-c", "exit 3"), exit_code=3)


def sleep(seconds: int) -> Workload:
    return Workload(("sleep", str(seconds)), duration=seconds)


def daemonjob(
    name: str,
    group: str,
    workload: Workload = OK,
    *,
    backoff_limit: int | None = None,
    pod_spec: Mapping[str, Any] | None = None,
    job_spec: Mapping[str, Any] | None = None,
    container: Mapping[str, Any] | None = None,
    node_selector: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A DaemonJob whose spec.nodeSelector selects only the nodes labelled with `group`.

    A failing workload gets backoffLimit 0 unless told otherwise: the Job controller would
    otherwise retry it with backoffs far longer than a test.
    """
    if backoff_limit is None and workload.exit_code != 0:
        backoff_limit = 0
    template = builders.job_template(
        backoff_limit=None,
        pod_annotations=workload.annotations(),
        container={"name": "main", "image": IMAGE, "command": list(workload.command), **(container or {})},
        pod_spec=dict(pod_spec or {}),
    )
    template["spec"].update(job_spec or {})
    if backoff_limit is not None:
        template["spec"]["backoffLimit"] = backoff_limit
    selector = dict(node_selector) if node_selector is not None else {"matchLabels": {GROUP_LABEL: group}}
    return builders.daemonjob(name, manifest=True, template=template, nodeSelector=selector, **spec)


def with_workload(body: Mapping[str, Any], workload: Workload) -> dict[str, Any]:
    """`body` with its container command and simulated outcome replaced."""
    out = copy.deepcopy(dict(body))
    jspec = out["spec"]["jobTemplate"]["spec"]
    jspec["template"]["metadata"]["annotations"].update(workload.annotations())
    jspec["template"]["spec"]["containers"][0]["command"] = list(workload.command)
    if workload.exit_code != 0:
        jspec.setdefault("backoffLimit", 0)
    return out


# -- polling ----------------------------------------------------------------------------------
def wait_for(
    predicate: Callable[[], T],
    timeout: float = 90.0,
    what: str = "condition",
    interval: float = 0.25,
    describe: Callable[[], Any] | None = None,
) -> T:
    """The shared poller with the suite's longer default timeout."""
    return waiting.wait_for(predicate, timeout, what, interval, describe)


holds = waiting.holds


@dataclass
class Cluster:
    """One test's view of the API: its namespace, typed helpers, nothing cached."""

    kube: Kube
    namespace: str

    # DaemonJobs
    def dj_path(self, name: str | None = None, subresource: str | None = None) -> str:
        return path_for(GROUP_VERSION, PLURAL, self.namespace, name, subresource)

    def apply(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create the DaemonJob, or replace the spec of an existing one."""
        fresh = {
            "apiVersion": GROUP_VERSION,
            "kind": "DaemonJob",
            "metadata": {"name": body["metadata"]["name"]},
            "spec": copy.deepcopy(body["spec"]),
        }
        try:
            return self.kube.create(self.dj_path(), fresh)
        except ApiError as exc:
            if not exc.already_exists:
                raise
        for _ in range(10):
            current = self.kube.get(self.dj_path(body["metadata"]["name"]))
            current["spec"] = copy.deepcopy(body["spec"])
            try:
                return self.kube.put(self.dj_path(body["metadata"]["name"]), current)
            except ApiError as exc:
                if not exc.conflict:
                    raise
        raise AssertionError(f"could not update DaemonJob {body['metadata']['name']}: conflicts")

    def patch(self, name: str, spec_patch: Mapping[str, Any]) -> dict[str, Any]:
        """JSON merge patch of the spec (None removes a field)."""
        return self.kube.patch(self.dj_path(name), {"spec": spec_patch}, content_type=PATCH_MERGE)

    def rerun(self, name: str, value: str) -> dict[str, Any]:
        """Edit an annotation of jobTemplate: the documented way to re-run every node."""
        return self.patch(name, {"jobTemplate": {"metadata": {"annotations": {RERUN_ANNOTATION: value}}}})

    def run_now(self, name: str, value: str) -> dict[str, Any]:
        """Set the run-now annotation, as `kubectl annotate --overwrite` does: a new value starts a run."""
        return self.kube.patch(
            self.dj_path(name), {"metadata": {"annotations": {ANNOTATION_RUN_NOW: value}}}, content_type=PATCH_MERGE
        )

    def get(self, name: str) -> dict[str, Any]:
        return self.kube.get(self.dj_path(name))

    def status(self, name: str) -> dict[str, Any]:
        return self.get(name).get("status") or {}

    def delete(self, name: str) -> None:
        self.kube.delete(self.dj_path(name))

    def wait_status(
        self, name: str, predicate: Callable[[dict[str, Any]], Any], what: str, timeout: float = 90.0
    ) -> dict[str, Any]:
        """Wait until predicate(DaemonJob) holds for a status of the current generation."""
        last: dict[str, Any] = {}

        def check() -> dict[str, Any] | None:
            nonlocal last
            last = self.get(name)
            current = last.get("status", {}).get("observedGeneration") == last["metadata"]["generation"]
            return last if current and predicate(last) else None

        return wait_for(check, timeout, f"{name}: {what}", describe=lambda: last.get("status"))

    def wait_complete(self, name: str, desired: int, timeout: float = 90.0) -> dict[str, Any]:
        return self.wait_status(
            name,
            lambda dj: is_true(dj, "Complete") and dj["status"].get("desiredNodes") == desired,
            f"Complete=True on {desired} nodes",
            timeout,
        )

    # Jobs
    def jobs(self, name: str) -> list[dict[str, Any]]:
        items = self.kube.get(path_for("batch/v1", "jobs", self.namespace), labelSelector=f"{LABEL_NAME}={name}")[
            "items"
        ]
        return sorted(items, key=lambda j: (job_node(j), j["metadata"]["creationTimestamp"], j["metadata"]["name"]))

    def jobs_by_node(self, name: str) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for job in self.jobs(name):
            out.setdefault(job_node(job), []).append(job)
        return out

    def job_nodes(self, name: str) -> list[str]:
        return sorted(job_node(j) for j in self.jobs(name))

    def delete_job(self, job_name: str) -> None:
        self.kube.delete(path_for("batch/v1", "jobs", self.namespace, job_name), {"propagationPolicy": "Background"})

    def pods(self, job_name: str) -> list[dict[str, Any]]:
        return self.kube.get(path_for("v1", "pods", self.namespace), labelSelector=f"job-name={job_name}")["items"]

    def events(self, name: str) -> list[dict[str, Any]]:
        return self.kube.get(
            path_for("v1", "events", self.namespace),
            fieldSelector=f"involvedObject.kind=DaemonJob,involvedObject.name={name}",
        )["items"]

    def wait_event(
        self, name: str, predicate: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60.0
    ) -> dict[str, Any]:
        found: list[dict[str, Any]] = []

        def check() -> dict[str, Any] | None:
            found[:] = self.events(name)
            return next((e for e in found if predicate(e)), None)

        return wait_for(
            check,
            timeout,
            f"event on {name}: {what}",
            describe=lambda: [(e.get("type"), e.get("reason"), e.get("message")) for e in found],
        )

    # Nodes
    def patch_node(self, node: str, body: Mapping[str, Any]) -> None:
        self.kube.patch(path_for("v1", "nodes", name=node), dict(body), content_type=PATCH_MERGE)

    def node(self, node: str) -> dict[str, Any]:
        return self.kube.get(path_for("v1", "nodes", name=node))


# -- the controller as a local process -------------------------------------------------------
def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# Leader election timings of the test's controller, shorter than the defaults (15, 10, 2 s):
# a process started after a SIGKILL waits out its predecessor's lease, about ten times in the
# suite. The renew deadline keeps a margin over a slow API server on a busy machine (the
# leader faults' tests, which measure these timings, run with 6, 4 and 1 s).
LEASE_TIMINGS = (
    "--leader-election-lease-duration=8",
    "--leader-election-renew-deadline=6",
    "--leader-election-retry-period=1",
)


class ControllerProcess(process.ControllerProcess):
    """The controller for one namespace, as the manifests run it: leader election on (with
    shorter timings), JSON logs."""

    def __init__(self, kubeconfig: Path, namespace: str, log_path: Path, extra_args: Sequence[str] = ()):
        self.namespace = namespace
        self.lease = f"dj-{namespace}"
        super().__init__(
            kubeconfig,
            log_path,
            "--namespace",
            namespace,
            "--leader-elect",
            "--leader-election-namespace",
            CONTROLLER_NS,
            "--leader-election-id",
            self.lease,
            "--log-format",
            "json",
            *LEASE_TIMINGS,
            *extra_args,
        )

    def start(self, wait: bool = True) -> ControllerProcess:
        super().start(wait)
        return self

    def alive(self) -> bool:
        return self.running()

    def wait_leader(self, timeout: float = 60.0) -> None:
        wait_for(
            lambda: metric_value(self.metrics(), "daemonjob_leader") == 1.0,
            timeout,
            "the controller to lead",
            interval=0.3,
        )

    def restart(self, wait: bool = True) -> ControllerProcess:
        if self.running():
            self.terminate()
        return self.start(wait=wait)

    def metrics(self) -> str:
        return self.metrics_text()

    def health(self, path: str = "/healthz") -> int:
        return self.get(self.health_port, path)[0]

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


_METRICS_READER_BINDING = f"""\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: daemonjob-e2e-metrics-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: daemonjob-metrics-reader}}
subjects: [{{kind: ServiceAccount, name: daemonjob-controller, namespace: {CONTROLLER_NS}}}]
"""
_READ_OWN_METRICS = (
    "import ssl, urllib.request\n"
    "token = open('/var/run/secrets/kubernetes.io/serviceaccount/token').read()\n"
    "req = urllib.request.Request('https://127.0.0.1:8443/metrics', headers={'Authorization': 'Bearer ' + token})\n"
    "print(urllib.request.urlopen(req, context=ssl._create_unverified_context(), timeout=10).read().decode())\n"
)


class DeployedController:
    """The controller `make deploy` runs in an external cluster, behind the same interface.

    Liveness is its leader Lease being renewed; kill() deletes its pods (the Deployment
    replaces them, SIGKILL as a forced delete); metrics() and tail() read the leader pod
    through the API server.
    """

    selector = "app.kubernetes.io/name=daemonjob-controller"
    lease = "daemonjob-controller"

    def __init__(self, kube: Kube, kubectl: Callable[..., subprocess.CompletedProcess[str]]):
        self.kube = kube
        self.kubectl = kubectl
        self.log_path = Path("(in-cluster)")
        self._reader_bound = False

    def _lease(self) -> dict[str, Any]:
        try:
            return self.kube.get(path_for("coordination.k8s.io/v1", "leases", CONTROLLER_NS, self.lease))
        except ApiError as exc:
            if exc.not_found:
                return {}
            raise

    def _leader_pod(self) -> str:
        return (self._lease().get("spec", {}).get("holderIdentity") or "").rsplit("_", 1)[0]

    def _renewing(self, within: float) -> bool:
        """Whether a holder renews the Lease within `within` seconds (the retry period is 2 s)."""
        first = self._lease().get("spec", {})
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = self._lease().get("spec", {})
            if now.get("holderIdentity") and now.get("renewTime") != first.get("renewTime"):
                return True
        return False

    def start(self, wait: bool = True) -> DeployedController:
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 120.0) -> None:
        wait_for(lambda: self._renewing(5.0), timeout, "the deployed controller to lead", interval=0.5)

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 60.0) -> int | None:
        grace = ["--grace-period=0", "--force"] if sig == signal.SIGKILL else []
        self.kubectl("delete", "pod", "-n", CONTROLLER_NS, "-l", self.selector, "--wait=false", *grace)
        return None

    def restart(self, wait: bool = True) -> DeployedController:
        return self.start(wait=wait)

    def stop(self) -> None:
        return None

    def alive(self) -> bool:
        return self._renewing(8.0)

    def metrics(self) -> str:
        """The leader's /metrics as its own ServiceAccount reads them inside the pod: the deployed
        controller serves them over HTTPS with TokenReview/SubjectAccessReview, and the API
        server's pod proxy carries no caller token, so the account is bound to the reader role."""
        if not self._reader_bound:
            self.kubectl("apply", "-f", "-", stdin=_METRICS_READER_BINDING)
            self._reader_bound = True
        return self.kubectl(
            "exec", "-n", CONTROLLER_NS, self._leader_pod(), "--", "python", "-c", _READ_OWN_METRICS
        ).stdout

    def tail(self, lines: int = 60) -> str:
        try:
            return self.kubectl("logs", "-n", CONTROLLER_NS, self._leader_pod(), f"--tail={lines}", check=False).stdout
        except Exception as exc:
            return f"(no log: {exc})"
