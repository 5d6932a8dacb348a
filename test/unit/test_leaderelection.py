"""The elector's fence on a fake clock against an in-memory Lease API (no cluster, no sleeps)."""

from __future__ import annotations

import copy
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from daemonjob.machinery.client.kube import JSON, ApiError
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.machinery.process.leaderelection import LeaderElector
from daemonjob.testing.waiting import wait_for

START = 1000.0  # FakeClock's default start
LEASE, DEADLINE, RETRY = 15.0, 10.0, 2.0


@dataclass
class Call:
    verb: str
    timeout: float | None
    at: float  # fake clock time when the request was made


@dataclass
class FakeLeases:
    """One Lease with the API server's resourceVersion rule; requests can be refused or held."""

    clock: FakeClock
    lease: JSON | None = None
    refuse: bool = False
    hold: set[str] = field(default_factory=set)  # verbs that wait for `gate` before answering
    gate: threading.Event = field(default_factory=threading.Event)
    held: threading.Event = field(default_factory=threading.Event)  # a request is waiting at the gate
    calls: list[Call] = field(default_factory=list)
    rv: int = 0
    before_send: float = 0.0  # the clock moves this far between a write's timeout and its send (a pause)

    def _enter(self, verb: str, timeout: float | None) -> None:
        self.calls.append(Call(verb, timeout, self.clock.now()))
        if self.refuse:
            raise ConnectionRefusedError("connection refused")
        if verb in self.hold:
            self.held.set()
            assert self.gate.wait(10), "the test never opened the gate"

    def _store(self, body: JSON) -> JSON:
        self.rv += 1
        self.lease = copy.deepcopy(body)
        self.lease.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    def get(self, path: str, *, request_timeout: float | None = None) -> JSON:
        self._enter("get", request_timeout)
        if self.lease is None:
            raise ApiError(404, "NotFound", "leases not found")
        return copy.deepcopy(self.lease)

    def _send(self, guard: Callable[[], None] | None) -> None:
        """As Kube: the guard runs again right before the first byte is sent."""
        if self.before_send:
            self.clock.step(self.before_send)
        if guard is not None:
            guard()

    def create(
        self, path: str, body: JSON, *, request_timeout: float | None = None, guard: Callable[[], None] | None = None
    ) -> JSON:
        self._send(guard)
        self._enter("create", request_timeout)
        if self.lease is not None:
            raise ApiError(409, "AlreadyExists", "exists")
        return self._store(body)

    def put(
        self, path: str, body: JSON, *, request_timeout: float | None = None, guard: Callable[[], None] | None = None
    ) -> JSON:
        self._send(guard)
        self._enter("put", request_timeout)
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        return self._store(body)

    def holder(self) -> Any:
        return (self.lease or {}).get("spec", {}).get("holderIdentity")

    def count(self, verb: str) -> int:
        return sum(1 for c in self.calls if c.verb == verb)


class Harness:
    def __init__(self, rng: random.Random | None = None, jitter: float = 0.2) -> None:
        self.clock = FakeClock()
        self.api = FakeLeases(self.clock)
        self.stopped_leading = threading.Event()
        self.leading = threading.Event()
        self.elector = LeaderElector(
            self.api,
            "ns",
            "lock",
            "me",
            lease_duration=LEASE,
            renew_deadline=DEADLINE,
            retry_period=RETRY,
            jitter=jitter,
            clock=self.clock,
            rng=rng or random.Random(0),
            on_leading=self.leading.set,
            on_stopped_leading=self.stopped_leading.set,
        )
        self.result: list[bool] = []
        self.thread = threading.Thread(target=lambda: self.result.append(self.elector.run()), daemon=True)

    def start(self) -> Harness:
        self.thread.start()
        return self

    def lead(self) -> Harness:
        """Run and take the free Lease at START; the renew loop and the fence watch then wait."""
        self.start()
        wait_for(self.leading.is_set, 5, "leadership", interval=0.01)
        self.clock.block_until_waiters(2)  # the renew loop's pause and the fence watch
        return self

    def step_to_renewal_in_flight(self) -> None:
        """Move to the first renewal (START + RETRY) and let its PUT block at the gate."""
        self.api.hold.add("put")
        self.clock.step(RETRY)
        assert self.api.held.wait(5), "no renewal was sent"

    def finish(self, timeout: float = 5.0) -> bool:
        self.api.gate.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "run() did not return"
        return self.result[0]


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.elector.stop()
    harness.api.gate.set()
    harness.thread.join(5) if harness.thread.is_alive() else None


