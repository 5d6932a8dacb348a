"""Refused at apply for what the cluster would refuse: the node Job, and its pod, made with dryRun=All.

The rule book knows the DaemonJob's own rules; the Job API's validation (a template with no
containers, a container without an image, an invalid label) and the namespace's admission
(Pod Security, quotas' object counts, other webhooks) are the API server's to tell. So the
webhook asks it: it creates, with `dryRun=All`, the Job the controller would make for a
representative eligible node (built by `domain/jobs/jobbody.py`, as the controller builds it), then
the pod the Job controller would make of it, since Pod Security enforces on pods only (on a
Job it only warns). Nothing is persisted. Their refusals come back as problems whose field
paths are mapped to the DaemonJob's (`spec.template.spec.containers` of the Job is
`spec.jobTemplate.spec.template.spec.containers`).

As the controller's identity: the controller is who creates the node Jobs, so policies that
tell users apart (an exemption for the controller's ServiceAccount, a quota) answer the
question that matters, whether the controller's create will pass; the requester's own
powers over Jobs do not matter (DaemonJob editors need none), and impersonating them would
take a power the controller should not hold.

Never a refusal of its own: when the dry run cannot be made (out of time within the
webhook's timeout, a 5xx or 429, the controller forbidden to create there, a webhook that
does not support dry runs) the DaemonJob is admitted with a warning saying so; the
controller still reports any refusal later as `Stalled`. A pod refused for an exceeded
quota is a warning too: pods come and go, and the Jobs wait for room.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from daemonjob import defaults
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.spec.nodeparams import node_values
from daemonjob.domain.spec.problems import Problem
from daemonjob.domain.spec.revision import template_revision
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.machinery.client.kube import ApiError, Kube, path_for

__all__ = [
    "ClusterDryRun",
    "DryRun",
    "Outcome",
    "REFUSED_BY_CLUSTER",
    "changes_what_runs",
    "dry_run_job",
    "map_field",
    "pod_of",
    "refusal",
    "representative_node",
]

log = structlog.get_logger("daemonjob.admission")

REFUSED_BY_CLUSTER = "RefusedByCluster"
PLACEHOLDER_NODE = "daemonjob-dry-run"  # no node eligible now: the Job is pinned to no real one
PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"  # a dry-run create of the DaemonJob may carry none
SERVER_TIMEOUT_SLACK = 2  # seconds the API server's deadline for a dry run is past the client's
JOB_BASE = "spec.jobTemplate"
POD_BASE = "spec.jobTemplate.spec.template"
_RBAC_FORBIDDEN = re.compile(r'is forbidden: User ".*" cannot create resource')
_TEMPLATE_META = re.compile(r"^spec\.template\.(labels|annotations)\b")
_OBJECT_PREFIX = re.compile(r'^(jobs\.batch|pods|Job\.batch|Pod) "[^"]*" is (forbidden|invalid): ')


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the dry run found: refusals as problems, or why it was not made (warnings)."""

    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


DryRun = Callable[[Mapping[str, Any], DaemonJobSpec, float], Outcome]  # (request, spec, deadline) -> Outcome


def changes_what_runs(request: Mapping[str, Any]) -> bool:
    """A create, or an update of the template or the node parameters: a label edit or a
    finalizer's removal is never held back by a policy that changed since."""
    if request.get("operation") != "UPDATE":
        return True
    new, old = ((request.get(k) or {}).get("spec") or {} for k in ("object", "oldObject"))
    return any(new.get(k) != old.get(k) for k in ("jobTemplate", "nodeParameters"))


def representative_node(nodes: Iterable[Mapping[str, Any]], spec: DaemonJobSpec) -> Mapping[str, Any] | None:
    """An eligible node (the first the cache gives), None when none is or the rules do not compile."""
    if spec.eligibility is None:
        return None
    return next((n for n in nodes if spec.eligibility.eligible(n)), None)


