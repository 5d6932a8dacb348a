"""The simulated cluster's Jobs, nodes and clock: what `simcluster.py` sends and how it names them.

A Job is sent as the API server sends one (its managedFields included) from a template per
DaemonJob, so a Job waiting in a watch is a few fields; its uid names its DaemonJob and
node, so its pod is made from the uid alone.
"""

from __future__ import annotations

import re
import time
from typing import Any

import orjson

__all__ = [
    "CREATED",
    "JOB_MANAGED_FIELDS",
    "JobTemplate",
    "api_time",
    "as_served",
    "job_uid",
    "node_index",
    "node_name",
    "of_uid",
]

CREATED = "2026-11-27T02:44:46Z"
# What the API server sends with every Job: the create's and the Job controller's field owners.
JOB_MANAGED_FIELDS = [
    {
        "manager": "daemonjob-controller",
        "operation": "Update",
        "apiVersion": "batch/v1",
        "time": CREATED,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {
                "f:annotations": {".": {}, "f:daemonjob.io/node": {}},
                "f:labels": {".": {}, "f:daemonjob.io/name": {}, "f:daemonjob.io/revision": {}},
                "f:ownerReferences": {".": {}, 'k:{"uid":"u"}': {".": {}, "f:apiVersion": {}, "f:kind": {}}},
            },
            "f:spec": {
                "f:backoffLimit": {},
                "f:completions": {},
                "f:parallelism": {},
                "f:template": {
                    "f:metadata": {"f:labels": {".": {}, "f:daemonjob.io/name": {}}},
                    "f:spec": {
                        "f:containers": {
                            'k:{"name":"work"}': {".": {}, "f:command": {}, "f:image": {}, "f:name": {}, "f:env": {}}
                        },
                        "f:dnsPolicy": {},
                        "f:restartPolicy": {},
                        "f:schedulerName": {},
                        "f:securityContext": {},
                        "f:terminationGracePeriodSeconds": {},
                    },
                },
            },
        },
    },
    {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "batch/v1",
        "time": CREATED,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:active": {}, "f:startTime": {}}},
    },
]


def as_served(job: dict[str, Any], rv: int, uid: str, created: str = CREATED) -> dict[str, Any]:
    """A created Job as the API server stores and sends it: uid, resourceVersion, managedFields."""
    job["metadata"].update(
        resourceVersion=str(rv), uid=uid, creationTimestamp=created, managedFields=JOB_MANAGED_FIELDS
    )
    job.setdefault("status", {})
    return job


def node_name(index: int) -> str:
    return f"node-{index:06d}"


def node_index(name: str) -> int:
    return int(name.removeprefix("node-"))


def job_uid(dj: int, node: int) -> str:
    """A Job's uid, shaped as the API server's, naming its DaemonJob and node."""
    return f"00000000-{dj:04x}-4000-8000-{node:012x}"


def of_uid(uid: str) -> tuple[int, int]:
    parts = uid.split("-")
    return int(parts[1], 16), int(parts[4], 16)


_stamp: tuple[int, str] = (0, "")


def api_time() -> str:
    """The time as the API server writes it; one string a second, shared by what it stamps."""
    global _stamp
    second = int(time.time())
    if _stamp[0] != second:
        _stamp = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _stamp[1]


class JobTemplate:
    """A DaemonJob's Job as served, encoded once with its per-Job fields left open: a Job of
    the same revision is its name and node written in (the first Job checks that it is)."""

    FIELDS = (b"NAME", b"NODE", b"UID", b"RV", b"STATUS", b"CREATED")

    def __init__(self, served: dict[str, Any], name: str, node: str) -> None:
        meta = served["metadata"]
        self.namespace: str = meta["namespace"]
        uid, rv, status, created = meta["uid"], meta["resourceVersion"], served["status"], meta["creationTimestamp"]
        open_meta = {**meta, "uid": "@@UID@@", "resourceVersion": "@@RV@@", "creationTimestamp": "@@CREATED@@"}
        open_fields = {**served, "metadata": open_meta}
        open_fields["status"] = "@@STATUS@@"
        raw = orjson.dumps(open_fields).replace(name.encode(), b"@@NAME@@").replace(node.encode(), b"@@NODE@@")
        raw = raw.replace(b'"@@STATUS@@"', b"@@STATUS@@")
        pieces = re.split(rb"@@(" + b"|".join(self.FIELDS) + rb")@@", raw)
        self.literals, self.fields = pieces[0::2], [self.FIELDS.index(f) for f in pieces[1::2]]
        dj, index = of_uid(uid)
        if self.render(name, index, dj, int(rv), orjson.dumps(status), created) != orjson.dumps(served):
            raise ValueError(f"Job {name}: its fields are not where the template expects them")

    def render(self, name: str, node: int, dj: int, rv: int, status: bytes, created: str) -> bytes:
        values = (
            name.encode(),
            node_name(node).encode(),
            job_uid(dj, node).encode(),
            str(rv).encode(),
            status,
            created.encode(),
        )
        out = [self.literals[0]]
        for field, literal in zip(self.fields, self.literals[1:], strict=True):
            out += (values[field], literal)
        return b"".join(out)
