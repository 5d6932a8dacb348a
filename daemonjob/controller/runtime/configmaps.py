"""The ConfigMaps that DaemonJobs with `rerunOnConfigChange` read, and nothing more.

Watching every ConfigMap of a cluster would cost memory and traffic proportional to all of
them; instead each referenced ConfigMap gets a watch of its own (a field selector on its
name), started when the first DaemonJob references it and stopped with the last. A change
enqueues the DaemonJobs that reference it. No polling.

Each watch holds a thread and a connection, so they are capped: per DaemonJob, per
namespace (so that one tenant cannot take the whole controller's room) and across the
controller (`ConfigMapLimits`, flags `--max-configmap-watches-per-daemonjob`,
`--max-configmap-watches-per-namespace` and `--max-configmap-watches`). A DaemonJob past
a cap gets no watch at all (a revision that covered only some of its ConfigMaps would be
wrong) and its ConfigMaps read as unreadable
with a `ConfigMapLimitExceeded` why, which its Stalled condition names; when watches are
released, the DaemonJobs refused for the controller-wide cap are enqueued to try again.
One watch per namespace was the alternative: a field selector names a single ConfigMap and
nothing labels the referenced ones, so it would carry every ConfigMap of the namespace, data
included, whoever references them; capped watches keep the cost to what is referenced.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from daemonjob import defaults
from daemonjob.domain.spec.configrefs import ConfigMapLimitExceeded
from daemonjob.machinery.cache.informer import Handlers, Informer, InformerHooks, SharedInformer
from daemonjob.machinery.client.kube import Kube
from daemonjob.machinery.process.clock import Clock

__all__ = ["ConfigMapLimits", "ConfigMapTracker", "kube_configmap_informer"]

Ref = tuple[str, str]  # namespace, name
InformerFactory = Callable[[str, str], SharedInformer]


METRICS_NAME = "configmaps"  # every ConfigMap watch reports as one informer


def kube_configmap_informer(
    kube: Kube, hooks: InformerHooks | None = None, *, clock: Clock | None = None, rng: random.Random | None = None
) -> InformerFactory:
    shared = _one_name(hooks, METRICS_NAME) if hooks is not None else None

    def make(namespace: str, name: str) -> SharedInformer:
        return Informer(
            kube,
            "v1",
            "configmaps",
            namespace=namespace,
            field_selector=f"metadata.name={name}",
            hooks=shared,
            clock=clock,
            rng=rng,
            name=f"configmap-{namespace}-{name}",
        )

    return make


def _one_name(hooks: InformerHooks, name: str) -> InformerHooks:
    """`hooks` reporting every informer as `name`: a label value per ConfigMap (kustomize adds a
    hash suffix per edit) would grow the metrics without bound."""

    def fixed(hook: Callable[..., None] | None) -> Callable[..., None] | None:
        return None if hook is None else (lambda _informer, *rest: hook(name, *rest))

    return InformerHooks(
        on_list=fixed(hooks.on_list), on_relist=fixed(hooks.on_relist), on_watch_restart=fixed(hooks.on_watch_restart)
    )


@dataclass(frozen=True, slots=True)
class ConfigMapLimits:
    """How many ConfigMap watches one DaemonJob, the DaemonJobs of one namespace, and the whole
    controller may hold."""

    per_daemonjob: int = defaults.MAX_CONFIGMAP_WATCHES_PER_DAEMONJOB
    total: int = defaults.MAX_CONFIGMAP_WATCHES
    per_namespace: int = defaults.MAX_CONFIGMAP_WATCHES_PER_NAMESPACE


class ConfigMapTracker:
    """Reference-counted watches of single ConfigMaps; `enqueue` gets the DaemonJob keys to wake."""

    def __init__(
        self, make_informer: InformerFactory, enqueue: Callable[[str], None], limits: ConfigMapLimits | None = None
    ) -> None:
        self._make = make_informer
        self._enqueue = enqueue
        self.limits = limits or ConfigMapLimits()
        self._lock = threading.Lock()
        self._informers: dict[Ref, SharedInformer] = {}
        self._users: dict[Ref, set[str]] = {}  # ref -> DaemonJob keys
        self._refs_of: dict[str, set[Ref]] = {}  # DaemonJob key -> refs
        self._refused: dict[str, tuple[set[Ref], ConfigMapLimitExceeded]] = {}  # oldest first

    def _refusal(self, key: str, wanted: set[Ref], before: set[Ref]) -> ConfigMapLimitExceeded | None:
        """Why `key` may not have `wanted` watched, if a cap forbids it. Its own watches that
        it would release count as free. Called with the lock held."""
        if len(wanted) > self.limits.per_daemonjob:
            return ConfigMapLimitExceeded(
                f"the pod template references {len(wanted)} ConfigMaps, more than the "
                f"{self.limits.per_daemonjob} one DaemonJob may have watched for rerunOnConfigChange "
                "(the controller's --max-configmap-watches-per-daemonjob): reference fewer ConfigMaps or "
                "set rerunOnConfigChange to false"
            )
        released_refs = [r for r in before - wanted if self._users.get(r) == {key}]
        released = len(released_refs)
        needed_refs = [r for r in wanted if r not in self._informers]
        needed = len(needed_refs)
        namespace = next(iter(wanted))[0]
        in_namespace = (
            sum(1 for r in self._informers if r[0] == namespace)
            - sum(1 for r in released_refs if r[0] == namespace)
            + needed
        )
        if needed and in_namespace > self.limits.per_namespace:
            return ConfigMapLimitExceeded(
                f"watching the {needed} ConfigMaps this DaemonJob references for rerunOnConfigChange would pass "
                f"the controller's limit of {self.limits.per_namespace} ConfigMap watches for the DaemonJobs of "
                f"namespace {namespace} (--max-configmap-watches-per-namespace); they are watched once other "
                "DaemonJobs of the namespace release theirs"
            )
        if len(self._informers) - released + needed > self.limits.total:
            return ConfigMapLimitExceeded(
                f"watching the {needed} ConfigMaps this DaemonJob references for rerunOnConfigChange would pass "
                f"the controller's limit of {self.limits.total} ConfigMap watches (--max-configmap-watches); "
                "they are watched once other DaemonJobs release theirs"
            )
        return None

    def track(self, key: str, namespace: str, names: Iterable[str]) -> None:
        """Make `key`'s references exactly `names` (empty: it references none); past a cap,
        none (`refusal` then says why)."""
        wanted = {(namespace, n) for n in names}
        to_start: list[SharedInformer] = []
        to_stop: list[SharedInformer] = []
        with self._lock:
            before = self._refs_of.get(key, set())
            refusal = self._refusal(key, wanted, before) if wanted else None
            if refusal is not None:
                self._refused[key] = (wanted, refusal)
                wanted = set()
            else:
                self._refused.pop(key, None)
            for ref in wanted - before:
                users = self._users.setdefault(ref, set())
                users.add(key)
                if ref not in self._informers:
                    informer = self._make(*ref)
                    changed = partial(self._changed_by_event, ref)
                    informer.add_handlers(Handlers(changed, changed, changed))
                    # a ConfigMap that does not exist sends no event when its watch lists: this does
                    informer.add_sync_listener(partial(self._changed, ref))
                    self._informers[ref] = informer
                    to_start.append(informer)
            for ref in before - wanted:
                users = self._users.get(ref, set())
                users.discard(key)
                if not users:
                    self._users.pop(ref, None)
                    if ref in self._informers:
                        to_stop.append(self._informers.pop(ref))
            if wanted:
                self._refs_of[key] = wanted
            else:
                self._refs_of.pop(key, None)
            # released watches may let a DaemonJob refused for the controller-wide cap in
            wake = (
                [k for k, (refs, _) in self._refused.items() if k != key and len(refs) <= self.limits.per_daemonjob]
                if to_stop
                else []
            )
        for informer in to_start:
            informer.start()
        for informer in to_stop:
            informer.stop(timeout=0)
        for k in wake:
            self._enqueue(k)

    def forget(self, key: str) -> None:
        self.track(key, "", ())

    def refusal(self, key: str) -> ConfigMapLimitExceeded | None:
        """Why `key`'s ConfigMaps are not watched (a cap), or None."""
        with self._lock:
            refused = self._refused.get(key)
        return None if refused is None else refused[1]

    def get(self, namespace: str, name: str) -> tuple[bool, Mapping[str, Any] | None]:
        """(synced, the ConfigMap or None if it does not exist); not synced: not yet known."""
        with self._lock:
            informer = self._informers.get((namespace, name))
        if informer is None or not informer.has_synced():
            return False, None
        return True, informer.store.get(f"{namespace}/{name}")

    def error(self, namespace: str, name: str) -> str | None:
        """Why the watch of a ConfigMap has not listed yet (a 403, say), if it failed; for a
        ConfigMap not watched because a cap refused the DaemonJobs referencing it, the cap."""
        ref = (namespace, name)
        with self._lock:
            informer = self._informers.get(ref)
            if informer is None:
                return next((why for refs, why in self._refused.values() if ref in refs), None)
        return informer.sync_error()

    def watched(self) -> int:
        with self._lock:
            return len(self._informers)

    def stop(self) -> None:
        with self._lock:
            informers = list(self._informers.values())
            self._informers.clear()
            self._users.clear()
            self._refs_of.clear()
            self._refused.clear()
        for informer in informers:
            informer.stop()

    def _changed_by_event(self, ref: Ref, *_objects: object) -> None:
        self._changed(ref)

    def _changed(self, ref: Ref) -> None:
        with self._lock:
            keys = sorted(self._users.get(ref, ()))
        for key in keys:
            self._enqueue(key)
