"""The real controller loop on the in-memory API server, its Job watch held back past the
expectations' TTL: no Job is created twice, creates are held within the bound, and every
DaemonJob completes."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from daemonjob import defaults
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.runtime.events import EventRecorder
from daemonjob.controller.runtime.expectations import Expectations
from daemonjob.controller.wiring.controller import Controller
from daemonjob.machinery.process.clock import RealClock
from daemonjob.manager import Manager
from daemonjob.testing.doubles.builders import daemonjob
from daemonjob.testing.sim.memapi import MemKube, MemStream, Watches
from daemonjob.testing.sim.simcluster import SimCluster

NODES, DJS = 20, 3
TTL, DEADLINE = 0.5, 0.2  # seconds: the watch is held back far longer


class _LateQueue:
    """A watch stream's queue whose events are read `delay` seconds after they were sent."""

    def __init__(self, delay: float) -> None:
        self._q: queue.SimpleQueue[tuple[float, Any]] = queue.SimpleQueue()
        self.delay = delay

    def put(self, item: Any) -> None:
        self._q.put((time.monotonic() + self.delay, item))

    def get(self) -> Any:
        due, item = self._q.get()
        if item is not None:
            time.sleep(max(0.0, due - time.monotonic()))
        return item

    def qsize(self) -> int:
        return self._q.qsize()


def hold_back(watches: Watches, delay: float) -> None:
    """Every watch of this resource opened from now on delivers each event `delay` seconds late."""
    plain = watches.open

    def open_late(namespace: str | None, since: int, decode: Any) -> MemStream:
        stream = plain(namespace, since, decode)
        late = _LateQueue(delay)
        while stream.backlog():
            late.put(stream._queue.get())
        stream._queue = late  # type: ignore[assignment]
        return stream

    watches.open = open_late  # type: ignore[method-assign]


class Run:
    def __init__(self, delay: float) -> None:
        self.sim = SimCluster(NODES, job_seconds=0.2, start_seconds=0.05)
        hold_back(self.sim.watches["jobs"], delay)
        kube = MemKube(self.sim)
        clock = RealClock()
        metrics = Metrics()
        events = EventRecorder(kube, host="sim", clock=clock)  # type: ignore[arg-type]
        expectations = Expectations(ttl=TTL, timer=clock.now, deadline=DEADLINE)
        self.ctl = Controller.for_kube(kube, metrics=metrics, events=events, clock=clock, expectations=expectations)  # type: ignore[arg-type]
        self.manager = Manager(self.ctl, events, metrics)
        self.runner = threading.Thread(target=self.manager.run, name="manager", daemon=True)

    def roll_out(self, timeout: float = 60.0) -> list[str]:
        self.sim.start()
        self.runner.start()
        keys = []
        for i in range(DJS):
            self.sim.add_daemonjob(daemonjob(f"lag-{i}", "ops", uid=f"00000000-0000-4000-9000-{i:012d}"))
            keys.append(f"ops/lag-{i}")
        done = self.sim.wait(
            lambda: self.sim.finished >= NODES * DJS and all(self.sim.complete(k) for k in keys), timeout
        )
        assert done, f"{self.sim.created} created, {self.sim.finished} finished of {NODES * DJS}"
        return keys

    def stop(self) -> None:
        self.manager.request_stop()
        self.runner.join(30)
        self.sim.stop()


@pytest.fixture
def fast_rechecks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(defaults, "EXPECTATIONS_RECHECK", DEADLINE)


@pytest.fixture
def run(fast_rechecks: None) -> Iterator[Run]:
    r = Run(delay=6 * TTL)
    yield r
    r.stop()


def test_a_job_watch_behind_past_the_ttl_never_creates_a_job_twice(run: Run) -> None:
    run.roll_out()
    assert run.sim.duplicates == 0, "creates answered AlreadyExists"
    assert run.sim.created == NODES * DJS


@pytest.fixture
def bounded(fast_rechecks: None) -> Iterator[Run]:
    r = Run(delay=TTL)
    r.ctl.backpressure.limit, r.ctl.backpressure.resume = 8, 4
    yield r
    r.stop()


def test_creates_are_held_within_the_bound_and_every_rollout_completes(bounded: Run) -> None:
    exp, bp = bounded.ctl.expectations, bounded.ctl.backpressure
    most, held = [0], [0]
    plain_answered, plain_admit = exp.create_answered, bp.admit

    def answered(key: str, name: str) -> None:
        plain_answered(key, name)
        most[0] = max(most[0], exp.unseen_creates())

    def admit(key: str, wanted: int, ready: int | None = None) -> int:
        room = plain_admit(key, wanted, ready)
        held[0] += wanted - room
        return room

    exp.create_answered = answered  # type: ignore[method-assign]
    bp.admit = admit  # type: ignore[method-assign]
    bounded.roll_out()
    assert bounded.sim.duplicates == 0 and bounded.sim.created == NODES * DJS
    assert held[0] > 0, "the bound held creates back"
    assert most[0] <= 8, "never more creates unseen than the bound"
    assert bp.held() == 0 and exp.unseen_creates() == 0