def test_fence_lapses_at_renewal_sent_plus_deadline(h: Harness) -> None:
    h.lead()
    assert h.api.holder() == "me" and h.elector.holds_lease()
    h.api.refuse = True  # every renewal fails from now on
    h.clock.step(DEADLINE - 0.25)
    assert h.elector.holds_lease()
    assert h.elector.lease_remaining() == pytest.approx(0.25)
    h.clock.step(0.25)
    assert not h.elector.holds_lease()
    assert h.elector.lease_remaining() == 0.0
    assert h.stopped_leading.wait(5)
    assert h.finish() is False and h.elector.lost


def test_fence_counts_from_when_the_renewal_was_sent_not_returned(h: Harness) -> None:
    h.lead()
    h.step_to_renewal_in_flight()  # PUT sent at START + 2
    h.clock.step(3.0)  # it answers 3 s later
    h.api.hold.clear()
    h.api.gate.set()
    sent = START + RETRY
    wait_for(
        lambda: h.elector.lease_remaining() == pytest.approx(sent + DEADLINE - h.clock.now()),
        5,
        "the renewal to count",
        interval=0.01,
    )
    h.api.refuse = True
    h.clock.step(sent + DEADLINE - 0.25 - h.clock.now())
    assert h.elector.holds_lease()
    h.clock.step(0.25)
    assert not h.elector.holds_lease()
    assert h.stopped_leading.wait(5)


def test_slow_renewal_returning_after_the_fence_does_not_revive_it(h: Harness) -> None:
    h.lead()
    h.step_to_renewal_in_flight()  # sent at START + 2: would give a fence of START + 12
    h.clock.step(DEADLINE - RETRY + 0.5)  # the fence of the acquisition (START + 10) lapses
    assert not h.elector.holds_lease()
    assert h.stopped_leading.wait(5)  # while the renewal is still in flight
    assert h.finish() is False  # the renewal now succeeds, too late
    assert h.api.count("put") == 1 and h.api.holder() == "me"
    assert not h.elector.holds_lease() and h.elector.lost


def test_callback_fires_while_a_renewal_hangs(h: Harness) -> None:
    h.lead()
    h.api.hold.add("get")
    h.clock.step(RETRY)
    assert h.api.held.wait(5)
    h.clock.step(DEADLINE - RETRY)  # the hung GET has not returned
    assert h.stopped_leading.wait(5)
    assert h.thread.is_alive()  # run() still waits for the request
    assert h.finish() is False


def test_every_renewal_request_is_bounded_by_the_fence(h: Harness) -> None:
    h.lead()
    h.step_to_renewal_in_flight()
    h.clock.step(1.5)
    h.api.hold.clear()
    h.api.gate.set()
    wait_for(
        lambda: h.elector.lease_remaining() == pytest.approx(START + RETRY + DEADLINE - h.clock.now()),
        5,
        "the renewal to count",
        interval=0.01,
    )
    h.clock.block_until_waiters(2)
    h.clock.step(RETRY)  # second renewal at START + 5.5, fence START + 12
    wait_for(lambda: h.api.count("put") == 2, 5, "the second renewal", interval=0.01)
    renewals = [c for c in h.api.calls if c.at > START]  # after the acquisition
    assert [(c.verb, c.at, c.timeout) for c in renewals] == [
        ("get", START + 2, pytest.approx(8.0)),
        ("put", START + 2, pytest.approx(8.0)),
        ("get", START + 5.5, pytest.approx(6.5)),
        ("put", START + 5.5, pytest.approx(6.5)),
    ]
    assert all(c.timeout is not None and 0 < c.timeout <= DEADLINE for c in h.api.calls)


