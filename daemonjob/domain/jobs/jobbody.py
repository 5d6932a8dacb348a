"""The Job body a DaemonJob runs on one node: its template pinned there, labelled and owned.

A Job that reboots its node is made to run once (`with_reboot_fields`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from daemonjob.domain.jobs.owners import owner_reference
from daemonjob.domain.shared.apinames import (
    ANNOTATION_BOOT_ID,
    ANNOTATION_NODE,
    LABEL_ATTEMPT,
    LABEL_NAME,
    LABEL_REVISION,
    LABEL_RUN,
    LABEL_TEMPLATE_HASH,
)
from daemonjob.domain.spec.nodeparams import Env, with_node_env
from daemonjob.domain.spec.revision import job_name
from daemonjob.domain.spec.selectors import REQUIRED_AFFINITY
from daemonjob.domain.spec.validate import read_spec

__all__ = ["build_job", "with_reboot_fields", "UNHEALTHY_TAINTS", "DISRUPTION_FAILS_JOB", "CORDON_TOLERATION"]

NODE_NAME_FIELD = "metadata.name"
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


# The node lifecycle controller's taints a reboot Job's pod tolerates (and the health check reads)
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
