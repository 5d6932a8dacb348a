"""The contract between a DaemonJob and the Jobs it owns.

A node Job is found by its labels (the Job informer watches `daemonjob.io/name`),
tied to its node by an annotation (node names may exceed label value limits) and
pinned there with `matchFields metadata.name`, which, unlike the hostname label,
cannot be spoofed or differ from the node name.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any

import orjson

from daemonjob.domain.spec.nodeparams import Env, with_node_env
from daemonjob.domain.spec.revision import job_name

__all__ = [
    "API_VERSION",
    "GROUP",
    "KIND",
    "PLURAL",
    "REQUIRED_AFFINITY",
    "LABEL_NAME",
    "LABEL_REVISION",
    "LABEL_RUN",
    "ANNOTATION_NODE",
    "LABEL_TEMPLATE_HASH",
    "LABEL_ATTEMPT",
    "job_template_hash",
    "job_attempt",
    "ANNOTATION_STARTED",
    "ANNOTATION_START_FAILURE",
    "job_started",
    "job_suspended",
    "ACTIVE",
    "SUCCEEDED",
    "FAILED",
    "TERMINATING",
    "build_job",
    "controller_ref",
    "daemonjob_ref",
    "owner_uid",
    "owner_id",
    "job_owner_id",
    "owner_reference",
    "job_state",
    "job_node",
    "job_revision",
    "job_run",
    "job_created",
    "job_finish_time",
    "job_ttl",
    "parse_time",
    "format_time",
    "ANNOTATION_BOOT_ID",
    "ANNOTATION_NODE_CHECK",
    "UNHEALTHY_TAINTS",
    "DISRUPTION_FAILS_JOB",
    "with_reboot_fields",
]

GROUP = "daemonjob.io"
_GROUP_PREFIX = GROUP + "/"
API_VERSION = f"{GROUP}/v1alpha1"
KIND = "DaemonJob"
PLURAL = "daemonjobs"  # the resource's name in API paths
LABEL_NAME = "daemonjob.io/name"
LABEL_REVISION = "daemonjob.io/revision"
LABEL_RUN = "daemonjob.io/run"  # the run of a scheduled or run-now Job (see schedule.py)
ANNOTATION_NODE = "daemonjob.io/node"
# The template hash a Job's revision stands for: with the revision label, the cluster alone
# says which revision a template already has, should the DaemonJob's status be lost.
LABEL_TEMPLATE_HASH = "daemonjob.io/template-hash"
# Which of a node's Jobs of one rollout (revision, run) this is: absent on the first (attempt
# 0), 1 on the Job that replaces it, and so on; each attempt has a name of its own (attempts.py).
LABEL_ATTEMPT = "daemonjob.io/attempt"
# Written by the controller on a Job whose pod it read once the start timeout passed
# (starts.py): the pod was running (no need to look again), or why it never ran.
ANNOTATION_STARTED = "daemonjob.io/started"
ANNOTATION_START_FAILURE = "daemonjob.io/start-failure"

ACTIVE = "active"
SUCCEEDED = "succeeded"
FAILED = "failed"
TERMINATING = "terminating"

NODE_NAME_FIELD = "metadata.name"
REQUIRED_AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def parse_time(value: Any) -> datetime | None:
    """Parse an RFC3339 API timestamp to an aware UTC datetime; None if absent or malformed."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str) or not value:
        return None
    return _parse_text(value)


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> datetime | None:
    """Cached: timestamps have second precision, so thousands of Jobs share each one."""
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


_NO_META: Mapping[str, Any] = MappingProxyType({})


def format_time(value: datetime) -> str:
    """RFC3339 in UTC at second precision, as metav1.Time serialises."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime(TIME_FORMAT)


def _meta(job: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = job.get("metadata")  # no `or {}`: a cached Job's metadata is a record, whose truth is a Python call
    return _NO_META if meta is None else meta


def job_node(job: Mapping[str, Any]) -> str | None:
    return (_meta(job).get("annotations") or {}).get(ANNOTATION_NODE) or None


def job_revision(job: Mapping[str, Any]) -> str | None:
    return (_meta(job).get("labels") or {}).get(LABEL_REVISION) or None


def job_template_hash(job: Mapping[str, Any]) -> str | None:
    return (_meta(job).get("labels") or {}).get(LABEL_TEMPLATE_HASH) or None


def job_attempt(job: Mapping[str, Any]) -> int:
    """The Job's attempt: 0 without the label (a first Job, or one made before attempts existed)."""
    value = (_meta(job).get("labels") or {}).get(LABEL_ATTEMPT)
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) <= 9 else 0


