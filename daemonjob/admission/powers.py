"""Node maintenance is the power to cordon and drain nodes: only who holds it may ask for it.

The controller cordons and drains with its own ServiceAccount, so without this check anyone
who may edit DaemonJobs in a namespace of --node-maintenance-namespaces (the aggregated
`daemonjob-edit` role gives that to every namespace editor) could have any node cordoned
and emptied. The webhook asks the API server (SubjectAccessReview, with the requester's
user, uid, groups and extra from the AdmissionReview) whether the requester may do it
themselves: patch nodes for a cordon, and create pods/eviction in every namespace for a
drain; a refusal names what is missing.

When, as Kubernetes decides for its own escalation check (a Role's rules are checked on
every create and update, except one that only changes the fields the garbage collector
writes): on a create of a DaemonJob that asks for node maintenance, and on every update of
one that asks for it after the update, except updates that only change finalizers or
ownerReferences. An edit of the template, of the schedule, or a run-now or promote
annotation starts a rollout that cordons and drains again, so it is the same power used
again; an owner who lost the permission can still remove spec.nodeMaintenance (the result
asks for nothing), have the finalizer removed, and delete the DaemonJob.

Fail closed: when the SubjectAccessReview cannot be made (API error, timeout) the request is
refused, saying so; without an answer the webhook cannot tell an operator from anyone else.

Each such review costs the API server a SubjectAccessReview per permission, so answers are
kept a short while (`CachedAccessReviewer`, keyed by user, uid, groups, extra and
permission), as the metrics server keeps TokenReviews: a GitOps tool applying a hundred
maintenance DaemonJobs asks once; and the reviews of answers not kept are rate-limited per
client address and in all, refused beyond the rate (fail closed) with a message saying to
retry, so a flood of reviews from many identities cannot turn the webhook into a flood of
SubjectAccessReviews, nor one pod posting reviews spend the API server's allowance.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
import structlog
from cachetools import LRUCache, TTLCache

from daemonjob import defaults
from daemonjob.domain.spec.maintenancespec import PATH
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.domain.spec.validate import Problem, read_spec
from daemonjob.machinery.client.kube import Kube
from daemonjob.machinery.process.clock import Clock
from daemonjob.machinery.queue.ratelimit import TokenBucket

__all__ = [
    "AccessReviewer",
    "AccessReviewsThrottled",
    "CachedAccessReviewer",
    "EVICT_PODS",
    "KubeAccessReviewer",
    "NODE_POWERS_MISSING",
    "PATCH_NODES",
    "beyond_gc_fields",
    "Permission",
    "must_check",
    "needed",
    "powers_problems",
]

log = structlog.get_logger("daemonjob.admission")

NODE_POWERS_MISSING = "NodeMaintenancePermissionMissing"
SUBJECTACCESSREVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
GC_FIELDS = ("finalizers", "ownerReferences")  # what an update may change without a check
SERVER_FIELDS = ("resourceVersion", "generation", "managedFields")  # written by the API server


@dataclass(frozen=True, slots=True)
class Permission:
    """A cluster-wide permission (no namespace: in every namespace), as `kubectl auth can-i` names it."""

    verb: str
    resource: str
    subresource: str = ""

    def attributes(self) -> dict[str, str]:
        attributes = {"group": "", "verb": self.verb, "resource": self.resource}
        if self.subresource:
            attributes["subresource"] = self.subresource
        return attributes

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}" + (f"/{self.subresource}" if self.subresource else "")


PATCH_NODES = Permission("patch", "nodes")  # kubectl cordon
EVICT_PODS = Permission("create", "pods", "eviction")  # kubectl drain


def needed(spec: DaemonJobSpec) -> tuple[Permission, ...]:
    """What the requester must hold for `spec`'s node maintenance: nothing, a cordon's, or a drain's too."""
    if not spec.asks_maintenance:
        return ()
    return (PATCH_NODES, EVICT_PODS) if spec.asks_drain else (PATCH_NODES,)


