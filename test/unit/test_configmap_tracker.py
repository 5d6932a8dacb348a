"""Watches of single referenced ConfigMaps: started with the first reference, stopped with the last."""

from __future__ import annotations

from daemonjob.controller.runtime.configmaps import ConfigMapTracker
from daemonjob.testing.doubles.fakes import FakeInformer


def cm(name: str, data: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ops"}, "data": {"script.sh": data}}


def make_tracker() -> tuple[ConfigMapTracker, dict[tuple[str, str], FakeInformer], list[str]]:
    made: dict[tuple[str, str], FakeInformer] = {}
    woken: list[str] = []

    def factory(namespace: str, name: str) -> FakeInformer:
        made[(namespace, name)] = FakeInformer(f"configmap-{name}")
        return made[(namespace, name)]

    return ConfigMapTracker(factory, woken.append), made, woken


def test_one_watch_per_referenced_configmap_shared_by_its_users() -> None:
    tracker, made, woken = make_tracker()
    tracker.track("ops/a", "ops", ["script"])
    tracker.track("ops/b", "ops", ["script", "other"])
    assert sorted(made) == [("ops", "other"), ("ops", "script")]
    assert all(inf.started for inf in made.values())
    made[("ops", "script")].add(cm("script", "echo 1"))
    assert sorted(woken) == ["ops/a", "ops/b"]
    woken.clear()
    made[("ops", "other")].add(cm("other", "x"))
    assert woken == ["ops/b"]
    assert tracker.get("ops", "script") == (True, made[("ops", "script")].store.get("ops/script"))


def test_the_last_user_gone_stops_the_watch() -> None:
    tracker, made, woken = make_tracker()
    tracker.track("ops/a", "ops", ["script"])
    tracker.track("ops/b", "ops", ["script"])
    tracker.forget("ops/a")
    assert made[("ops", "script")].started and tracker.watched() == 1
    tracker.track("ops/b", "ops", [])
    assert not made[("ops", "script")].started and tracker.watched() == 0
    assert tracker.get("ops", "script") == (False, None)


def test_a_missing_configmap_reads_as_synced_and_absent() -> None:
    tracker, made, _ = make_tracker()
    tracker.track("ops/a", "ops", ["nope"])
    assert tracker.get("ops", "nope") == (True, None)


def limited(
    per_daemonjob: int, total: int, per_namespace: int = 1000
) -> tuple[ConfigMapTracker, dict[tuple[str, str], FakeInformer], list[str]]:
    from daemonjob.controller.runtime.configmaps import ConfigMapLimits

    made: dict[tuple[str, str], FakeInformer] = {}
    woken: list[str] = []

    def factory(namespace: str, name: str) -> FakeInformer:
        made[(namespace, name)] = FakeInformer(f"configmap-{name}")
        return made[(namespace, name)]

    return ConfigMapTracker(factory, woken.append, ConfigMapLimits(per_daemonjob, total, per_namespace)), made, woken


def test_a_daemonjob_past_the_per_daemonjob_cap_gets_no_watch_and_a_reason_naming_the_cap() -> None:
    from daemonjob.domain.spec.configrefs import ConfigMapLimitExceeded

    tracker, made, _ = limited(per_daemonjob=3, total=100)
    tracker.track("ops/big", "ops", [f"c{i}" for i in range(4)])
    assert made == {} and tracker.watched() == 0
    why = tracker.refusal("ops/big")
    assert isinstance(why, ConfigMapLimitExceeded)
    assert "references 4 ConfigMaps, more than the 3" in why and "--max-configmap-watches-per-daemonjob" in why
    assert tracker.get("ops", "c0") == (False, None) and tracker.error("ops", "c0") == why
    # within the cap again (the template was edited): watched, no refusal left
    tracker.track("ops/big", "ops", ["c0", "c1"])
    assert tracker.refusal("ops/big") is None and tracker.watched() == 2


def test_the_controller_wide_cap_refuses_the_daemonjob_that_would_pass_it_and_wakes_it_when_room_is_made() -> None:
    tracker, made, woken = limited(per_daemonjob=10, total=4)
    tracker.track("ops/a", "ops", ["a1", "a2", "shared"])
    tracker.track("ops/b", "ops", ["shared", "b1"])  # shares one: 4 watches, at the cap
    assert tracker.watched() == 4 and tracker.refusal("ops/b") is None
    tracker.track("ops/c", "ops", ["c1"])
    why = tracker.refusal("ops/c")
    assert why is not None and "limit of 4 ConfigMap watches (--max-configmap-watches)" in why
    assert tracker.watched() == 4 and ("ops", "c1") not in made
    # a DaemonJob may still swap its own ConfigMaps within the room it holds
    tracker.track("ops/a", "ops", ["a1", "a3", "shared"])
    assert tracker.refusal("ops/a") is None and tracker.watched() == 4
    assert woken.count("ops/c") == 1  # a2's watch stopped: c is tried again
    woken.clear()
    tracker.forget("ops/b")  # b1 released
    assert "ops/c" in woken
    tracker.track("ops/c", "ops", ["c1"])
    assert tracker.refusal("ops/c") is None and made[("ops", "c1")].started and tracker.watched() == 4


def test_one_namespace_cannot_take_the_whole_controller_cap() -> None:
    tracker, made, woken = limited(per_daemonjob=10, total=10, per_namespace=3)
    tracker.track("greedy/a", "greedy", ["g1", "g2"])
    tracker.track("greedy/b", "greedy", ["g2", "g3"])  # shares g2: 3 watches in the namespace
    assert tracker.refusal("greedy/b") is None and tracker.watched() == 3
    tracker.track("greedy/c", "greedy", ["g4"])
    why = tracker.refusal("greedy/c")
    assert why is not None and "namespace greedy (--max-configmap-watches-per-namespace)" in why
    assert ("greedy", "g4") not in made
    tracker.track("greedy/d", "greedy", ["g1"])  # already watched: costs the namespace nothing
    assert tracker.refusal("greedy/d") is None
    # another namespace still has room under the controller's cap
    tracker.track("modest/a", "modest", ["m1", "m2", "m3"])
    assert tracker.refusal("modest/a") is None and tracker.watched() == 6
    tracker.forget("greedy/b")  # g3 released: greedy/c is tried again and fits
    assert "greedy/c" in woken
    tracker.track("greedy/c", "greedy", ["g4"])
    assert tracker.refusal("greedy/c") is None and made[("greedy", "g4")].started


def test_the_caps_are_controller_flags() -> None:
    import pytest

    from daemonjob import cli, defaults

    args = cli.parser().parse_args([])
    assert (args.max_configmap_watches, args.max_configmap_watches_per_daemonjob) == (
        defaults.MAX_CONFIGMAP_WATCHES,
        defaults.MAX_CONFIGMAP_WATCHES_PER_DAEMONJOB,
    )
    assert args.max_configmap_watches_per_namespace == defaults.MAX_CONFIGMAP_WATCHES_PER_NAMESPACE
    assert (
        cli.parser().parse_args(["--max-configmap-watches-per-namespace", "7"]).max_configmap_watches_per_namespace == 7
    )
    args = cli.parser().parse_args(["--max-configmap-watches", "50", "--max-configmap-watches-per-daemonjob", "5"])
    assert (args.max_configmap_watches, args.max_configmap_watches_per_daemonjob) == (50, 5)
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--max-configmap-watches", "0"])
