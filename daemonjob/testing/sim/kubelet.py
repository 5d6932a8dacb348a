"""A simulated kubelet for many nodes at once, in the spirit of kwok.

One pod watch serves every node; one timer thread and a small pool of writers do the rest,
so thousands of nodes cost a few threads. Pods bound to its nodes go Pending -> Running ->
Succeeded/Failed, as chosen by their annotations:

- `sim.daemonjob.io/exit-code`: the container's exit code (default 0; non-zero ends the pod
  Failed with a terminated container status carrying that code);
- `sim.daemonjob.io/duration`: seconds spent Running (default 1); at 0 the pod goes from
  Pending straight to its end, in one status write;
- `sim.daemonjob.io/output`: what the container prints, served by the kubelet log endpoint
  (`{node}` stands for the node's name, so one template gives per-node output);
- `sim.daemonjob.io/failure-output`: what it prints instead where it exits non-zero (on the
  fail-on nodes, say), so its log agrees with its exit code and message;
- `sim.daemonjob.io/message`: the container's termination message (`{node}` as above);
- `sim.daemonjob.io/messages`: a JSON object of node name to message, over the one above;
- `sim.daemonjob.io/reason`: the terminated container's reason (e.g. OOMKilled, whose exit
  code is 137 unless the exit-code annotation says otherwise);
- `sim.daemonjob.io/fail-on`: comma-separated node names; when set, exit-code (default 1
  here), reason and message apply on these nodes only and the container succeeds elsewhere;
- `sim.daemonjob.io/fail-attempts`: comma-separated attempts (the pod's `daemonjob.io/attempt`
  label, 0 without it); as fail-on, for these attempts only (a node failing twice, then not);
- `sim.daemonjob.io/image-pull: Never`: the image is never pulled; the pod stays Pending with
  an ImagePullBackOff container until it is deleted;
- `sim.daemonjob.io/ready: "false"`: the running pod is never Ready;
- `sim.daemonjob.io/reboot`: at the end of its duration the pod reboots its node (down for
  the value: "20s", "1m", "never"), as simreboot.py says; `sim.daemonjob.io/unready-after-reboot:
  "true"`: a pod restarted by a reboot stays not Ready; `sim.daemonjob.io/stay-down-on`: nodes the
  reboot never brings back. `reboot(name, seconds)` reboots a node; `reboots[name]` counts them.
Nodes carry InternalIP 127.0.0.1 and the log server's port as kubelet endpoint: `kubectl logs` works.

Pods being deleted are confirmed at once (grace period 0), as a kubelet does after the containers
stop. A node's health is its Lease in kube-node-lease, renewed every `heartbeat_interval`;
`stop_heartbeat(name)` lets the node lifecycle controller turn it NotReady.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import structlog

from daemonjob.machinery.cache.informer import Handlers, Informer
from daemonjob.machinery.client.kube import PATCH_STRATEGIC, ApiError, Kube, path_for
from daemonjob.testing.sim.kubelet_logs import LogServer
from daemonjob.testing.sim.podlife import PodLife
from daemonjob.testing.sim.simnode import (
    LABEL_MANAGED,
    NODE_ADDRESS,
    NOT_READY_TAINT,
    NodeSpec,
    node_body,
    node_conditions,
    node_is_ready,
    renew_lease,
    wait_nodes_ready,
)
from daemonjob.testing.sim.simpod import (
    ANNOTATION_DURATION,
    ANNOTATION_EXIT_CODE,
    ANNOTATION_FAIL_ON,
    ANNOTATION_MESSAGE,
    ANNOTATION_OUTPUT,
    ANNOTATION_REASON,
    now_rfc3339,
    pod_transform,
    sim_duration,
    sim_exit_code,
)
from daemonjob.testing.sim.simreboot import down_conditions, new_boot_id, status_after_restart
from daemonjob.testing.sim.timers import Timers

# The test bed's kubelet API, where the tests import it from.
__all__ = [
    "ANNOTATION_DURATION",
    "ANNOTATION_EXIT_CODE",
    "ANNOTATION_FAIL_ON",
    "ANNOTATION_MESSAGE",
    "ANNOTATION_OUTPUT",
    "ANNOTATION_REASON",
    "LABEL_MANAGED",
    "NODE_ADDRESS",
    "NOT_READY_TAINT",
    "NodeSpec",
    "SimKubelet",
    "node_body",
    "node_conditions",
    "node_is_ready",
    "now_rfc3339",
    "sim_duration",
    "sim_exit_code",
]

log = structlog.get_logger("daemonjob.sim")


class SimKubelet(PodLife):
    """Registers nodes, keeps them healthy, and runs the pods bound to them."""

    def __init__(
        self,
        kube: Kube,
        *,
        heartbeat_interval: float = 2.0,
        writers: int = 16,
        lease_duration: int = 40,
        clear_not_ready_taint: bool = False,
        status_every: int = 5,
    ):
        self.kube = kube
        self.heartbeat_interval = heartbeat_interval
        self.lease_duration = lease_duration
        self.status_every = status_every
        self.clear_not_ready_taint = clear_not_ready_taint
        self.nodes: dict[str, NodeSpec] = {}
        self.silenced: set[str] = set()
        self.down: set[str] = set()  # rebooting: no status, no Lease, no pod started or ended
        self.reboots: Counter[str] = Counter()
        self._boots: Counter[str] = Counter()  # a pod's end scheduled in an earlier boot never comes
        self._pods_seen: dict[str, str] = {}  # pod uid -> stage already scheduled
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=writers, thread_name_prefix="sim-writer")
        self._timers = Timers()
        self._stopped = threading.Event()
        self._pods = Informer(
            kube, "v1", "pods", field_selector="spec.nodeName!=", name="sim-pods", transform=pod_transform
        )
        self._pods.add_handlers(
            Handlers(on_add=self._on_pod, on_update=lambda _o, n: self._on_pod(n), on_delete=self._on_pod_gone)
        )
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, name="sim-heartbeat", daemon=True)
        self._logs = LogServer(self._find_pod)
        self.kubelet_port = self._logs.port

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._timers.start()
        self._logs.start()
        self._pods.start()
        self._heartbeat.start()
        self._pods.wait_for_sync(30)

    def stop(self) -> None:
        self._stopped.set()
        self._pods.stop()
        self._timers.stop()
        self._logs.stop()
        self._heartbeat.join(5)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> SimKubelet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- nodes -----------------------------------------------------------------------------
    def add_nodes(self, specs: Iterable[NodeSpec]) -> None:
        """Register nodes (concurrently); returns once every Node and Lease exists."""
        specs = list(specs)
        with self._lock:
            for s in specs:
                self.nodes[s.name] = s
        list(self._pool.map(self._register, specs))

    def delete_node(self, name: str) -> None:
        with self._lock:
            self.nodes.pop(name, None)
            self.silenced.discard(name)
        try:
            self.kube.delete(path_for("v1", "nodes", name=name))
        except ApiError as exc:
            if not exc.not_found:
                raise

    def stop_heartbeat(self, name: str) -> None:
        with self._lock:
            self.silenced.add(name)

    def resume_heartbeat(self, name: str) -> None:
        with self._lock:
            self.silenced.discard(name)
        self._renew(name)
        self._report_ready(name, transition=True)

    def reboot(self, name: str, downtime: float | None) -> None:
        """Node `name` down, back Ready with a new boot ID after `downtime` s (None: never): simreboot.py."""
        with self._lock:
            if name in self.down or name not in self.nodes:
                return
            self.down.add(name)
            self.silenced.add(name)
            self._boots[name] += 1
        log.info("node rebooting", node=name, downtime=downtime)
        self.kube.patch(
            path_for("v1", "nodes", name=name, subresource="status"),
            {"status": {"conditions": down_conditions()}},
            content_type=PATCH_STRATEGIC,
        )
        if downtime is not None:
            self._timers.at(time.monotonic() + downtime, lambda: self._pool.submit(self._come_back, name))

    def _come_back(self, name: str) -> None:
        spec = self.nodes.get(name)
        if spec is None or self._stopped.is_set():
            return
        spec.boot_id = new_boot_id()
        self.kube.patch(
            path_for("v1", "nodes", name=name, subresource="status"),
            {"status": {"conditions": node_conditions(), "nodeInfo": {"bootID": spec.boot_id}}},
            content_type=PATCH_STRATEGIC,
        )
        with self._lock:
            self.down.discard(name)
            self.silenced.discard(name)
            self.reboots[name] += 1
        self._renew(name)
        log.info("node back", node=name, boot_id=spec.boot_id)
        for pod in list(self._pods.store.list()):
            if pod["spec"].get("nodeName") != name or pod["metadata"].get("deletionTimestamp"):
                continue
            phase = pod["status"].get("phase") or "Pending"
            if phase == "Running":
                self._patch_pod_status(pod, status_after_restart(pod))
            elif phase == "Pending":
                self._start_pod(pod)

    def wait_ready(self, names: Iterable[str] | None = None, timeout: float = 120.0) -> None:
        """Until every named node is Ready and carries no not-ready taint."""
        wait_nodes_ready(self.kube, set(names if names is not None else self.nodes), timeout)

    def _register(self, spec: NodeSpec) -> None:
        body = node_body(spec, self.kubelet_port)
        try:
            self.kube.create(path_for("v1", "nodes"), body)
        except ApiError as exc:
            if not exc.already_exists:
                raise
            self.kube.patch(path_for("v1", "nodes", name=spec.name, subresource="status"), {"status": body["status"]})
        if self.clear_not_ready_taint:
            self.kube.patch(path_for("v1", "nodes", name=spec.name), {"spec": {"taints": spec.taints or None}})
        self._renew(spec.name, create=True)

    def _report_ready(self, name: str, transition: bool = False) -> None:
        spec = self.nodes.get(name)
        if spec is not None:
            self.kube.patch(
                path_for("v1", "nodes", name=name, subresource="status"),
                {"status": {"conditions": node_conditions(transition)}},
                content_type=PATCH_STRATEGIC,
            )

    def _renew(self, name: str, create: bool = False) -> None:
        renew_lease(self.kube, name, self.lease_duration, name in self.nodes)

    def _beat(self, name: str, with_status: bool) -> None:
        self._renew(name)
        if with_status:
            self._report_ready(name)

    def _heartbeat_loop(self) -> None:
        """Leases every beat; Ready status every `status_every` beats, as a kubelet reports it.

        The node lifecycle controller marks a node Unknown when beats are late (a loaded
        machine) but never marks it Ready again: only the kubelet's status report does.
        """
        for beat in itertools.count(1):
            if self._stopped.wait(self.heartbeat_interval):
                return
            with_status = beat % self.status_every == 0
            with self._lock:
                names = [n for n in self.nodes if n not in self.silenced]
            futures = [self._pool.submit(self._beat, n, with_status) for n in names]
            for f in futures:
                try:
                    f.result()
                except Exception as exc:  # a transient failure only delays one beat
                    log.debug("heartbeat failed", error=str(exc))

    # -- pods ------------------------------------------------------------------------------