def _without_gc_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow view of `obj` without status, the garbage collector's fields and the server's:
    two views compare as the objects would, and no part of the tree is copied (a review may
    carry megabytes of it)."""
    view = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        view["metadata"] = {k: v for k, v in metadata.items() if k not in (*GC_FIELDS, *SERVER_FIELDS)}
    elif "metadata" in obj:
        view["metadata"] = metadata
    return view


def beyond_gc_fields(request: Mapping[str, Any]) -> bool:
    """A create, or an update that changes more than finalizers and ownerReferences: what
    Kubernetes checks a writer's own powers on (node powers here, node reads in nodereads.py)."""
    old = request.get("oldObject")
    if request.get("operation") != "UPDATE" or not isinstance(old, Mapping):
        return True
    return _without_gc_fields(old) != _without_gc_fields(request.get("object") or {})


def must_check(request: Mapping[str, Any]) -> bool:
    """Whether this CREATE or UPDATE of a DaemonJob needs the requester's node powers checked."""
    return bool(needed(read_spec(request.get("object") or {}))) and beyond_gc_fields(request)


class AccessReviewer(Protocol):
    def may(self, user: Mapping[str, Any], permission: Permission) -> bool:
        """Whether `user` (an AdmissionReview's userInfo) holds `permission`; raises when it cannot tell."""
        ...


class KubeAccessReviewer:
    """SubjectAccessReviews on the API server, each within `timeout` seconds (the webhook's own
    deadline is the configuration's timeoutSeconds, 5 s)."""

    def __init__(self, kube: Kube, timeout: float = defaults.WEBHOOK_ACCESS_REVIEW_TIMEOUT) -> None:
        self.kube = kube
        self.timeout = timeout

    def may(self, user: Mapping[str, Any], permission: Permission) -> bool:
        spec: dict[str, Any] = {"resourceAttributes": permission.attributes(), "user": user.get("username") or ""}
        for ours, theirs in (("uid", "uid"), ("groups", "groups"), ("extra", "extra")):
            if user.get(theirs):
                spec[ours] = user[theirs]
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        answer = self.kube.create(SUBJECTACCESSREVIEWS, review, request_timeout=self.timeout)
        return bool((answer.get("status") or {}).get("allowed"))


class AccessReviewsThrottled(Exception):
    """More SubjectAccessReviews of answers not kept than the rate allows: none was asked."""


