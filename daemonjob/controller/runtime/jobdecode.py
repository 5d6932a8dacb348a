"""The Job watch's events decoded into what `job_transform` and the informer read, and no more.

A Job event is about 3 KB of JSON, most of it the pod template and managedFields, which the
cache drops at once: decoded generically, each event built and freed some sixty dicts and
lists for a few fields. msgspec decodes into these TypedDicts (plain dicts, only the keys
named here) and skips the rest unbuilt. An event of another shape (an ERROR's Status, whose
`status` is a string) or a field of an unexpected type is decoded the generic way.
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec
import orjson

__all__ = ["decode_job_event"]


class _OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


class _Metadata(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[_OwnerReference]


class _Condition(TypedDict, total=False):
    type: str
    status: str
    lastTransitionTime: str


class _Status(TypedDict, total=False):
    conditions: list[_Condition]
    completionTime: str


class _PodMetadata(TypedDict, total=False):
    annotations: dict[str, str]


class _PodTemplate(TypedDict, total=False):
    metadata: _PodMetadata  # its annotations only: a checked turn's sealed boot ID (turnseal.py)


class _Spec(TypedDict, total=False):
    ttlSecondsAfterFinished: int
    template: _PodTemplate


class _Job(TypedDict, total=False):
    metadata: _Metadata
    spec: _Spec
    status: _Status


class _Event(TypedDict):
    type: str
    object: _Job


_decoder = msgspec.json.Decoder(_Event)


def decode_job_event(line: bytes) -> dict[str, Any]:
    """One watch event of the Job watch; the generic decode when it is not a Job's shape."""
    try:
        return _decoder.decode(line)  # type: ignore[return-value]
    except msgspec.ValidationError:
        return orjson.loads(line)