def dry_run_job(
    obj: Mapping[str, Any], namespace: str, spec: DaemonJobSpec, node: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The Job the controller would create on `node` (a placeholder name when there is none)."""
    meta = obj.get("metadata") or {}
    dj = {**obj, "metadata": {**meta, "namespace": namespace, "uid": meta.get("uid") or PLACEHOLDER_UID}}
    node_name = ((node or {}).get("metadata") or {}).get("name") or PLACEHOLDER_NODE
    revision = template_revision(spec.revision_source)
    return build_job(
        dj,
        node_name,
        revision,
        template_hash=revision,
        tolerate_cordon=spec.maintenance is not None and spec.maintenance.cordon,  # as on a node it cordons
        template=spec.job_template,
        node_env=node_values(spec.node_parameters, node),
    )


def pod_of(job: Mapping[str, Any]) -> dict[str, Any]:
    """The pod the Job controller would make of `job` (its template, labelled with the Job's name)."""
    name = (job.get("metadata") or {}).get("name") or ""
    template = (job.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    labels = {**(tmeta.get("labels") or {}), "batch.kubernetes.io/job-name": name, "job-name": name}
    metadata: dict[str, Any] = {"generateName": f"{name}-", "labels": labels}
    if tmeta.get("annotations"):
        metadata["annotations"] = tmeta["annotations"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template.get("spec") or {}}


def map_field(path: str, kind: str) -> str:
    """A field of the dry-run Job (kind Job) or pod (kind Pod) as a field of the DaemonJob."""
    if kind == "Job":
        # the Job API names its pod template's labels spec.template.labels: the field is metadata's
        path = _TEMPLATE_META.sub(r"spec.template.metadata.\1", path)
        return "metadata.name" if path == "metadata.name" else f"{JOB_BASE}.{path}" if path else JOB_BASE
    return f"{POD_BASE}.{path}" if path else f"{POD_BASE}.spec"


def _not_made(exc: ApiError, kind: str) -> bool:
    """The dry run itself failed (no answer about the object): warn, never refuse."""
    if exc.status >= 500 or exc.status == 429 or exc.reason == "Timeout":
        return True
    if exc.status in (401, 403) and _RBAC_FORBIDDEN.search(exc.message):
        return True
    if exc.status == 400 and "dry run" in exc.message.lower():  # a webhook with side effects
        return True
    return kind == "Pod" and exc.status == 403 and "exceeded quota" in exc.message


def refusal(exc: ApiError, kind: str) -> list[Problem] | None:
    """`exc` as problems of the DaemonJob; None when it says the dry run could not be made."""
    if _not_made(exc, kind):
        return None
    causes = ((exc.body.get("details") or {}).get("causes") or []) if isinstance(exc.body, Mapping) else []
    problems = [
        Problem(
            REFUSED_BY_CLUSTER,
            f"{map_field(c.get('field') or '', kind)}: {c.get('message') or exc.reason}",
            map_field(c.get("field") or "", kind),
        )
        for c in causes
        if isinstance(c, Mapping) and c.get("field")
    ]
    if problems:
        return problems
    what = "node Job" if kind == "Job" else "node Job's pod"
    base = map_field("", kind)
    detail = _OBJECT_PREFIX.sub("", exc.message) or exc.reason
    return [Problem(REFUSED_BY_CLUSTER, f"{base}: Forbidden: the namespace refuses the {what}: {detail}", base)]


class ClusterDryRun:
    """The dry run on the API server, as the controller; `nodes`: the controller's node cache."""

    def __init__(
        self,
        kube: Kube,
        nodes: Callable[[], Iterable[Mapping[str, Any]]],
        call_timeout: float = defaults.WEBHOOK_DRY_RUN_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.nodes = nodes
        self.call_timeout = call_timeout
        self.clock = clock

    def __call__(self, request: Mapping[str, Any], spec: DaemonJobSpec, deadline: float) -> Outcome:
        obj = request.get("object") or {}
        namespace = (obj.get("metadata") or {}).get("namespace") or request.get("namespace") or ""
        job = dry_run_job(obj, namespace, spec, representative_node(self.nodes(), spec))
        answer, outcome = self._create(path_for("batch/v1", "jobs", namespace), job, "Job", deadline)
        if answer is None:
            return outcome
        pod = pod_of(answer if answer.get("spec") else job)
        return self._create(path_for("v1", "pods", namespace), pod, "Pod", deadline)[1]

    def _create(
        self, path: str, body: dict[str, Any], kind: str, deadline: float
    ) -> tuple[Mapping[str, Any] | None, Outcome]:
        left = deadline - self.clock()
        if left < defaults.WEBHOOK_DRY_RUN_MIN:
            return None, _skipped(kind, "no time left within the webhook's timeout")
        timeout = min(self.call_timeout, left)
        # The API server's own deadline comes after ours: within it, a webhook with
        # failurePolicy Ignore that is too slow would be skipped and the dry run pass without
        # its word; past ours it is "not made", a warning. It still bounds the server's work.
        server_timeout = f"{int(timeout) + SERVER_TIMEOUT_SLACK}s"
        try:
            answer = self.kube.create(path, body, request_timeout=timeout, dryRun="All", timeout=server_timeout)
        except ApiError as exc:
            problems = refusal(exc, kind)
            if problems is None:
                return None, _skipped(kind, f"{exc.status} {exc.reason}: {exc.message}")
            log.info("refused by the cluster's dry run", kind=kind, fields=[p.field for p in problems])
            return None, Outcome(problems=problems)
        except Exception as exc:  # a timeout, a connection error: no answer about the object
            return None, _skipped(kind, repr(exc))
        return answer, Outcome()


def _skipped(kind: str, why: str) -> Outcome:
    log.warning("dry run not made", kind=kind, why=why)
    what = "node Job" if kind == "Job" else "node Job's pod"
    return Outcome(
        warnings=[
            f"the dry run of a {what} could not be made ({why}): what the namespace's admission would refuse "
            "is known only once the controller creates the Jobs (as Stalled)"
        ]
    )