class CachedAccessReviewer:
    """An AccessReviewer whose answers are kept `ttl` seconds, allowed and denied apart (a
    stream of made-up identities cannot push out an operator's entry), and whose reviews of
    answers not kept are rate-limited per client address (`qps`, `burst` each, for the last
    `max_clients` addresses) and in all (`total_qps`, `total_burst`): beyond, AccessReviewsThrottled,
    unasked. A failed review is not kept.

    Per client address: anyone who can reach the webhook's port may post reviews, and with one
    allowance for all, a pod posting them would spend it and shut out the API server's own
    reviews (the operators') while it lasts. Each address has its own (the API server's
    addresses theirs); the total, a few addresses' worth, still bounds what the API server is
    asked. `for_client(address)` is the reviewer one request uses."""

    def __init__(
        self,
        reviewer: AccessReviewer,
        *,
        ttl: float = defaults.WEBHOOK_ACCESS_REVIEW_CACHE_TTL,
        max_entries: int = defaults.WEBHOOK_ACCESS_REVIEW_CACHE_ENTRIES,
        qps: float = defaults.WEBHOOK_ACCESS_REVIEW_QPS,
        burst: int = defaults.WEBHOOK_ACCESS_REVIEW_BURST,
        total_qps: float = defaults.WEBHOOK_ACCESS_REVIEW_TOTAL_QPS,
        total_burst: int = defaults.WEBHOOK_ACCESS_REVIEW_TOTAL_BURST,
        max_clients: int = defaults.WEBHOOK_ACCESS_REVIEW_CLIENTS,
        clock: Clock | None = None,
        timer: Callable[[], float] | None = None,
    ) -> None:
        self.reviewer = reviewer
        kw: dict[str, Any] = {} if timer is None else {"timer": timer}
        self._allowed: TTLCache[tuple[Any, ...], bool] = TTLCache(max_entries, ttl, **kw)
        self._denied: TTLCache[tuple[Any, ...], bool] = TTLCache(max_entries, ttl, **kw)
        self._qps, self._burst, self._clock = qps, burst, clock
        self._clients: LRUCache[str, TokenBucket] = LRUCache(max_clients)
        self._total = TokenBucket(total_qps, total_burst, clock)
        self._lock = threading.Lock()

    @staticmethod
    def key(user: Mapping[str, Any], permission: Permission) -> tuple[Any, ...]:
        """Everything of the user the authorizer reads, and the permission asked."""
        groups = tuple(sorted(str(g) for g in user.get("groups") or ()))
        extra = orjson.dumps(user.get("extra") or {}, option=orjson.OPT_SORT_KEYS)
        return (str(user.get("username") or ""), str(user.get("uid") or ""), groups, extra, str(permission))

    def for_client(self, client: str) -> AccessReviewer:
        """The reviewer for a request from `client` (its address): its reviews count against its allowance."""
        return _ClientReviewer(self, client)

    def may(self, user: Mapping[str, Any], permission: Permission, client: str = "") -> bool:
        key = self.key(user, permission)
        with self._lock:
            if key in self._allowed:
                return True
            if key in self._denied:
                return False
            bucket = self._clients.get(client)
            if bucket is None:
                bucket = self._clients[client] = TokenBucket(self._qps, self._burst, self._clock)
        if not bucket.allow() or not self._total.allow():
            raise AccessReviewsThrottled()
        allowed = self.reviewer.may(user, permission)
        with self._lock:
            (self._allowed if allowed else self._denied)[key] = True
        return allowed


@dataclass(frozen=True, slots=True)
class _ClientReviewer:
    cached: CachedAccessReviewer
    client: str

    def may(self, user: Mapping[str, Any], permission: Permission) -> bool:
        return self.cached.may(user, permission, self.client)


def _forbidden(message: str) -> Problem:
    return Problem(NODE_POWERS_MISSING, f"{PATH}: Forbidden: {message}")


def powers_problems(request: Mapping[str, Any], reviewer: AccessReviewer) -> list[Problem]:
    """The problem of a requester who may not cordon and drain nodes themselves, or none."""
    if not must_check(request):
        return []
    user = request.get("userInfo")
    user = user if isinstance(user, Mapping) else {}
    name = user.get("username")
    if not isinstance(name, str) or not name:
        return [_forbidden("the request names no user whose permission to cordon and drain nodes could be checked")]
    missing: list[Permission] = []
    for permission in needed(read_spec(request.get("object") or {})):
        try:
            allowed = reviewer.may(user, permission)
        except AccessReviewsThrottled:
            log.warning("node powers not reviewed: too many reviews", user=name, permission=str(permission))
            return [
                _forbidden(
                    f'cannot check now that user "{name}" may {permission}: too many SubjectAccessReviews '
                    "of requesters not checked lately; node maintenance is refused until it can be checked, "
                    "retry in a few seconds"
                )
            ]
        except Exception as exc:  # any failure to ask (API error, timeout, refused connection): fail closed
            log.warning("cannot review node powers", user=name, permission=str(permission), error=str(exc))
            return [
                _forbidden(
                    f'cannot check that user "{name}" may {permission} (SubjectAccessReview failed: {exc}); '
                    "node maintenance is refused until it can be checked"
                )
            ]
        if not allowed:
            missing.append(permission)
    if not missing:
        return []
    log.info("node maintenance refused: permission missing", user=name, missing=[str(p) for p in missing])
    return [
        _forbidden(
            f'user "{name}" may not {" nor ".join(str(p) for p in missing)} in all namespaces: asking for node '
            "maintenance takes the permissions to cordon and drain nodes oneself"
        )
    ]
