"""Template revisions and deterministic Job names.

The template hash is a content hash of `spec.jobTemplate`. The revision that labels the
Jobs starts as that hash; when the hash changes, the new revision is the hash salted
with the `metadata.generation` of the change, and both are kept in the status
(`templateHash`, `currentRevision`). A salted revision is fixed in the status before its
first Job is created (as the DaemonSet controller writes its ControllerRevision before
any pod), so a later edit elsewhere in the spec, which moves the generation, cannot
salt it again; and each Job carries the template hash beside its revision, so a status
that is lost is recovered from the Jobs alone. So every template change, a revert to an earlier
template included, is a new revision that runs once on every node, while a change to
anything else in the spec keeps the revision. A user re-runs all nodes by editing the
template (even one annotation). Job names are derived from (DaemonJob, node,
revision, run, attempt), so two racing creates of the same node Job collide on
AlreadyExists instead of producing a duplicate, and a node's Job re-created after a
delete (a new attempt, attempts.py) never takes the name of the Job it replaces.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Revision",
    "template_revision",
    "current_revision",
    "salted_revision",
    "job_name",
    "REVISION_LENGTH",
    "NAME_MAX",
]

REVISION_LENGTH = 10
NAME_MAX = 63  # Job names end up in the job-name label of their pods
NAME_HASH_LENGTH = 10
# Share of the readable prefix the DaemonJob name may always claim, so a long
# node name cannot push it out entirely (and vice versa).
MIN_PART = 16
_INVALID_CHARS = re.compile(r"[^a-z0-9-]+")
_DASHES = re.compile(r"-{2,}")


@dataclass(frozen=True, slots=True)
class Revision:
    """The current revision, the template hash it stands for, and what the status last said."""

    name: str
    template_hash: str
    previous: str | None

    @property
    def changed(self) -> bool:
        return self.previous != self.name

    @property
    def unrecorded(self) -> bool:
        """A revision the cluster cannot tell by itself until the status records it: no Job
        of it may be created before, or a later spec edit would salt it again."""
        return self.changed and self.name != self.template_hash


def _canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def template_revision(job_template: Mapping[str, Any] | None) -> str:
    """Stable 10-hex-char hash of a jobTemplate; key order does not matter, content does."""
    digest = hashlib.sha256(_canonical_json(job_template if job_template is not None else {}))
    return digest.hexdigest()[:REVISION_LENGTH]


def salted_revision(template_hash: str, generation: Any) -> str:
    """The revision of a template that changed at `generation`: differs for each change."""
    digest = hashlib.sha256(f"{template_hash}\x00{generation}".encode())
    return digest.hexdigest()[:REVISION_LENGTH]


def current_revision(template_hash: str, generation: Any, status: Mapping[str, Any], found: str | None = None) -> str:
    """The revision for `template_hash`, given the status the controller last wrote.

    Same template hash as recorded: the recorded revision. No revision recorded (a new
    DaemonJob, or one whose status was lost): `found`, the revision of the newest Job
    labelled with this template hash, else the template hash itself, so a DaemonJob
    re-created with its first template finds its earlier Jobs current. A status written
    before `templateHash` was kept records only a revision equal to the hash. Otherwise
    the template changed: a new revision salted by this generation.
    """
    kept = status.get("currentRevision")
    known = status.get("templateHash")
    if not isinstance(kept, str) or not kept:
        if known is None:
            return found or template_hash
    elif known == template_hash or (known is None and kept == template_hash):
        return kept
    return salted_revision(template_hash, generation)


def _dns_part(text: str) -> str:
    """Lowercase, map anything outside [a-z0-9-] (dots included) to '-', squeeze dashes."""
    return _DASHES.sub("-", _INVALID_CHARS.sub("-", text.lower())).strip("-")


def _trim(text: str, length: int) -> str:
    return text[:length].rstrip("-")


def job_name(dj_name: str, node_name: str, revision: str, run: str | None = None, attempt: int = 0) -> str:
    """`<dj>-<node>-<hash>`, a DNS-1123 label of at most 63 characters.

    The readable parts are shortened as needed; the hash covers the full inputs (the run
    and the attempt too, when there are) so shortened names of different nodes, revisions,
    runs or attempts still differ. Without a run the name is what it was before runs
    existed, and attempt 0 (a node's first Job of a rollout) is what it was before attempts
    existed, so the Jobs of earlier releases keep their names across the upgrade.
    """
    parts: tuple[str, ...] = (dj_name, node_name, revision) if run is None else (dj_name, node_name, revision, run)
    if attempt:
        # a fifth part (the run's place kept, "" without one): no name of fewer parts can equal it
        parts = (dj_name, node_name, revision, run or "", f"attempt {attempt}")
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8"))
    suffix = digest.hexdigest()[:NAME_HASH_LENGTH]
    budget = NAME_MAX - NAME_HASH_LENGTH - 2  # two separating dashes
    dj, node = _dns_part(dj_name), _dns_part(node_name)
    if len(dj) + len(node) > budget:
        dj_len = min(len(dj), max(MIN_PART, budget - len(node)))
        dj = _trim(dj, dj_len)
        node = _trim(node, budget - len(dj))
    prefix = "-".join(p for p in (dj, node) if p)
    return f"{prefix}-{suffix}" if prefix else suffix
