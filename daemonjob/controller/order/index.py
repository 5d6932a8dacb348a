"""The order across DaemonJobs as the caches show it: who shares an exclusion group, who comes
after whom, and what the others read of a DaemonJob's spec and status for it.

`OrderIndex` keeps DaemonJobs by (namespace, exclusionGroup) and by (namespace, a name they
come after), updated by the DaemonJob events, so an event wakes only the DaemonJobs it
concerns: a member's Job that stops running wakes the rest of its group, a Job that succeeds
wakes the DaemonJobs that come after its owner. Nothing scans every DaemonJob per event.

Which DaemonJobs an event wakes is orderwake.py's; one DaemonJob's `OrderInput` is read by
orderreader.py.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from daemonjob.controller.order.succeeded import SucceededNodes
from daemonjob.controller.runtime.informers import OWNER_INDEX
from daemonjob.controller.runtime.specs import SpecCache
from daemonjob.domain.gates.orderview import done_view, waits_for_turns
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.machinery.cache.informer import SharedInformer
from daemonjob.machinery.cache.store import meta_namespace_key

__all__ = ["OrderIndex", "done_view", "waits_for_turns"]

Obj = Mapping[str, Any]


def ns_name(key: str) -> tuple[str, str]:
    ns, _, name = key.rpartition("/")
    return ns, name


class OrderIndex:
    """DaemonJob keys by (namespace, group) and by (namespace, name they come after)."""

    def __init__(self, jobs: SharedInformer | None = None, specs: SpecCache | None = None) -> None:
        """`jobs`: the Jobs cache, from which where a DaemonJob named in spec.after succeeded is
        built the first time it is read (without it, as if it had no Jobs). `specs`: the
        DaemonJobs' specs as read (the controller's, shared)."""
        self.specs = specs if specs is not None else SpecCache()
        self._lock = threading.Lock()
        self._jobs = jobs
        # what spec.after reads, kept from the Job events (the router's) for the DaemonJobs named there
        self.succeeded = SucceededNodes(self._owned, self.named)
        self._groups: dict[tuple[str, str], set[str]] = {}
        self._dependents: dict[tuple[str, str], set[str]] = {}
        self._of: dict[str, tuple[str | None, tuple[str, ...]]] = {}  # key -> (group, after)

    def spec_of(self, dj: Obj, keep: bool = True) -> DaemonJobSpec:
        """`dj`'s spec as read; `keep=False` for a version not current in the cache (old, deleted)."""
        return self.specs.get(meta_namespace_key(dj), dj, keep).spec

    def set(self, key: str, dj: Obj | None) -> None:
        """`dj` now (None: deleted)."""
        ns, _ = ns_name(key)
        spec = self.specs.get(key, dj).spec if dj is not None else None
        now = (spec.exclusion_group, spec.after) if spec is not None else (None, ())
        with self._lock:
            old = self._of.pop(key, (None, ()))
            if old == now and dj is not None:
                self._of[key] = now
                return
            _discard(self._groups, (ns, old[0]) if old[0] else None, key)
            for dep in old[1]:
                _discard(self._dependents, (ns, dep), key)
            if dj is not None:
                self._of[key] = now
                if now[0]:
                    self._groups.setdefault((ns, now[0]), set()).add(key)
                for dep in now[1]:
                    self._dependents.setdefault((ns, dep), set()).add(key)
            unnamed = [dep for dep in old[1] if (ns, dep) not in self._dependents]
        for dep in unnamed:  # named by no DaemonJob any more: where it succeeded is not kept
            self.succeeded.drop(ns, dep)

    def ordered(self, key: str) -> bool:
        """Whether `key` is in an exclusion group or comes after another DaemonJob."""
        with self._lock:
            group, after = self._of.get(key, (None, ()))
        return bool(group or after)

    def group(self, key: str) -> str | None:
        with self._lock:
            return self._of.get(key, (None, ()))[0]

    def members(self, namespace: str, group: str) -> list[str]:
        with self._lock:
            return sorted(self._groups.get((namespace, group), ()))

    def peers(self, key: str) -> list[str]:
        """The other members of `key`'s group."""
        ns, _ = ns_name(key)
        group = self.group(key)
        return [k for k in self.members(ns, group) if k != key] if group else []

    def dependents(self, key: str) -> list[str]:
        """The DaemonJobs that name `key` in spec.after."""
        ns, name = ns_name(key)
        with self._lock:
            return sorted(self._dependents.get((ns, name), ()))

    def named(self, namespace: str, name: str) -> bool:
        """Whether some DaemonJob names `namespace/name` in spec.after."""
        with self._lock:
            return (namespace, name) in self._dependents

    def _owned(self, owner: str) -> list[Obj]:
        """The cached Jobs of the DaemonJob of owner id `owner` (domain.jobs.owner_id)."""
        owned: list[Obj] = [] if self._jobs is None else list(self._jobs.store.by_index(OWNER_INDEX, owner))
        return owned


def _discard(index: dict[tuple[str, str], set[str]], at: tuple[str, str] | None, key: str) -> None:
    if at is None:
        return
    keys = index.get(at)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[at]
