"""A relist tells the handlers what changed in the cached content, whatever the resourceVersions say."""

from __future__ import annotations

import copy
from typing import Any

from daemonjob.controller.runtime.transforms import job_transform, node_transform
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.machinery.cache.frozen import freeze, thaw
from daemonjob.machinery.cache.informer import Handlers, Informer, Tombstone, diff_relist
from daemonjob.machinery.cache.memo import object_memo
from daemonjob.machinery.cache.store import meta_namespace_key
from daemonjob.testing.doubles.builders import daemonjob, job_template

DJ = daemonjob(resource_version=None, template=job_template(backoff_limit=None))


def server_job(node: str, rv: str, finished: str | None = None) -> dict[str, Any]:
    job = build_job(DJ, node, "rev1")
    job["metadata"].update(uid=f"uid-{node}", resourceVersion=rv, creationTimestamp="2026-11-02T10:00:00Z")
    job["status"] = {"startTime": "2026-11-02T10:00:00Z", "active": 1}
    if finished:
        job["status"] = {
            "startTime": "2026-11-02T10:00:00Z",
            "completionTime": finished,
            "succeeded": 1,
            "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": finished}],
        }
    return job


def cm(name: str, value: str, rv: str | None = None) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if rv is not None:
        meta["resourceVersion"] = rv
    return freeze({"metadata": meta, "data": {"v": value}})


