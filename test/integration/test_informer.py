"""Informers against the real API server: events, apiserver restarts, 410 relists."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import urllib3

from daemonjob.machinery.cache.informer import Backoff, Handlers, Informer, Tombstone
from daemonjob.machinery.client.kube import Kube, path_for
from daemonjob.machinery.process.clock import RealClock
from daemonjob.testing.waiting import wait_for


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def handlers(self) -> Handlers:
        return Handlers(
            on_add=lambda o: self._rec("add", o), on_update=lambda _o, n: self._rec("update", n), on_delete=self._delete
        )

    def _rec(self, kind: str, obj: Any) -> None:
        with self.lock:
            self.events.append((kind, obj["metadata"]["name"]))

    def _delete(self, obj: Any) -> None:
        kind = "tombstone" if isinstance(obj, Tombstone) else "delete"
        name = obj.obj["metadata"]["name"] if isinstance(obj, Tombstone) else obj["metadata"]["name"]
        with self.lock:
            self.events.append((kind, name))

    def has(self, kind: str, name: str) -> bool:
        with self.lock:
            return (kind, name) in self.events


class FlakyKube:
    """A Kube whose connection can be cut: requests fail while `down` is set."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise urllib3.exceptions.NewConnectionError(None, "simulated network cut")

    def get(self, *a: Any, **kw: Any) -> Any:
        self._check()
        return self.kube.get(*a, **kw)

    def watch(self, *a: Any, **kw: Any) -> Any:
        self._check()
        return self.kube.watch(*a, **kw)


def cm(name: str, data: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"informer-test": "yes"}}, "data": {"v": data}}


def cache_names(inf: Informer) -> dict[str, str]:
    return {o["metadata"]["name"]: o["data"]["v"] for o in inf.store.list()}


def fresh_names(kube: Kube, ns: str) -> dict[str, str]:
    items = kube.get(path_for("v1", "configmaps", ns), labelSelector="informer-test=yes")["items"]
    return {o["metadata"]["name"]: o["data"]["v"] for o in items}


@pytest.fixture
def fast_backoff() -> Backoff:
    return Backoff(RealClock(), initial=0.05, cap=0.2)


def test_sees_adds_updates_deletes(kube: Kube, namespace: str) -> None:
    path = path_for("v1", "configmaps", namespace)
    kube.create(path, cm("before"))
    inf = Informer(kube, "v1", "configmaps", namespace=namespace, label_selector="informer-test=yes")
    rec = Recorder()
    inf.add_handlers(rec.handlers())
    inf.start()
    try:
        assert inf.wait_for_sync(10) and inf.has_synced()
        assert rec.has("add", "before")
        kube.create(path, cm("a"))
        wait_for(lambda: rec.has("add", "a"), what="add")
        kube.patch(path_for("v1", "configmaps", namespace, "a"), {"data": {"v": "2"}})
        wait_for(lambda: rec.has("update", "a"), what="update")
        assert inf.store.get(f"{namespace}/a")["data"]["v"] == "2"
        assert "managedFields" not in inf.store.get(f"{namespace}/a")["metadata"]
        kube.delete(path_for("v1", "configmaps", namespace, "a"))
        wait_for(lambda: rec.has("delete", "a"), what="delete")
        assert inf.store.get(f"{namespace}/a") is None
        kube.create(path, {"metadata": {"name": "unlabelled"}})
        time.sleep(0.5)
        assert not rec.has("add", "unlabelled")
        with pytest.raises(TypeError):
            inf.store.get(f"{namespace}/before")["data"]["v"] = "mutated"
    finally:
        inf.stop()
    assert not inf.alive()


def test_survives_apiserver_restart(cluster, kube: Kube, namespace: str, fast_backoff: Backoff) -> None:
    path = path_for("v1", "configmaps", namespace)
    for n in ("keep", "change", "drop"):
        kube.create(path, cm(n))
    inf = Informer(
        kube, "v1", "configmaps", namespace=namespace, label_selector="informer-test=yes", backoff=fast_backoff
    )
    rec = Recorder()
    inf.add_handlers(rec.handlers())
    inf.start()
    try:
        assert inf.wait_for_sync(10)
        cluster.stop_apiserver()
        time.sleep(1.0)
        cluster.start_apiserver()
        kube.create(path, cm("new"))
        kube.patch(path_for("v1", "configmaps", namespace, "change"), {"data": {"v": "2"}})
        kube.delete(path_for("v1", "configmaps", namespace, "drop"))
        expected = fresh_names(kube, namespace)
        assert expected == {"keep": "1", "change": "2", "new": "1"}
        wait_for(lambda: cache_names(inf) == expected, what="cache equal to a fresh list")
        assert rec.has("delete", "drop") or rec.has("tombstone", "drop")
        assert inf.alive()
    finally:
        inf.stop()


def test_expired_resource_version_relists_with_tombstones(
    cluster, kube: Kube, namespace: str, fast_backoff: Backoff
) -> None:
    path = path_for("v1", "configmaps", namespace)
    for n in ("keep", "change", "drop"):
        kube.create(path, cm(n))
    flaky = FlakyKube(kube)
    relists: list[str] = []
    from daemonjob.machinery.cache.informer import InformerHooks

    inf = Informer(
        flaky,
        "v1",
        "configmaps",
        namespace=namespace,
        label_selector="informer-test=yes",
        backoff=fast_backoff,
        hooks=InformerHooks(on_relist=relists.append),
    )
    rec = Recorder()
    inf.add_handlers(rec.handlers())
    inf.start()
    try:
        assert inf.wait_for_sync(10)
        stale_rv = inf.resource_version
        flaky.down = True
        wait_for(lambda: inf._stream is not None, what="watch open")
        inf._stream.close()  # the connection drops; re-watches fail while `down`
        kube.create(path, cm("new"))
        kube.patch(path_for("v1", "configmaps", namespace, "change"), {"data": {"v": "2"}})
        kube.delete(path_for("v1", "configmaps", namespace, "drop"))
        # A restarted apiserver's watch cache begins after these writes: stale_rv is now too old (410).
        cluster.stop_apiserver()
        cluster.start_apiserver()
        flaky.down = False
        expected = fresh_names(kube, namespace)
        wait_for(lambda: cache_names(inf) == expected, what="relisted cache")
        assert relists, "the informer never relisted"
        assert rec.has("tombstone", "drop"), rec.events
        assert rec.has("add", "new") and rec.has("update", "change")
        assert inf.resource_version != stale_rv
    finally:
        inf.stop()


def test_a_refused_first_list_is_reported_to_sync_listeners(
    cluster, tmp_path, namespace: str, fast_backoff: Backoff
) -> None:
    """What the ConfigMap watches rely on: no polling for the first list, and why it fails."""
    from daemonjob.testing.cluster import kubeconfig_text

    config = tmp_path / "kubeconfig-nobody"
    config.write_text(kubeconfig_text(cluster.server, cluster.pki / "ca.crt", "not-a-token", "nobody"))
    told: list[str | None] = []
    inf = Informer(Kube.from_config(str(config)), "v1", "configmaps", namespace=namespace, backoff=fast_backoff)
    inf.add_sync_listener(lambda: told.append(inf.sync_error()))
    inf.start()
    try:
        wait_for(lambda: told, 15, "a sync listener call")
        assert not inf.has_synced() and told[0] is not None and "Unauthorized" in told[0]
        time.sleep(1.0)  # further retries fail the same way: listeners are not told again
        assert len(told) == 1
    finally:
        inf.stop()