def job_started(job: Mapping[str, Any]) -> bool:
    """A pod of the Job ran, as far as the Job tells: a ready or succeeded pod (`status.ready`
    exists from Kubernetes 1.24), or the controller's own mark after reading the pod."""
    annotations = _meta(job).get("annotations") or {}
    if ANNOTATION_STARTED in annotations or ANNOTATION_START_FAILURE in annotations:
        return True
    status = job.get("status") or {}
    return any(isinstance(status.get(k), int) and status[k] > 0 for k in ("ready", "succeeded"))


def job_suspended(job: Mapping[str, Any]) -> bool:
    """`spec.suspend` is set: we never set it, so someone else (Kueue, a person) did."""
    spec = job.get("spec")
    return isinstance(spec, Mapping) and spec.get("suspend") is True


def job_run(job: Mapping[str, Any]) -> str | None:
    """The run a Job belongs to (None for Jobs of a DaemonJob that never had a run)."""
    value = (_meta(job).get("labels") or {}).get(LABEL_RUN)
    return value if isinstance(value, str) and value else None


def job_created(job: Mapping[str, Any]) -> datetime | None:
    return parse_time(_meta(job).get("creationTimestamp"))


def _true_condition(job: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def job_ttl(job: Mapping[str, Any]) -> Any:
    """`spec.ttlSecondsAfterFinished` as set on the Job (by us never; by an admission policy maybe)."""
    spec = job.get("spec")
    return spec.get("ttlSecondsAfterFinished") if isinstance(spec, Mapping) else None


def job_state(job: Mapping[str, Any]) -> str:
    """One of active, succeeded, failed, terminating.

    Only the terminal Complete/Failed conditions count: until then the Job
    controller may still have pods running on the node.
    """
    if _meta(job).get("deletionTimestamp"):
        return TERMINATING
    if _true_condition(job, "Complete") is not None:
        return SUCCEEDED
    if _true_condition(job, "Failed") is not None:
        return FAILED
    return ACTIVE


def job_finish_time(job: Mapping[str, Any]) -> datetime | None:
    """When the Job finished: completionTime (success only), else its terminal condition's time."""
    done = parse_time((job.get("status") or {}).get("completionTime"))
    if done is not None:
        return done
    for kind in ("Complete", "Failed"):
        cond = _true_condition(job, kind)
        if cond is not None:
            return parse_time(cond.get("lastTransitionTime"))
    return None


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference marked controller, whoever it names."""
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def daemonjob_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controller reference if it names a DaemonJob (any version of the group)."""
    ref = controller_ref(obj)
    if ref is None or ref.get("kind") != KIND:
        return None
    api = ref.get("apiVersion") or ""
    return ref if api.startswith(_GROUP_PREFIX) or api == GROUP else None  # the group, any version


def owner_uid(obj: Mapping[str, Any]) -> str:
    """The uid of the DaemonJob controlling `obj` ("" for none)."""
    ref = daemonjob_ref(obj)
    return (ref.get("uid") or "") if ref is not None else ""


def owner_id(namespace: str, uid: str) -> str:
    """A DaemonJob as the owner of Jobs: "namespace/uid". Owner references are namespace-local
    in Kubernetes, so a Job is a DaemonJob's only in the DaemonJob's namespace; every cache
    index and kept record that ties a Job to its owner keys it by this, never by the uid alone."""
    return f"{namespace}/{uid}"


def job_owner_id(obj: Mapping[str, Any]) -> str:
    """The owner id (`owner_id`) of the DaemonJob controlling `obj` ("" for none): its uid, in
    the Job's own namespace. A Job elsewhere carrying that uid gets another id, tied to nothing."""
    ref = daemonjob_ref(obj)
    if ref is None:
        return ""
    return f"{_meta(obj).get('namespace') or ''}/{ref.get('uid') or ''}"


def owner_reference(dj: Mapping[str, Any]) -> dict[str, Any]:
    """The controller reference of a DaemonJob's Jobs; blockOwnerDeletion for Foreground deletes."""
    meta = dj.get("metadata") or {}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


TERMINATION_MESSAGE_POLICY = "FallbackToLogsOnError"  # unless the template sets one
CORDON_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


def _pin_to_node(pod_spec: dict[str, Any], node_name: str) -> None:
    """Replace required node affinity with `metadata.name In [node]`, keep the rest."""
    affinity = pod_spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    node_affinity[REQUIRED_AFFINITY] = {
        "nodeSelectorTerms": [{"matchFields": [{"key": NODE_NAME_FIELD, "operator": "In", "values": [node_name]}]}]
    }
    affinity["nodeAffinity"] = node_affinity
    pod_spec["affinity"] = affinity


def build_job(
    dj: Mapping[str, Any],
    node_name: str,
    revision: str,
    run: str | None = None,
    template_hash: str | None = None,
    tolerate_cordon: bool = False,
    template: Mapping[str, Any] | None = None,
    attempt: int = 0,
    node_env: Env = (),
    boot_id: str | None = None,
    reboot: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    """The batch/v1 Job body that runs revision `revision` (of run `run`, if any) of `dj` on `node_name`.

    `template_hash`: the hash the revision stands for, labelled on the Job (not its pods).
    Only labels and annotations of the template metadata are carried over (as the
    CronJob controller does); the input is deep-copied, never mutated. A run's Jobs and
    their pods carry `daemonjob.io/run`, so one run's Jobs, pods and logs are one selector.
    `tolerate_cordon`: the node was cordoned for this Job (spec.nodeMaintenance), so its pod
    tolerates the cordon's taint, as a DaemonSet's pods do. `template`: spec.jobTemplate as the
    rule book read it (a decision's); None reads `dj`'s spec here. `attempt`: above 0 for a
    node's Job re-created after a delete, labelled on the Job and named apart (attempts.py).
    `node_env`: the node's values of spec.nodeParameters, given to every container beside
    DAEMONJOB_NODE_NAME (nodeparams.py), in the copy made here: no second copy per node.
    `boot_id`: a checked turn's start, recorded on the Job; `reboot`: the Job reboots its node
    (both in nodecheck.py). `name`: the Job's name (`job_name` of the same inputs) when the caller
    has it already, as a decided create does.
    """
    meta = dj.get("metadata") or {}
    dj_name = meta.get("name") or ""
    # A JSON round trip: a deep copy of plain data several times faster than copy.deepcopy.
    if template is None:
        from daemonjob.domain.spec.validate import read_spec  # the rule book builds on this module

        template = read_spec(dj).job_template
    template = orjson.loads(orjson.dumps(template))
    tmeta = template.get("metadata") or {}
    identity = {LABEL_NAME: dj_name, LABEL_REVISION: revision, **({LABEL_RUN: run} if run is not None else {})}
    labels = {**(tmeta.get("labels") or {}), **identity}
    if template_hash is not None:
        labels[LABEL_TEMPLATE_HASH] = template_hash
    if attempt:
        labels[LABEL_ATTEMPT] = str(attempt)
    annotations = dict(tmeta.get("annotations") or {})
    annotations[ANNOTATION_NODE] = node_name

    spec = template.get("spec") or {}
    spec["completions"] = 1
    spec["parallelism"] = 1
    pod_template = spec.get("template") or {}
    pod_meta = pod_template.get("metadata") or {}
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **identity}
    if attempt:
        pod_meta["labels"][LABEL_ATTEMPT] = str(attempt)  # so one attempt's pod and logs are one selector
    pod_template["metadata"] = pod_meta
    pod_spec = pod_template.get("spec") or {}
    _pin_to_node(pod_spec, node_name)
    for container in pod_spec.get("containers") or ():
        # a failure's termination message is then the tail of its log: a recorded result says why
        container.setdefault("terminationMessagePolicy", TERMINATION_MESSAGE_POLICY)
    with_node_env(pod_spec, node_name, node_env)
    if tolerate_cordon:
        pod_spec["tolerations"] = [*(pod_spec.get("tolerations") or ()), dict(CORDON_TOLERATION)]
    pod_template["spec"] = pod_spec
    spec["template"] = pod_template

    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name or job_name(dj_name, node_name, revision, run, attempt),
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(dj)],
        },
        "spec": spec,
    }
    if boot_id is not None:
        annotations[ANNOTATION_BOOT_ID] = boot_id
        if reboot:
            with_reboot_fields(job)
    return job


# A checked turn (nodework/nodecheck.py) records on its Job the node's boot ID and its verdict.
ANNOTATION_BOOT_ID = "daemonjob.io/boot-id"  # on a Job: its node's boot ID when it was created
ANNOTATION_NODE_CHECK = "daemonjob.io/node-check"  # on a Job: the verdict of its node's turn
UNHEALTHY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
DISRUPTION_FAILS_JOB = {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def with_reboot_fields(job: dict[str, Any]) -> None:
    """A Job body made to run once even though its node reboots under it (see nodework/nodecheck.py)."""
    spec = job.setdefault("spec", {})
    spec["backoffLimit"] = 0
    spec["podFailurePolicy"] = {"rules": [dict(DISRUPTION_FAILS_JOB)]}
    spec["podReplacementPolicy"] = "Failed"
    pod_spec = (spec.get("template") or {}).get("spec")
    if isinstance(pod_spec, dict):
        stay = [{"key": key, "operator": "Exists", "effect": "NoExecute"} for key in UNHEALTHY_TAINTS]
        pod_spec["tolerations"] = [*(pod_spec.get("tolerations") or ()), *stay]