class PagedKube:
    """Answers list requests from `items`, two objects a page, like a paged API server list."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.rv = 0

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        start = int(params.get("continue") or 0)
        self.rv += 1
        page = copy.deepcopy(self.items[start : start + 2])
        more = start + 2 < len(self.items)
        return {
            "items": page,
            "metadata": {"resourceVersion": str(self.rv), "continue": str(start + 2) if more else ""},
        }


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def handlers(self) -> Handlers:
        return Handlers(
            on_add=lambda o: self.events.append(("add", o)),
            on_update=lambda o, n: self.events.append(("update", (o, n))),
            on_delete=lambda o: self.events.append(("delete", o)),
        )

    def take(self) -> list[tuple[str, Any]]:
        events, self.events = self.events, []
        return events


def informer(kube: PagedKube, **kw: Any) -> tuple[Informer, Recorder]:
    inf = Informer(kube, "batch/v1", "jobs", namespace="ops", **kw)
    rec = Recorder()
    inf.add_handlers(rec.handlers())
    return inf, rec


# -- the diff itself ---------------------------------------------------------------------


def test_changed_content_is_an_update_with_equal_resource_versions() -> None:
    before = cm("a", "1", rv="7")
    diff = diff_relist({"ns/a": before}, [cm("a", "2", rv="7")])
    assert [(b, thaw(n)) for b, n in diff.changes] == [(before, thaw(cm("a", "2", rv="7")))]
    assert diff.deleted == []


def test_changed_content_is_an_update_without_resource_versions() -> None:
    before = cm("a", "1")
    diff = diff_relist({"ns/a": before}, [cm("a", "2")])
    assert len(diff.changes) == 1 and diff.changes[0][0] is before
    assert diff.changes[0][1]["data"]["v"] == "2"


def test_unchanged_content_emits_nothing_and_keeps_the_cached_instance() -> None:
    cached = {"ns/a": cm("a", "1"), "ns/b": cm("b", "1", rv="3")}
    diff = diff_relist(cached, [cm("a", "1"), cm("b", "1", rv="3")])
    assert diff.changes == [] and diff.deleted == []
    assert diff.objects[0] is cached["ns/a"] and diff.objects[1] is cached["ns/b"]


def test_new_resource_version_alone_is_a_change_when_the_cache_keeps_it() -> None:
    diff = diff_relist({"ns/a": cm("a", "1", rv="3")}, [cm("a", "1", rv="4")])
    assert len(diff.changes) == 1


def test_adds_and_deletes_as_before() -> None:
    gone = cm("gone", "1")
    diff = diff_relist({"ns/gone": gone, "ns/same": cm("same", "1")}, [cm("same", "1"), cm("new", "1")])
    assert [(b, meta_namespace_key(n)) for b, n in diff.changes] == [(None, "ns/new")]
    assert diff.deleted == [Tombstone("ns/gone", gone)]
    assert [meta_namespace_key(o) for o in diff.objects] == ["ns/same", "ns/new"]


# -- through the informer ----------------------------------------------------------------


def test_a_job_that_finished_unseen_is_an_update_after_the_relist() -> None:
    """The Job transform drops resourceVersion: only the content can tell the Job finished."""
    kube = PagedKube()
    kube.items = [server_job(n, rv="10") for n in ("n1", "n2", "n3")]
    inf, rec = informer(kube, transform=job_transform)
    inf._list()
    assert [kind for kind, _ in rec.take()] == ["add"] * 3
    cached = dict(inf.store.items())

    kube.items = [
        server_job("n1", rv="20", finished="2026-11-02T10:01:00Z"),  # finished while unwatched
        server_job("n2", rv="21"),  # progress counts only: the same for the cache
        server_job("n4", rv="22"),
    ]  # created while unwatched; n3 deleted while unwatched
    inf._list()
    events = rec.take()
    assert sorted((kind, _key(obj)) for kind, obj in events) == [
        ("add", job_key("n4")),
        ("delete", job_key("n3")),
        ("update", job_key("n1")),
    ]
    ((old, new),) = [obj for kind, obj in events if kind == "update"]
    assert old is cached[job_key("n1")]
    assert old["status"]["conditions"] == () and new["status"]["conditions"][0]["type"] == "Complete"
    (tombstone,) = [obj for kind, obj in events if kind == "delete"]
    assert isinstance(tombstone, Tombstone) and tombstone.obj is cached[job_key("n3")]
    assert inf.store.get(job_key("n2")) is cached[job_key("n2")], "an unchanged Job keeps its cached instance"
    assert inf.store.get(job_key("n1")) is new

    inf._list()  # nothing changed since
    assert rec.take() == []


def test_a_new_resource_version_is_an_update_when_the_transform_keeps_it() -> None:
    """A transform that keeps resourceVersion still gets an update for every new version."""
    node = {"metadata": {"name": "n1", "uid": "u", "resourceVersion": "5", "labels": {"a": "1"}}, "spec": {}}
    kube = PagedKube()
    kube.items = [node]
    inf, rec = informer(kube, transform=lambda n: {"metadata": n["metadata"]})
    inf._list()
    rec.take()
    kube.items = [{**node, "metadata": {**node["metadata"], "resourceVersion": "6"}}]
    inf._list()
    assert [kind for kind, _ in rec.take()] == ["update"]


class WatchKube(PagedKube):
    """Lists like PagedKube, then serves one watch of `events` and stops the informer."""

    def __init__(self, events: list[dict[str, Any]], stop: Any) -> None:
        super().__init__()
        self.events = events
        self.stop = stop

    def watch(self, path: str, params: Any, read_timeout: float | None = None, decode: Any = None) -> Any:
        kube = self

        class Stream:
            def __iter__(self) -> Any:
                yield from copy.deepcopy(kube.events)
                kube.stop()

            def close(self) -> None:
                pass

        return Stream()


def test_a_heartbeat_keeps_the_cached_node_and_its_memo_and_sends_no_update() -> None:
    node = {
        "metadata": {"name": "n1", "uid": "u", "resourceVersion": "5", "labels": {"a": "1"}},
        "spec": {"taints": []},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    beat = copy.deepcopy(node)
    beat["metadata"]["resourceVersion"] = "6"
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:10Z"
    relabelled = copy.deepcopy(beat)
    relabelled["metadata"].update(resourceVersion="7", labels={"a": "2"})
    holder: list[Informer] = []
    kube = WatchKube(
        [{"type": "MODIFIED", "object": beat}, {"type": "MODIFIED", "object": relabelled}],
        stop=lambda: holder[0]._stopped.set(),
    )
    kube.items = [node]
    inf, rec = informer(kube, transform=node_transform)
    holder.append(inf)
    inf._list()
    cached = inf.store.get("n1")
    assert object_memo(cached, lambda n: object(), "eligible") is object_memo(cached, lambda n: object(), "eligible")
    rec.take()
    inf._watch()
    events = rec.take()
    assert [kind for kind, _ in events] == ["update"]  # the relabel only: the heartbeat changed nothing read
    assert events[0][1][0] is cached  # the heartbeat kept the cached instance
    assert inf.resource_version == "7"


def job_key(node: str) -> str:
    return meta_namespace_key(build_job(DJ, node, "rev1"))


def _key(obj: Any) -> str:
    if isinstance(obj, Tombstone):
        return obj.key
    if isinstance(obj, tuple):  # (old, new) of an update
        return meta_namespace_key(obj[1])
    return meta_namespace_key(obj)