def test_a_renewal_whose_deadline_passes_before_it_is_sent_sends_nothing(h: Harness) -> None:
    """A pause between computing the PUT's timeout and sending it: the send-time guard stops it."""
    h.lead()
    h.api.before_send = DEADLINE  # the renewal's PUT would leave after the fence lapsed
    h.clock.step(RETRY)
    assert h.stopped_leading.wait(5)
    assert h.finish() is False
    assert h.api.count("put") == 0  # only the acquisition's create was ever sent


def test_release_after_the_fence_lapsed_sends_nothing(h: Harness) -> None:
    h.lead()
    h.api.before_send = DEADLINE  # paused between the release's check and its send
    h.elector.release()
    assert h.api.count("put") == 0 and h.api.holder() == "me"


def test_a_fractional_lease_duration_is_rounded_up_in_the_lease() -> None:
    clock = FakeClock()
    api = FakeLeases(clock)
    elector = LeaderElector(api, "ns", "lock", "me", lease_duration=2.5, renew_deadline=2, retry_period=1, clock=clock)
    thread = threading.Thread(target=elector.run, daemon=True)
    thread.start()
    try:
        wait_for(elector.holds_lease, 5, "leadership", interval=0.01)
        assert api.lease is not None and api.lease["spec"]["leaseDurationSeconds"] == 3
    finally:
        elector.stop()
        thread.join(5)


def test_release_drops_the_fence_first_and_frees_the_lease(h: Harness) -> None:
    h.lead()
    h.elector.release()
    assert not h.elector.holds_lease()
    assert h.api.holder() is None and h.api.lease["spec"]["leaseDurationSeconds"] == 1
    assert h.finish() is True
    assert not h.stopped_leading.is_set() and not h.elector.lost


def test_another_holder_seen_while_leading_ends_leadership_at_once(h: Harness) -> None:
    h.lead()
    assert h.api.lease is not None
    h.api.lease["spec"]["holderIdentity"] = "usurper"  # e.g. written by hand
    h.clock.step(RETRY)
    assert h.stopped_leading.wait(5)
    assert h.finish() is False
    assert h.api.count("put") == 0 and h.api.holder() == "usurper"


def test_standby_takes_over_only_after_lease_duration_unchanged(h: Harness) -> None:
    h.api.lease = {
        "metadata": {"name": "lock"},
        "spec": {
            "holderIdentity": "other",
            "renewTime": "t0",
            "leaseDurationSeconds": int(LEASE),
            "leaseTransitions": 3,
        },
    }
    h.api.rv = 7
    h.api.lease["metadata"]["resourceVersion"] = "7"
    h.start()
    while h.clock.now() < START + LEASE - RETRY:
        h.clock.block_until_waiters(1)
        h.clock.step(RETRY * 1.5)  # past any jitter
    assert h.api.count("put") == 0 and not h.elector.holds_lease()
    wait_for(lambda: h.clock.waiters() == 1, 5, "the candidate to wait", interval=0.01)
    h.clock.step(RETRY * 1.5)
    wait_for(h.leading.is_set, 5, "takeover", interval=0.01)
    assert h.api.holder() == "me" and h.api.lease["spec"]["leaseTransitions"] == 4


class Half(random.Random):
    def random(self) -> float:
        return 0.5


def test_candidate_retry_is_jittered_by_the_injected_random() -> None:
    h = Harness(rng=Half(), jitter=0.5)  # retry = 2 * (1 + 0.5 * 0.5) = 2.5
    h.api.lease = {
        "metadata": {"name": "lock", "resourceVersion": "1"},
        "spec": {"holderIdentity": "other", "leaseDurationSeconds": int(LEASE)},
    }
    h.start()
    try:
        h.clock.block_until_waiters(1)
        h.clock.step(2.25)
        h.clock.step(0.25)
        wait_for(lambda: h.api.count("get") == 2, 5, "the second attempt", interval=0.01)
        assert [c.at for c in h.api.calls] == [START, START + 2.5]
    finally:
        h.elector.stop()
        h.thread.join(5)


def test_bad_timings_are_refused() -> None:
    with pytest.raises(ValueError):
        LeaderElector(FakeLeases(FakeClock()), "ns", "lock", "me", lease_duration=10, renew_deadline=10)
