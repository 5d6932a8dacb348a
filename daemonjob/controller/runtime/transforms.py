"""What the caches keep of each object: only the fields decide() and the handlers read.

At 10 DaemonJobs over 5000 nodes the Job cache holds 50,000 objects, so its size per
Job sets the controller's memory. Beyond trimming, parts that many Jobs share (the
labels and owner reference of one DaemonJob's Jobs, a node's annotation, the status
of Jobs that finished in the same second) are kept once and shared: cached objects are
frozen, so sharing is safe.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from daemonjob import defaults
from daemonjob.controller.runtime.turnseal import TurnSeal
from daemonjob.domain.jobs.jobview import JOB_VIEW_KEY
from daemonjob.domain.shared.apinames import (
    ANNOTATION_BOOT_ID,
    ANNOTATION_NODE,
    ANNOTATION_NODE_CHECK,
    LABEL_ATTEMPT,
    LABEL_NAME,
    LABEL_REVISION,
    LABEL_RUN,
    LABEL_TEMPLATE_HASH,
)
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, DRAIN_OUTCOME_PREFIX
from daemonjob.machinery.cache.frozen import freeze
from daemonjob.machinery.cache.record import FrozenRecord

__all__ = [
    "CachedJob",
    "CachedJobMeta",
    "CachedNode",
    "CachedNodeInfo",
    "CachedNodeMeta",
    "CachedNodeStatus",
    "Interner",
    "job_transform",
    "node_transform",
]

INTERNED_VALUES = 16384  # distinct shared parts kept; more only costs sharing, not correctness
NODE_PARTS = 1024  # distinct node specs and Ready conditions shared (nodes that turned Ready in one second)
SHARED_TEXT_MAX = 63  # a label's longest value (a node's name is longer only in a DNS subdomain)
_JOB_LABELS = (LABEL_NAME, LABEL_REVISION, LABEL_RUN, LABEL_TEMPLATE_HASH, LABEL_ATTEMPT)
_TERMINAL_CONDITIONS = ("Complete", "Failed")
_CONDITION_KEYS = ("type", "status", "lastTransitionTime")
_OWNER_KEYS = ("apiVersion", "kind", "name", "uid", "controller")


class CachedJobMeta(FrozenRecord):
    """A cached Job's metadata. No resourceVersion: nothing reads it (the informer takes it
    from the watch events). Labels, owner reference and node annotation are shared parts."""

    __slots__ = (
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "labels",
        "ownerReferences",
        "annotations",
    )


class CachedJob(FrozenRecord):
    """A Job as the cache keeps it; its JobView is kept in a slot of its own."""

    __slots__ = ("metadata", "status", "spec")
    memo_key = JOB_VIEW_KEY


class CachedNode(FrozenRecord):
    """A Node as the cache keeps it: a record of slots where a frozen dict was 200 bytes a
    level (the node, its metadata, its status, its nodeInfo: 0.5 KB a node)."""

    __slots__ = ("metadata", "spec", "status")


class CachedNodeMeta(FrozenRecord):
    __slots__ = ("name", "uid", "labels", "annotations")


class CachedNodeStatus(FrozenRecord):
    __slots__ = ("conditions", "nodeInfo")


class CachedNodeInfo(FrozenRecord):
    __slots__ = ("bootID",)


class Interner:
    """Returns one shared frozen instance for equal values (thread-safe).

    Bounded first in, first out: a plain dict keeps the order of insertion, so the oldest
    value goes when it is full. An LRU (cachetools') cost a tenth of a Job event's handling
    in Python bookkeeping; which value goes matters less, a value gone only costs sharing.
    """

    def __init__(self, maxsize: int = INTERNED_VALUES) -> None:
        self._values: dict[Hashable, Any] = {}
        self._maxsize = maxsize
        self._lock = threading.Lock()

    def known(self, key: Hashable) -> Any:
        """The shared instance under `key` if there is one (None: call with the value): most
        events find their parts there, and the value need not be built to look them up. A
        plain read: a dict's get is atomic, and a value is only ever replaced by an equal one."""
        return self._values.get(key)

    def part(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The shared instance under `key`, `build()` shared under it the first time."""
        found = self.known(key)
        return found if found is not None else self(build(), key)

    def __call__(self, value: Any, key: Hashable = None) -> Any:
        """The shared instance of `value`. A `key` that names it (tuples of strings: hashed in
        C, where a new frozen value hashes a frozenset per mapping) spares freezing and
        hashing the value each time it is already there; its first element says its kind."""
        if key is None:
            key = value = freeze(value)
        with self._lock:
            shared = self._values.get(key)
            if shared is None:
                if len(self._values) >= self._maxsize:
                    del self._values[next(iter(self._values))]
                self._values[key] = shared = freeze(value)
        return shared

    def __len__(self) -> int:
        return len(self._values)


_shared = Interner()
_node_parts = Interner(NODE_PARTS)  # of their own: nodes' distinct parts must not push the Jobs' out


def _text(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value


def _short_text(value: Any) -> Any:
    """A label's or annotation's value shared when short: thousands of nodes carry the same
    ("linux", "true", a zone), and the hostname label is the node's name (kept once)."""
    return sys.intern(value) if type(value) is str and len(value) <= SHARED_TEXT_MAX else value


def node_transform(node: dict[str, Any], shared: Interner = _node_parts) -> CachedNode:
    """What eligibility, the cluster's disruption budget, the node Jobs and a node's checked turn
    read: of the status only the Ready condition (its status and when it changed) and the boot
    ID, no resourceVersion, so a heartbeat is no change; the labels, and the annotations of at
    most NODE_ANNOTATION_VALUE_MAX characters, node maintenance's records at any length.

    A node's own parts (name, labels, boot ID) are its own; what nodes have in common (the spec
    of an untainted node, the Ready condition of nodes that turned Ready in the same second,
    label values) is kept once: each node otherwise held ~2 KB, at 65,000 nodes 140 MB."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    kept: dict[str, Any] = {k: meta[k] for k in ("name", "uid") if k in meta}
    if "name" in kept:
        kept["name"] = _short_text(kept["name"])
    if "labels" in meta:
        kept["labels"] = freeze({sys.intern(k): _short_text(v) for k, v in (meta["labels"] or {}).items()})
    annotations = {
        sys.intern(k): _short_text(v)
        for k, v in (meta.get("annotations") or {}).items()
        if k == ANNOTATION_MAINTENANCE
        or k.startswith(DRAIN_OUTCOME_PREFIX)
        or (isinstance(v, str) and len(v) <= defaults.NODE_ANNOTATION_VALUE_MAX)
    }
    if annotations:
        kept["annotations"] = freeze(annotations)
    ready = tuple(
        [
            tuple([(k, c[k]) for k in _CONDITION_KEYS if k in c])
            for c in status.get("conditions") or ()
            if c.get("type") == "Ready"
        ]
    )
    boot = (status.get("nodeInfo") or {}).get("bootID")
    kept_status = None
    if ready or boot:
        kept_status = CachedNodeStatus(
            conditions=shared.part(("ready", ready), lambda: [dict(c) for c in ready]),
            nodeInfo=None if not boot else CachedNodeInfo(bootID=boot),
        )
    return CachedNode(
        metadata=CachedNodeMeta(**kept),
        spec=shared({k: spec[k] for k in ("taints", "unschedulable") if k in spec}),
        status=kept_status,
    )


def _status(conditions: tuple[tuple[tuple[str, Any], ...], ...], finished: Any) -> dict[str, Any]:
    kept: dict[str, Any] = {"conditions": [dict(c) for c in conditions]}
    if finished is not None:
        kept["completionTime"] = finished
    return kept


def job_transform(job: Mapping[str, Any], shared: Interner = _shared, seal: TurnSeal | None = None) -> CachedJob:
    """A Job as decide() sees it: identity, node, revision, owner, terminal state, and a TTL.

    Progress counts (active, succeeded, ...) and non-terminal conditions are left out:
    decide() reads only the terminal conditions, so a Job's progress is no event for it.
    `spec.ttlSecondsAfterFinished` is kept (only when set): the template never sets it,
    so on our Job it means an admission policy added it, which decide() refuses.
    With `seal`, a checked turn's boot ID and verdict are kept only where their seals verify
    (turnseal.py); without, as written (tools and tests that read no seals).
    """
    meta = job.get("metadata") or {}
    kept: dict[str, Any] = {}
    for key in ("name", "uid"):
        if key in meta:
            kept[key] = meta[key]
    for key in ("namespace", "creationTimestamp", "deletionTimestamp"):
        if key in meta:
            kept[key] = _text(meta[key])
    labels = meta.get("labels") or {}
    ours = tuple([(k, labels[k]) for k in _JOB_LABELS if k in labels])
    kept["labels"] = shared.part(("labels", ours), lambda: dict(ours))
    owners = tuple(
        [
            tuple([(k, ref[k]) for k in _OWNER_KEYS if k in ref])
            for ref in meta.get("ownerReferences") or ()
            if ref.get("controller")
        ]
    )
    if owners:
        kept["ownerReferences"] = shared.part(("owners", owners), lambda: [dict(ref) for ref in owners])
    annotations = meta.get("annotations") or {}
    node = annotations.get(ANNOTATION_NODE)
    if node is not None:
        kept["annotations"] = shared.part(("node", node), lambda: {ANNOTATION_NODE: node})
    if seal is not None:
        checked = seal.checked_annotations(job)
    else:
        checked = {k: annotations[k] for k in (ANNOTATION_BOOT_ID, ANNOTATION_NODE_CHECK) if k in annotations}
    if checked:  # a checked turn's Job (nodecheck.py): its own, not shared
        kept["annotations"] = freeze({**(kept.get("annotations") or {}), **checked})
    status = job.get("status") or {}
    conditions = tuple(
        [
            tuple([(k, c[k]) for k in _CONDITION_KEYS if k in c])
            for c in status.get("conditions") or ()
            if c.get("type") in _TERMINAL_CONDITIONS
        ]
    )
    finished = status.get("completionTime")
    kept_status = shared.part(("status", conditions, finished), lambda: _status(conditions, finished))
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    return CachedJob(  # a key left None is absent: `spec` only when a TTL was set
        metadata=CachedJobMeta(**kept),
        status=kept_status,
        spec=None if ttl is None else shared({"ttlSecondsAfterFinished": ttl}, ("ttl", ttl)),
    )
