"""Builders of the objects tests feed the controller and the decision: DaemonJobs, their Jobs
as the API server returns them, and Nodes. Each takes only what a test changes."""

from __future__ import annotations

from typing import Any

from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.shared.apinames import API_VERSION, KIND
from daemonjob.domain.spec.revision import template_revision
from daemonjob.domain.spec.validate import read_spec

__all__ = ["NS", "NAME", "UID", "EARLIER", "daemonjob", "job_template", "revision_of", "job", "node", "nodes"]

NS = "ops"
NAME = "audit"
UID = "dj-uid"
EARLIER = "2024-03-01T10:00:00Z"


def job_template(
    annotation: str | None = None,
    labels: dict[str, str] | None = None,
    backoff_limit: int | None = 0,
    *,
    pod_annotations: dict[str, str] | None = None,
    container: dict[str, Any] | None = None,
    pod_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Job template of one busybox container; `annotation` (annotation `run`) makes a new revision.

    `pod_annotations` go on the pod template, where the simulated kubelet reads how a run goes;
    `container` and `pod_spec` fields are laid over the container's and the pod's.
    """
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = labels
    if annotation is not None:
        metadata["annotations"] = {"run": annotation}
    spec: dict[str, Any] = {} if backoff_limit is None else {"backoffLimit": backoff_limit}
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", **(container or {})}]}
    pod.update(pod_spec or {})
    pod_template: dict[str, Any] = {"spec": pod}
    if pod_annotations is not None:
        pod_template = {"metadata": {"annotations": pod_annotations}, **pod_template}
    spec["template"] = pod_template
    return {**({"metadata": metadata} if metadata else {}), "spec": spec}


def daemonjob(
    name: str = NAME,
    namespace: str = NS,
    *,
    template: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    uid: str = UID,
    generation: int = 1,
    resource_version: str | None = "10",
    created: str | None = None,
    status: dict[str, Any] | None = None,
    manifest: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    """A DaemonJob as the API server returns it; `spec` fields are added to the spec in the CRD's
    spelling (None leaves one out), over the template of `job_template()` unless `template` is given.

    `manifest=True` gives the body a client creates instead: of the metadata only the name, labels
    and annotations, since the API server sets the namespace (from the path), uid, generation,
    resourceVersion and creationTimestamp itself.
    """
    meta: dict[str, Any] = {"name": name}
    if not manifest:
        meta.update(namespace=namespace, uid=uid, generation=generation)
        if resource_version is not None:
            meta["resourceVersion"] = resource_version
        if created is not None:
            meta["creationTimestamp"] = created
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    body: dict[str, Any] = {"jobTemplate": template if template is not None else job_template()}
    body.update({k: v for k, v in spec.items() if v is not None})
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": body}
    if status is not None:
        out["status"] = status
    return out


def revision_of(dj: dict[str, Any]) -> str:
    """The revision a DaemonJob's first template (and node parameters) makes (no salt)."""
    return template_revision(read_spec(dj).revision_source)


def job(
    dj: dict[str, Any],
    node_name: str,
    state: str = "active",
    revision: str | None = None,
    created: str = EARLIER,
    finished: str | None = None,
) -> dict[str, Any]:
    """A Job of `dj` as the API server returns it: active, succeeded, failed or terminating."""
    body = build_job(dj, node_name, revision or revision_of(dj))
    body["metadata"]["creationTimestamp"] = created
    body["metadata"]["uid"] = f"uid-{body['metadata']['name']}"
    conditions: list[dict[str, str]] = []
    status: dict[str, Any] = {"startTime": created, "conditions": conditions}
    if state == "succeeded":
        conditions.append({"type": "Complete", "status": "True", "lastTransitionTime": finished or created})
        status["completionTime"] = finished or created
    elif state == "failed":
        conditions.append({"type": "Failed", "status": "True", "lastTransitionTime": finished or created})
    elif state == "terminating":
        body["metadata"]["deletionTimestamp"] = created
    body["status"] = status
    return body


def node(
    name: str,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
) -> dict[str, Any]:
    """A Node; NotReady ones carry no Ready=True condition (their taints are the test's to add)."""
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec, "status": status}


def nodes(*names: str) -> list[dict[str, Any]]:
    return [node(n) for n in names]
