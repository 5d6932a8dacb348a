"""Watches of single referenced ConfigMaps: started with the first reference, stopped with the last."""

from __future__ import annotations

from daemonjob.controller.configmaps import ConfigMapTracker
from daemonjob.testing.fakes import FakeInformer


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
