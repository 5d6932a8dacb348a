"""The process-wide count of nodes out of service: kept from Node events, cordons reserved under
one lock so two DaemonJobs never both take the last unit, and held DaemonJobs woken by a node
coming back (not by the clock)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from prometheus_client import generate_latest

from daemonjob import cli
from daemonjob.controller.nodework.disruption import ClusterDisruption
from daemonjob.controller.nodework.options import NodeMaintenanceOptions
from daemonjob.controller.runtime.informers import NODE_INDEXERS
from daemonjob.controller.runtime.transforms import node_transform
from daemonjob.controller.wiring.controller import Controller
from daemonjob.domain.nodework.disruption import protected_matcher
from daemonjob.domain.nodework.maintenance import Cordon
from daemonjob.domain.shared.noderecord import NodeRecord
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.builders import daemonjob, node
from daemonjob.testing.doubles.fakes import FakeInformer, FakeJobControl, fake_informers
from daemonjob.testing.doubles.nodefakes import FakeNodeControl

CONTROL_PLANE = "node-role.kubernetes.io/control-plane"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def tracker(
    nodes: list[dict[str, Any]], limit: int | str | None = 1, selector: str = CONTROL_PLANE
) -> tuple[ClusterDisruption, FakeInformer, list[str], Clock]:
    informer = FakeInformer("nodes", indexers=NODE_INDEXERS, transform=node_transform)
    woken: list[str] = []
    clock = Clock()
    t = ClusterDisruption(
        informer,
        woken.append,
        clock,
        max_unavailable=limit,
        protected=protected_matcher(selector),
        protected_selector=selector,
        ttl=60.0,
    )
    for n in nodes:
        informer.add(n)
    return t, informer, woken, clock


def cordon(name: str, dj: str = "ns-a/dj") -> Cordon:
    return Cordon(name, NodeRecord(dj, f"uid-{dj}", "rev", None, True, "2026-11-25T12:00:00Z"))


def test_nodes_cordoned_by_someone_else_and_notready_nodes_are_counted() -> None:
    t, informer, _, _ = tracker([node("a"), node("b", unschedulable=True), node("c", ready=False), node("d")], 3)
    d = t.snapshot()
    assert (d.nodes, d.unavailable, d.limit) == (4, 2, 3)
    informer.update(node("d", taints=[{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]))
    assert t.snapshot().unavailable == 3
    informer.delete("b")
    assert (t.snapshot().nodes, t.snapshot().unavailable) == (3, 2)


def test_two_daemonjobs_deciding_from_the_same_cache_never_both_take_the_last_unit() -> None:
    t, _, woken, _ = tracker([node(n) for n in "abcd"], limit=1)
    first, held = t.take("ns-a/one", [cordon("a", "ns-a/one")])
    assert [c.node for c in first] == ["a"] and not held.held
    second, held = t.take("ns-b/two", [cordon("b", "ns-b/two")])
    assert second == [] and held.over_limit == ("b",)
    assert t.snapshot().unavailable == 1 and t.snapshot().reserved == frozenset({"a"})
    assert woken == []


def test_concurrent_takes_admit_exactly_the_room() -> None:
    t, _, _, _ = tracker([node(f"n{i}") for i in range(40)], limit=3)
    taken: list[str] = []
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        barrier.wait()
        got, _ = t.take(f"ns-{i}/dj", [cordon(f"n{i}", f"ns-{i}/dj"), cordon(f"n{i + 10}", f"ns-{i}/dj")])
        taken.extend(c.node for c in got)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(taken) == 3


def test_a_reservation_ends_when_the_cache_shows_the_cordon_and_no_unit_is_counted_twice() -> None:
    t, informer, _, _ = tracker([node("a"), node("b")], limit=2)
    taken, _ = t.take("ns/dj", [cordon("a")])
    t.settle(taken, ["a"], key="ns/dj")
    assert t.snapshot().unavailable == 1
    informer.update(node("a", unschedulable=True))
    d = t.snapshot()
    assert d.unavailable == 1 and d.reserved == frozenset()


def test_a_cordon_not_written_frees_its_unit_and_wakes_the_held() -> None:
    t, _, woken, _ = tracker([node("a"), node("b")], limit=1)
    taken, _ = t.take("ns-a/one", [cordon("a", "ns-a/one")])
    _, held = t.take("ns-b/two", [cordon("b", "ns-b/two")])
    assert held.held == ("b",)
    t.settle(taken, [], key="ns-a/one")  # the write failed
    assert t.snapshot().unavailable == 0 and woken == ["ns-b/two"]


def test_a_node_coming_back_wakes_the_waiting_daemonjobs_once() -> None:
    t, informer, woken, _ = tracker([node("a", unschedulable=True), node("b")], limit=1)
    seen = t.version
    t.wait("ns/held", seen)
    informer.update(node("b", unschedulable=True))  # another node goes: no room made
    assert woken == []
    informer.update(node("a"))  # uncordoned
    assert woken == ["ns/held"]
    informer.update(node("b"))
    assert woken == ["ns/held"]  # woken once; it waits again if still held


def test_room_made_between_the_read_and_the_wait_wakes_at_once() -> None:
    t, informer, woken, _ = tracker([node("a", unschedulable=True), node("b")], limit=1)
    seen = t.version
    informer.update(node("a"))  # comes back while the pass decides
    t.wait("ns/held", seen)
    assert woken == ["ns/held"]


def test_the_last_ready_schedulable_protected_node_is_never_taken() -> None:
    cp = {CONTROL_PLANE: ""}
    t, informer, woken, _ = tracker(
        [node("cp-1", labels=cp), node("cp-2", labels=cp), node("cp-3", labels=cp, ready=False), node("w")], limit=10
    )
    assert t.snapshot().protected_up == 2
    first, _ = t.take("ns-a/one", [cordon("cp-1", "ns-a/one")])
    second, held = t.take("ns-b/two", [cordon("cp-2", "ns-b/two"), cordon("w", "ns-b/two")])
    assert [c.node for c in first] == ["cp-1"]
    assert [c.node for c in second] == ["w"] and held.protected == ("cp-2",)
    informer.update(node("cp-3", labels=cp))  # a control-plane node comes back
    assert woken == ["ns-b/two"]
    again, _ = t.take("ns-b/two", [cordon("cp-2", "ns-b/two")])
    assert [c.node for c in again] == ["cp-2"]


def test_a_reservation_the_cache_never_shows_expires() -> None:
    t, _, _, clock = tracker([node("a"), node("b")], limit=1)
    t.take("ns/dj", [cordon("a")])
    assert t.snapshot().unavailable == 1
    clock.t += 61
    assert t.snapshot().unavailable == 0


def test_no_limit_takes_everything_and_reserves_nothing() -> None:
    t, _, _, _ = tracker([node("a", unschedulable=True), node("b")], limit=None)
    taken, held = t.take("ns/dj", [cordon("b")])
    assert [c.node for c in taken] == ["b"] and not held.held
    assert t.snapshot().reserved == frozenset() and t.limit() == -1.0


def test_a_percentage_limit_follows_the_node_count() -> None:
    t, informer, _, _ = tracker([node(f"n{i}") for i in range(10)], limit="10%")
    assert t.limit() == 1.0
    informer.add(node("n10"))
    assert t.limit() == 2.0


def test_two_daemonjobs_of_two_namespaces_reconciled_before_the_cache_sees_either_cordon_take_one_unit() -> None:
    """Through the controller's passes: the second pass decides from the same Node cache as the
    first (no event delivered in between) and still cordons nothing; its next pass names the gate."""
    informers = fake_informers()
    bodies = {f"n{i}": node(f"n{i}", labels={"pool": "a" if i < 2 else "b"}) for i in range(4)}
    for body in bodies.values():
        informers.nodes.add(body)
    control = FakeNodeControl(bodies)
    ctl = Controller(
        informers,
        FakeJobControl(),
        clock=FakeClock(),
        resync_interval=0,
        node_control=control,
        node_maintenance=NodeMaintenanceOptions(frozenset({"ns-a", "ns-b"}), max_unavailable_nodes=1),
    )
    for ns, pool, uid in (("ns-a", "a", "uid-a"), ("ns-b", "b", "uid-b")):
        informers.daemonjobs.add(
            daemonjob(
                "dj",
                ns,
                uid=uid,
                maxParallel=2,
                nodeSelector={"matchLabels": {"pool": pool}},
                nodeMaintenance={"cordon": True},
            )
        )
    ctl.reconcile("ns-a/dj")
    ctl.reconcile("ns-b/dj")
    cordons = [name for name, patch in control.node_patches if (patch.get("spec") or {}).get("unschedulable")]
    assert len(cordons) == 1, control.node_patches
    decision = ctl.reconcile("ns-b/dj")
    assert decision is not None and decision.gate == "clusterDisruptionBudget"
    text = generate_latest(ctl.metrics.registry).decode()
    assert "daemonjob_cluster_unavailable_nodes 1.0" in text and "daemonjob_cluster_unavailable_nodes_limit 1.0" in text


def test_the_flags_take_a_count_or_a_percentage_and_a_selector_checked_as_read() -> None:
    read = cli.parser().parse_args
    assert read([]).max_unavailable_nodes == "10%"
    assert read([]).protected_node_selector == CONTROL_PLANE
    assert read(["--max-unavailable-nodes=3"]).max_unavailable_nodes == 3
    assert read(["--max-unavailable-nodes=25%"]).max_unavailable_nodes == "25%"
    assert read(["--protected-node-selector="]).protected_node_selector == ""
    assert protected_matcher("") is None
    matcher = protected_matcher("tier in (cp, etcd),!spare")
    assert matcher is not None and matcher({"tier": "etcd"}) and not matcher({"tier": "cp", "spare": ""})
    for bad in ("-1", "101%", "ten", "5.5"):
        with pytest.raises(SystemExit):
            read([f"--max-unavailable-nodes={bad}"])
    for bad in ("a in (", "Bad Key", "a=b c"):
        with pytest.raises(SystemExit):
            read([f"--protected-node-selector={bad}"])


def _interleavings(*actors: list[str]) -> list[list[str]]:
    """Every order of the actors' steps that keeps each actor's own order."""
    if all(not a for a in actors):
        return [[]]
    out: list[list[str]] = []
    for i, steps in enumerate(actors):
        if steps:
            rest = [list(a) for a in actors]
            rest[i] = steps[1:]
            out.extend([steps[0], *tail] for tail in _interleavings(*rest))
    return out


@pytest.mark.parametrize("event", [True, False], ids=["cache-catches-up", "cache-lags"])
def test_two_daemonjobs_taking_the_same_node_at_a_limit_of_1_never_have_two_nodes_out(event: bool) -> None:
    """Two DaemonJobs cordon the same node: each takes, writes (the API server takes the first
    write; the second finds the node held), then settles, in every interleaving, with the cordon's
    watch event arriving anywhere (or not yet). After every step a third DaemonJob wanting another
    node must be held while a cordon is on the API server: a reservation is its owner's alone,
    so the loser's settle never frees the winner's unit."""
    steps = {k: [f"{k}.take", f"{k}.write", f"{k}.settle"] for k in ("ns-a/one", "ns-b/two")}
    orders = _interleavings(steps["ns-a/one"], steps["ns-b/two"], ["event"] if event else [])
    assert len(orders) == (140 if event else 20)
    for order in orders:
        t, informer, _, _ = tracker([node("n0"), node("n1"), node("n2")], limit=1)
        api: set[str] = set()  # the nodes the API server has cordoned
        taken: dict[str, list[Cordon]] = {}
        written: dict[str, list[str]] = {}
        for step in order:
            who, _, what = step.rpartition(".")
            if step == "event":
                if "n0" in api:
                    informer.update(node("n0", unschedulable=True))
            elif what == "take":
                taken[who], _ = t.take(who, [cordon("n0", who)])
            elif what == "write":
                written[who] = [c.node for c in taken[who] if c.node not in api]
                api.update(written[who])
            else:
                t.settle(taken[who], written[who], key=who)
            third, held = t.take("ns-c/three", [cordon("n1", "ns-c/three")])
            t.settle(third, [], key="ns-c/three")  # only asked: nothing written
            assert not (api and third), f"two nodes out after {order[: order.index(step) + 1]}"
            assert t.snapshot().unavailable >= len(api), order


def test_the_owner_alone_releases_its_reservation() -> None:
    t, _, woken, _ = tracker([node("a"), node("b")], limit=1)
    mine, _ = t.take("ns-a/one", [cordon("a", "ns-a/one")])
    theirs, _ = t.take("ns-b/two", [cordon("a", "ns-b/two")])  # costs nothing: "a" is reserved
    assert [c.node for c in theirs] == ["a"]
    t.settle(theirs, [], key="ns-b/two")  # their write found the node held
    assert t.snapshot().reserved == frozenset({"a"}) and t.snapshot().unavailable == 1 and woken == []
    t.settle(mine, [], key="ns-a/one")  # and ours failed too: now the unit is free
    assert t.snapshot().reserved == frozenset() and t.snapshot().unavailable == 0


def test_three_daemonjobs_through_the_controller_a_lost_cordon_race_frees_no_unit() -> None:
    """Through the controller's passes (fakes): ns-a and ns-b both cordon n0, ns-a first; ns-b's
    pass, from the same Node cache, finds n0 held by ns-a's record and writes nothing; ns-c, still
    before the cache shows the cordon, must not cordon n1 at a limit of 1."""
    informers = fake_informers()
    bodies = {n: node(n, labels={"pool": p}) for n, p in (("n0", "shared"), ("n1", "other"), ("n2", "spare"))}
    for body in bodies.values():
        informers.nodes.add(body)
    control = FakeNodeControl(bodies)
    ctl = Controller(
        informers,
        FakeJobControl(),
        clock=FakeClock(),
        resync_interval=0,
        node_control=control,
        node_maintenance=NodeMaintenanceOptions(frozenset({"ns-a", "ns-b", "ns-c"}), max_unavailable_nodes=1),
    )
    for ns, pool in (("ns-a", "shared"), ("ns-b", "shared"), ("ns-c", "other")):
        informers.daemonjobs.add(
            daemonjob(
                "dj",
                ns,
                uid=f"uid-{ns}",
                nodeSelector={"matchLabels": {"pool": pool}},
                nodeMaintenance={"cordon": True},
            )
        )
    for ns in ("ns-a", "ns-b", "ns-c"):
        ctl.reconcile(f"{ns}/dj")
    cordoned = [n for n, body in control.nodes.items() if (body.get("spec") or {}).get("unschedulable")]
    assert cordoned == ["n0"], control.node_patches


def test_a_second_pass_finding_its_own_cordon_in_place_keeps_the_reservation() -> None:
    """A DaemonJob's next pass, from a Node cache that does not show its cordon yet, finds the
    node already carrying its record (nothing to write): the unit stays taken, and another
    DaemonJob cordons no second node at a limit of 1."""
    informers = fake_informers()
    bodies = {n: node(n, labels={"pool": p}) for n, p in (("n0", "mine"), ("n1", "other"), ("n2", "spare"))}
    for body in bodies.values():
        informers.nodes.add(body)
    control = FakeNodeControl(bodies)
    ctl = Controller(
        informers,
        FakeJobControl(),
        clock=FakeClock(),
        resync_interval=0,
        node_control=control,
        node_maintenance=NodeMaintenanceOptions(frozenset({"ns-a", "ns-c"}), max_unavailable_nodes=1),
    )
    for ns, pool in (("ns-a", "mine"), ("ns-c", "other")):
        informers.daemonjobs.add(
            daemonjob(
                "dj",
                ns,
                uid=f"uid-{ns}",
                nodeSelector={"matchLabels": {"pool": pool}},
                nodeMaintenance={"cordon": True},
            )
        )
    ctl.reconcile("ns-a/dj")
    ctl.reconcile("ns-a/dj")  # the cache still shows n0 schedulable
    ctl.reconcile("ns-c/dj")
    cordoned = [n for n, body in control.nodes.items() if (body.get("spec") or {}).get("unschedulable")]
    assert cordoned == ["n0"], control.node_patches
