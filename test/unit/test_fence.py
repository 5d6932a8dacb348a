"""The fence wired into every writer and into the process lifecycle, on stand-ins (no cluster)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from daemonjob import cli, defaults
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.runtime.events import EventRecorder
from daemonjob.controller.runtime.fence import Fence, NotLeader
from daemonjob.controller.runtime.jobcontrol import KubeJobControl
from daemonjob.controller.wiring.controller import Controller
from daemonjob.manager import EXIT_LOST_LEADERSHIP, EXIT_OK, Manager
from daemonjob.testing.doubles.fakes import FakeJobControl, fake_informers
from daemonjob.testing.waiting import wait_for


class Switch:
    """A fence predicate and lease remainder the test turns."""

    def __init__(self) -> None:
        self.held = True
        self.left = 3.5

    def holds(self) -> bool:
        return self.held

    def remaining(self) -> float:
        return self.left if self.held else 0.0


@dataclass
class RecordingKube:
    """The write methods of Kube: records each call's guard and timeout, and the fence's
    in-flight count while the call runs."""

    fence: Fence | None = None
    calls: list[tuple[str, str, dict[str, Any], int]] = field(default_factory=list)
    sent: threading.Event = field(default_factory=threading.Event)

    def _call(self, verb: str, path: str, kw: dict[str, Any]) -> dict[str, Any]:
        guard: Callable[[], None] | None = kw.get("guard")
        if guard is not None:
            guard()  # as Kube does right before sending
        self.calls.append((verb, path, kw, self.fence.in_flight() if self.fence else -1))
        self.sent.set()
        return {}

    def create(self, path: str, body: Any, **kw: Any) -> dict[str, Any]:
        return self._call("create", path, kw)

    def delete(self, path: str, body: Any = None, **kw: Any) -> dict[str, Any]:
        return self._call("delete", path, kw)

    def patch(self, path: str, body: Any, content_type: str = "", **kw: Any) -> dict[str, Any]:
        return self._call("patch", path, kw)

    def get(self, path: str, **kw: Any) -> dict[str, Any]:
        return {"metadata": {}}


OWNER = {"apiVersion": "daemonjob.io/v1alpha1", "kind": "DaemonJob", "name": "dj", "uid": "u", "controller": True}


def writes(control: KubeJobControl) -> list[Callable[[], None]]:
    return [
        lambda: control.create_job("ns", {"metadata": {"name": "j"}}),
        lambda: control.delete_job("ns", "j", "uid-1"),
        lambda: control.adopt_job("ns", "j", "uid-1", OWNER),
        lambda: control.patch_status("ns", "dj", {"desiredNodes": 1}, "42"),
    ]


# -- Fence ------------------------------------------------------------------------------------
def test_fence_closes_for_good_and_counts_writes_in_flight() -> None:
    switch = Switch()
    fence = Fence(switch.holds, switch.remaining)
    with fence.writing("x") as kw:
        assert fence.in_flight() == 1
        assert kw["request_timeout"] == 3.5
        kw["guard"]()  # still held
        switch.held = False
        with pytest.raises(NotLeader):
            kw["guard"]()  # the send-time check sees the lapse
    assert fence.in_flight() == 0 and fence.wait_idle(0)
    switch.held = True
    fence.close()
    assert not fence()
    with pytest.raises(NotLeader):
        with fence.writing("y"):
            pass
    assert fence.in_flight() == 0


def test_fence_without_a_lease_uses_the_clients_timeout() -> None:
    with Fence().writing("x") as kw:
        assert kw["request_timeout"] is None


def test_wait_idle_waits_for_the_write_in_flight() -> None:
    fence = Fence()
    inside, leave = threading.Event(), threading.Event()

    def write() -> None:
        with fence.writing("x"):
            inside.set()
            leave.wait(5)

    t = threading.Thread(target=write)
    t.start()
    assert inside.wait(5)
    assert fence.wait_idle(0.05) is False
    leave.set()
    assert fence.wait_idle(5) is True
    t.join(5)


# -- KubeJobControl -----------------------------------------------------------------------------
def test_every_write_is_guarded_and_bounded_by_the_lease() -> None:
    switch = Switch()
    fence = Fence(switch.holds, switch.remaining)
    kube = RecordingKube(fence)
    control = KubeJobControl(kube, fence=fence)
    for write in writes(control):
        write()
    assert [c[0] for c in kube.calls] == ["create", "delete", "patch", "patch"]
    assert all(kw["request_timeout"] == 3.5 and callable(kw["guard"]) for _, _, kw, _ in kube.calls)
    assert all(in_flight == 1 for *_, in_flight in kube.calls)  # counted while on the wire
    switch.held = False
    for _, _, kw, _ in kube.calls:
        with pytest.raises(NotLeader):
            kw["guard"]()


def test_no_write_is_sent_once_the_fence_is_down() -> None:
    switch = Switch()
    switch.held = False
    kube = RecordingKube()
    control = KubeJobControl(kube, fence=Fence(switch.holds, switch.remaining))
    for write in writes(control):
        with pytest.raises(NotLeader):
            write()
    assert kube.calls == [] and not control.may_write()


def test_a_plain_predicate_still_fences() -> None:
    kube = RecordingKube()
    control = KubeJobControl(kube, fence=lambda: False)
    with pytest.raises(NotLeader):
        control.create_job("ns", {"metadata": {"name": "j"}})
    assert kube.calls == []


def test_status_patch_carries_the_resource_version() -> None:
    bodies: list[Any] = []

    class Kube(RecordingKube):
        def patch(self, path: str, body: Any, content_type: str = "", **kw: Any) -> dict[str, Any]:
            bodies.append(body)
            return {}

    KubeJobControl(Kube()).patch_status("ns", "dj", {"desiredNodes": 2}, "42")
    assert bodies == [{"status": {"desiredNodes": 2}, "metadata": {"resourceVersion": "42"}}]


# -- EventRecorder ------------------------------------------------------------------------------
DJ = {
    "apiVersion": "daemonjob.io/v1alpha1",
    "kind": "DaemonJob",
    "metadata": {"name": "dj", "namespace": "ns", "uid": "u1", "resourceVersion": "1"},
}


def test_events_are_posted_through_the_fence() -> None:
    switch = Switch()
    fence = Fence(switch.holds, switch.remaining)
    kube = RecordingKube(fence)
    recorder = EventRecorder(kube, fence=fence)
    recorder.start()
    try:
        recorder.event(DJ, "Normal", "SuccessfulCreate", "one")
        assert kube.sent.wait(5)
        ((verb, path, kw, in_flight),) = kube.calls
        assert verb == "create" and path == "/api/v1/namespaces/ns/events"
        assert kw["request_timeout"] == 3.5 and in_flight == 1
        switch.held = False
        with pytest.raises(NotLeader):
            kw["guard"]()
        recorder.event(DJ, "Normal", "SuccessfulCreate", "two")  # queued after the lease is gone
    finally:
        recorder.stop()
    assert len(kube.calls) == 1


# -- Controller: stop taking keys ---------------------------------------------------------------
def test_stopping_workers_leaves_queued_keys_untaken() -> None:
    ctl = Controller(fake_informers(), FakeJobControl(), workers=1, resync_interval=0)
    taken: list[str] = []
    inside, leave = threading.Event(), threading.Event()

    def reconcile(key: str) -> None:
        taken.append(key)
        inside.set()
        leave.wait(5)

    ctl.reconcile = reconcile
    ctl.queue.add("ns/first")
    ctl.start_workers()
    try:
        assert inside.wait(5)
        ctl.queue.add("ns/second")  # queued while the first is in flight
        result: list[bool] = []
        stopper = threading.Thread(target=lambda: result.append(ctl.stop_workers(5)))
        stopper.start()
        wait_for(lambda: ctl.threads.stopping(), 5, "the stop to begin", interval=0.01)
        leave.set()
        stopper.join(5)
        assert result == [True]
        assert taken == ["ns/first"]
    finally:
        leave.set()
        ctl.stop(timeout=1)


# -- Manager ------------------------------------------------------------------------------------
class Order:
    def __init__(self) -> None:
        self.steps: list[str] = []


@dataclass
class StubController:
    order: Order
    workers: int = 1
    stop_blocks: threading.Event | None = None

    def start_informers(self) -> None:
        self.order.steps.append("informers")

    def wait_synced(self, timeout: float | None = None) -> bool:
        return True

    def start_workers(self) -> None:
        self.order.steps.append("workers")

    def stop_workers(self, timeout: float = 30.0) -> bool:
        self.order.steps.append("stop_workers")
        return True

    def stop(self, timeout: float = 30.0) -> None:
        self.order.steps.append("stop")


@dataclass
class StubEvents:
    def start(self) -> None:
        pass

    def stop(self, timeout: float = 5.0) -> None:
        pass


@dataclass
class StubElector:
    """Leads at once; ends when stopped (True) or when the test declares the loss (False)."""

    order: Order
    fence: Fence | None = None
    on_leading: Callable[[], None] | None = None
    on_stopped_leading: Callable[[], None] | None = None
    _end: threading.Event = field(default_factory=threading.Event)
    _lost: bool = False
    closed_at_release: bool | None = None
    in_flight_at_release: int | None = None

    @property
    def is_leader(self) -> bool:
        return not self._end.is_set()

    def holds_lease(self) -> bool:
        return self.is_leader

    def lease_remaining(self) -> float:
        return 2.0 if self.is_leader else 0.0

    def run(self) -> bool:
        if self.on_leading:
            threading.Thread(target=self.on_leading, daemon=True).start()
        self._end.wait()
        return not self._lost

    def lose(self) -> None:
        self._lost = True
        self._end.set()
        assert self.on_stopped_leading is not None
        self.on_stopped_leading()

    def stop(self) -> None:
        self.order.steps.append("elector.stop")
        self._end.set()

    def release(self) -> None:
        self.order.steps.append("release")
        assert self.fence is not None
        self.closed_at_release = not self.fence()
        self.in_flight_at_release = self.fence.in_flight()


def manager() -> tuple[Manager, StubElector, Order, Fence]:
    order = Order()
    elector = StubElector(order)
    fence = Fence(elector.holds_lease, elector.lease_remaining)
    elector.fence = fence
    m = Manager(StubController(order), StubEvents(), Metrics(), elector=elector, fence=fence)
    return m, elector, order, fence


def run(m: Manager) -> tuple[threading.Thread, list[int]]:
    code: list[int] = []
    t = threading.Thread(target=lambda: code.append(m.run()), daemon=True)
    t.start()
    return t, code


def test_the_elector_reports_a_loss_to_the_manager() -> None:
    m, elector, _, _ = manager()
    assert elector.on_stopped_leading == m.lost_leadership
    assert elector.on_leading == m.start_workers_when_synced


def test_sigterm_stops_workers_closes_the_fence_waits_for_writes_then_releases() -> None:
    m, elector, order, fence = manager()
    t, code = run(m)
    wait_for(lambda: "workers" in order.steps, 5, "the workers to start", interval=0.01)
    inside, leave = threading.Event(), threading.Event()

    def straggler() -> None:  # a write still on the wire when the workers' grace ends
        with fence.writing("Job create"):
            inside.set()
            leave.wait(5)

    w = threading.Thread(target=straggler)
    w.start()
    assert inside.wait(5)
    m.request_stop()
    wait_for(lambda: "stop_workers" in order.steps and not fence(), 5, "the fence to close", interval=0.01)
    assert "release" not in order.steps  # the write in flight holds the release back
    leave.set()
    t.join(5)
    w.join(5)
    assert code == [EXIT_OK]
    assert order.steps.index("stop_workers") < order.steps.index("elector.stop") < order.steps.index("release")
    assert elector.closed_at_release is True and elector.in_flight_at_release == 0


def test_lost_leadership_closes_the_fence_at_once_and_never_releases() -> None:
    m, elector, order, fence = manager()
    t, code = run(m)
    wait_for(lambda: "workers" in order.steps, 5, "the workers to start", interval=0.01)
    elector.lose()
    assert not fence()
    t.join(5)
    assert code == [EXIT_LOST_LEADERSHIP]
    assert "release" not in order.steps and "stop_workers" in order.steps


# -- flags --------------------------------------------------------------------------------------
def test_lease_timing_flags_default_to_controller_runtimes() -> None:
    args = cli.parser().parse_args([])
    assert (
        args.leader_election_lease_duration,
        args.leader_election_renew_deadline,
        args.leader_election_retry_period,
    ) == (defaults.LEASE_DURATION, defaults.RENEW_DEADLINE, defaults.RETRY_PERIOD)
    args = cli.parser().parse_args(
        [
            "--leader-election-lease-duration",
            "6",
            "--leader-election-renew-deadline",
            "4",
            "--leader-election-retry-period",
            "0.5",
        ]
    )
    assert (
        args.leader_election_lease_duration,
        args.leader_election_renew_deadline,
        args.leader_election_retry_period,
    ) == (6.0, 4.0, 0.5)


def test_inconsistent_lease_timings_end_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            "--leader-elect",
            "--leader-election-lease-duration",
            "4",
            "--leader-election-renew-deadline",
            "4",
            "--kubeconfig",
            "/nonexistent",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "--leader-election-renew-deadline" in err
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--leader-election-retry-period", "0"])
