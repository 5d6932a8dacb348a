"""POST /validate-daemonjob: an admission.k8s.io/v1 AdmissionReview in, the answer out.

The rules are `domain.validate.validate`'s problems, the same that set `Stalled`, so an object is
refused at apply time with exactly the messages it would otherwise stall with, all at once.
CREATE is refused on any problem. An UPDATE is refused only when it adds a problem: one
that only removes problems (or keeps them, as a label edit or a finalizer removal does)
passes with the remaining problems as warnings, so an object that got in while the webhook
was away can always be fixed step by step and deleted. DELETE is never refused. Anything
that is not a well-formed AdmissionReview gets a 400 naming what is wrong.

Beside the rule book, the controller's allowance: a DaemonJob asking for node maintenance
outside the namespaces of --node-maintenance-namespaces (`domain.allowance`) has that
problem too, so it is refused on create and on an update that newly asks for it, and an
object that already asked (the flag changed since) can still be edited and deleted.

And the requester's own powers (`powers`, admission/powers.py): asking for node maintenance
takes the permissions to cordon and drain nodes oneself, checked on the API server.

Last, when nothing else refused it, the cluster's own answer (`dry_run`, admission/dryrun.py):
the node Job and its pod created with dryRun=All, their refusals mapped to the DaemonJob's
fields; a dry run that cannot be made is a warning, never a refusal.

An object let in also gets a warning for each setting that has no effect as combined
(`domain.warnings`: a pauseBetweenNodes without maxParallel...); kubectl prints them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from daemonjob.admission.dryrun import REFUSED_BY_CLUSTER, DryRun, changes_what_runs
from daemonjob.domain.nodework.allowance import maintenance_refusal
from daemonjob.domain.shared.apinames import GROUP, KIND
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.domain.spec.validate import Problem, validate
from daemonjob.domain.spec.warnings import no_effect

log = structlog.get_logger("daemonjob.admission")

API_VERSION = "admission.k8s.io/v1"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})  # admission.k8s.io/v1's
WARNINGS_MAX = 10  # the API server passes each warning to the client; a few say enough


Powers = Callable[[Mapping[str, Any]], list[Problem]]  # a request's problems of node powers (powers.py)


class BadReview(ValueError):
    """Not an AdmissionReview this webhook can answer: a 400."""


def parse(body: bytes) -> Mapping[str, Any]:
    """The request of an AdmissionReview v1, or BadReview."""
    try:
        review = json.loads(body)
    except ValueError as exc:
        raise BadReview(f"the body is not JSON: {exc}") from None
    if not isinstance(review, dict):
        raise BadReview("the body is not a JSON object")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != "AdmissionReview":
        raise BadReview(
            f"expected apiVersion {API_VERSION}, kind AdmissionReview; got "
            f"{review.get('apiVersion')!r}, {review.get('kind')!r}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview("request: Required value")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReview("request.uid: Required value")
    if not isinstance(request.get("operation"), str):
        raise BadReview("request.operation: Required value")
    for key in ("object", "oldObject"):
        if request.get(key) is not None and not isinstance(request[key], dict):
            raise BadReview(f"request.{key}: must be an object")
    return request


def _is_daemonjob(request: Mapping[str, Any]) -> bool:
    kind = request.get("kind")
    return isinstance(kind, dict) and kind.get("group") == GROUP and kind.get("kind") == KIND


def _denial(request: Mapping[str, Any], problems: list[Problem]) -> dict[str, Any]:
    """A 422 Invalid status, as the API server's own validation answers, one cause per problem."""
    name = request.get("name") or ((request.get("object") or {}).get("metadata") or {}).get("name") or ""
    return {
        "code": 422,
        "reason": "Invalid",
        "message": "; ".join(p.message for p in problems),
        "details": {
            "name": name,
            "group": GROUP,
            "kind": KIND,
            "causes": [
                {"reason": "FieldValueInvalid", "field": p.field, "message": p.message.split(": ", 1)[-1]}
                for p in problems
            ],
        },
    }


def _checked(
    obj: Mapping[str, Any], namespace: Any, maintenance_namespaces: frozenset[str]
) -> tuple[list[Problem], DaemonJobSpec]:
    """The rule book's problems of `obj`, and the allowance's, with the spec as read; the
    namespace is the request's when the object does not carry one yet."""
    checked = validate(obj)  # read once: the allowance reads the same typed spec
    problems = checked.problems
    metadata = obj.get("metadata") or {}
    if not metadata.get("namespace") and isinstance(namespace, str):
        obj = {**obj, "metadata": {**metadata, "namespace": namespace}}
    refusal = maintenance_refusal(obj, maintenance_namespaces, checked.spec)
    return (problems if refusal is None else [*problems, refusal]), checked.spec


