"""The DaemonJob API's names: its group, kind and resource, and the labels and annotations of its Jobs.

What a Job is found, tied and read by (jobs/contract.py reads them).
"""

from __future__ import annotations

__all__ = [
    "GROUP",
    "API_VERSION",
    "KIND",
    "PLURAL",
    "LABEL_NAME",
    "LABEL_REVISION",
    "LABEL_RUN",
    "LABEL_TEMPLATE_HASH",
    "LABEL_ATTEMPT",
    "ANNOTATION_NODE",
    "ANNOTATION_STARTED",
    "ANNOTATION_START_FAILURE",
    "ANNOTATION_BOOT_ID",
    "ANNOTATION_NODE_CHECK",
]

GROUP = "daemonjob.io"
API_VERSION = f"{GROUP}/v1alpha1"
KIND = "DaemonJob"
PLURAL = "daemonjobs"  # the resource's name in API paths
LABEL_NAME = "daemonjob.io/name"
LABEL_REVISION = "daemonjob.io/revision"
LABEL_RUN = "daemonjob.io/run"  # the run of a scheduled or run-now Job (schedule/runs.py)
ANNOTATION_NODE = "daemonjob.io/node"
# The template hash a Job's revision stands for: with the revision label, the cluster alone
# says which revision a template already has, should the DaemonJob's status be lost.
LABEL_TEMPLATE_HASH = "daemonjob.io/template-hash"
# Which of a node's Jobs of one rollout (revision, run) this is: absent on the first (attempt
# 0), 1 on the Job that replaces it, and so on; each attempt has a name of its own (jobs/attempts.py).
LABEL_ATTEMPT = "daemonjob.io/attempt"
# Written by the controller on a Job whose pod it read once the start timeout passed
# (rollout/starts.py): the pod was running (no need to look again), or why it never ran.
ANNOTATION_STARTED = "daemonjob.io/started"
ANNOTATION_START_FAILURE = "daemonjob.io/start-failure"
# A checked turn (nodework/nodecheck.py, jobs/turnverdict.py) records on its Job the node's boot ID and its verdict.
ANNOTATION_BOOT_ID = "daemonjob.io/boot-id"  # on a Job: its node's boot ID when it was created
ANNOTATION_NODE_CHECK = "daemonjob.io/node-check"  # on a Job: the verdict of its node's turn
