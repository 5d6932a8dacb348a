"""Node parameters are a read of Nodes: only who may read Nodes, or keys an operator allows, pass.

`spec.nodeParameters` copies a node's label or annotation into its Job's pod, where whoever
may read the pod's spec or its logs reads it. The controller reads Nodes with its own
ServiceAccount, so without this check anyone who may edit DaemonJobs in a namespace would
read every node's labels and annotations (third-party annotations, and more), which
namespace users normally cannot. The webhook lets an entry through when its key is in the
cluster operator's allow-list (`--node-parameter-keys`: exact keys, or `prefix/*`), else only
when the requester may `get nodes` themselves (a SubjectAccessReview, the same reviewer,
cache and limits as node powers, powers.py). `daemonjob.io/` keys are refused to everyone
by the rule book (domain/spec/nodeparams.py), before this.

When: as for node powers, on a create, and on every update of a DaemonJob whose entries read
keys outside the allow-list, except one that only changes finalizers or ownerReferences: a
new template is a new way to show the values, so it is the read used again. Fail closed: a
review that cannot be made refuses, saying so.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from daemonjob.admission.powers import AccessReviewer, AccessReviewsThrottled, Permission, beyond_gc_fields
from daemonjob.domain.spec.labelrules import InvalidSelector, validate_label_key
from daemonjob.domain.spec.nodeparams import LABEL, PATH, NodeParameter
from daemonjob.domain.spec.problems import Problem, show
from daemonjob.domain.spec.validate import read_spec

__all__ = ["AllowedKeys", "GET_NODES", "NODE_READ_MISSING", "allowed_keys", "node_reads_problems", "unallowed"]

log = structlog.get_logger("daemonjob.admission")

NODE_READ_MISSING = "NodeParameterPermissionMissing"
GET_NODES = Permission("get", "nodes")
FLAG = "--node-parameter-keys"


@dataclass(frozen=True, slots=True)
class AllowedKeys:
    """Label and annotation keys any DaemonJob may pass: `exact` keys, or any key under a prefix."""

    exact: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()  # "example.com/" for the flag's "example.com/*"

    def allows(self, key: str) -> bool:
        return key in self.exact or any(key.startswith(p) for p in self.prefixes)

    def __str__(self) -> str:
        shown = sorted([*self.exact, *(f"{p}*" for p in self.prefixes)])
        return ", ".join(shown) if shown else "none"


def allowed_keys(text: str) -> AllowedKeys:
    """The flag's value: comma-separated label/annotation keys, each exact or `prefix/*`."""
    exact, prefixes = set(), []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        try:
            if item.endswith("/*"):
                validate_label_key(item[:-2] + "/x", FLAG)  # the prefix as a key's prefix must be
                prefixes.append(item[:-1])
            else:
                exact.add(validate_label_key(item, FLAG))
        except InvalidSelector as exc:
            raise argparse.ArgumentTypeError(exc.message) from None
    return AllowedKeys(frozenset(exact), tuple(sorted(set(prefixes))))


def unallowed(parameters: tuple[NodeParameter, ...], allowed: AllowedKeys) -> list[NodeParameter]:
    """The entries whose key the allow-list does not name."""
    return [p for p in parameters if not allowed.allows(p.key)]


def _forbidden(message: str) -> Problem:
    return Problem(NODE_READ_MISSING, f"{PATH}: Forbidden: {message}")


def _named(entries: list[NodeParameter]) -> str:
    return ", ".join(f"{'label' if p.source == LABEL else 'annotation'} {show(p.key)}" for p in entries)


def node_reads_problems(request: Mapping[str, Any], reviewer: AccessReviewer, allowed: AllowedKeys) -> list[Problem]:
    """The problem of a requester who may not read what the DaemonJob's node parameters read, or none."""
    obj = request.get("object") or {}
    entries = unallowed(read_spec(obj).node_parameters, allowed)
    if not entries or not beyond_gc_fields(request):
        return []
    user = request.get("userInfo")
    user = user if isinstance(user, Mapping) else {}
    name = user.get("username")
    where = {"namespace": request.get("namespace"), "name": request.get("name")}
    if not isinstance(name, str) or not name:
        return [_forbidden("the request names no user whose permission to read Nodes could be checked")]
    try:
        allowed_to_read = reviewer.may(user, GET_NODES)
    except AccessReviewsThrottled:
        log.warning("node reads not reviewed: too many reviews", user=name, **where)
        return [
            _forbidden(
                f'cannot check now that user "{name}" may {GET_NODES}: too many SubjectAccessReviews of '
                "requesters not checked lately; node parameters outside the allowed keys are refused until "
                "it can be checked, retry in a few seconds"
            )
        ]
    except Exception as exc:  # any failure to ask: fail closed
        log.warning("cannot review node reads", user=name, error=str(exc), **where)
        return [
            _forbidden(
                f'cannot check that user "{name}" may {GET_NODES} (SubjectAccessReview failed: {exc}); '
                "node parameters outside the allowed keys are refused until it can be checked"
            )
        ]
    if allowed_to_read:
        return []
    log.info(
        "node parameters refused: permission missing",
        user=name,
        keys=[p.key for p in entries],
        reason=NODE_READ_MISSING,
        **where,
    )
    return [
        _forbidden(
            f'user "{name}" may not {GET_NODES}, and the controller allows no one to read the node\'s '
            f"{_named(entries)} (it allows: {allowed}): passing a node's labels and annotations to its Job "
            "takes the permission to read Nodes oneself"
        )
    ]