def _problems(obj: Mapping[str, Any], namespace: Any, maintenance_namespaces: frozenset[str]) -> list[Problem]:
    return _checked(obj, namespace, maintenance_namespaces)[0]


@dataclass(frozen=True)
class Checks:
    """What a review checks beside the rule book, as the webhook was started with.

    `maintenance_namespaces`: where node maintenance is allowed (--node-maintenance-namespaces);
    `powers`: the requester's missing node powers, a refusal on any update too (they are the
    requester's, not the object's); `dry_run`: the cluster's own answer to the node Job
    (dryrun.py), asked by `deadline` (time.monotonic()) once the rest found nothing."""

    maintenance_namespaces: frozenset[str] = frozenset()
    powers: Powers | None = None
    dry_run: DryRun | None = None
    deadline: float = float("inf")


def decide(request: Mapping[str, Any], checks: Checks = Checks()) -> dict[str, Any]:
    """The AdmissionResponse to `request` (uid, allowed, and a status or warnings)."""
    maintenance_namespaces, powers, dry_run = checks.maintenance_namespaces, checks.powers, checks.dry_run
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    operation = request["operation"]
    if operation not in ("CREATE", "UPDATE") or request.get("subResource") or not _is_daemonjob(request):
        return response
    obj = request.get("object") or {}
    if ((obj.get("metadata") or {}).get("deletionTimestamp")) is not None:
        return response  # being deleted: finalizers must come off whatever the spec says
    namespace = request.get("namespace")
    problems, spec = _checked(obj, namespace, maintenance_namespaces)
    missing = powers(request) if powers is not None else []
    if not problems and not missing and dry_run is not None and changes_what_runs(request):
        outcome = dry_run(request, spec, checks.deadline)
        problems = outcome.problems
        if outcome.warnings:
            response["warnings"] = outcome.warnings[:WARNINGS_MAX]
    if not problems and not missing:
        return _warned(response, no_effect(obj))
    if operation == "UPDATE" and not missing and all(p.reason != REFUSED_BY_CLUSTER for p in problems):
        old = request.get("oldObject")
        before = (
            {p.message for p in _problems(old, namespace, maintenance_namespaces)} if isinstance(old, dict) else set()
        )
        if all(p.message in before for p in problems):
            response["warnings"] = [p.message for p in problems[:WARNINGS_MAX]]
            return _warned(response, no_effect(obj))
    problems = [*problems, *missing]
    response["allowed"] = False
    response["status"] = _denial(request, problems)
    log.info(
        "refused",
        operation=operation,
        namespace=request.get("namespace"),
        name=request.get("name"),
        fields=[p.field for p in problems],
    )
    return response


def _warned(response: dict[str, Any], idle: list[str]) -> dict[str, Any]:
    """`response` with the warnings of settings that do nothing (domain/spec/warnings.py) after its own."""
    if idle:
        response["warnings"] = [*response.get("warnings", ()), *idle][:WARNINGS_MAX]
    return response


@dataclass(frozen=True)
class Answer:
    """The HTTP answer, and what it was for (the labels of daemonjob_webhook_reviews_total)."""

    code: int
    body: bytes
    operation: str = ""
    result: str = "malformed"  # allowed, warned, refused, malformed


def handle(body: bytes, checks: Checks = Checks()) -> Answer:
    """The answer to a POSTed AdmissionReview; the rest as for decide()."""
    try:
        request = parse(body)
    except BadReview as exc:
        return Answer(400, json.dumps({"error": f"malformed AdmissionReview: {exc}"}).encode())
    operation = request["operation"]
    try:
        response = decide(request, checks)
    except Exception as exc:  # an object no API server sends (metadata a string...): say so, stay up
        log.warning("unreadable object in review", error=repr(exc))
        return Answer(
            400,
            json.dumps({"error": f"malformed AdmissionReview: cannot read the object: {exc!r}"}).encode(),
            operation,
        )
    review = {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
    result = "refused" if not response["allowed"] else "warned" if response.get("warnings") else "allowed"
    return Answer(200, json.dumps(review).encode(), operation, result)
