"""The records a DaemonJob writes on a Node: the maintenance record of a node it holds (the
truth a successor reads after a crash, and what eligibility reads to tell this DaemonJob's
own cordon from anyone else's), and the outcome of a drain that timed out (what keeps a
released node out of the rest of its rollout). Its own module, so that eligibility and the
maintenance step both read them without one importing the other.

Both live on the Node rather than in the DaemonJob's status: the status lists are cut at
1000 names, a Node's annotations hold one node's truth whatever the cluster's size."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANNOTATION_MAINTENANCE",
    "DRAIN_OUTCOME_PREFIX",
    "DrainOutcome",
    "NodeRecord",
    "outcome_annotation",
    "outcomes_of",
    "record_of",
]

ANNOTATION_MAINTENANCE = "daemonjob.io/maintenance"  # on a Node: the DaemonJob that holds it in maintenance
DRAIN_OUTCOME_PREFIX = "daemonjob.io/drain-timed-out."  # + a DaemonJob's uid: its drain of the node timed out


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """The annotation a DaemonJob writes on a Node it takes into maintenance, before the cordon.

    `cordoned`: this DaemonJob cordoned the node (it was schedulable), so only then does it
    uncordon it; `since`: when the cordon was written (the drain's timeout counts from it);
    `kept`: its Job failed under keepFailedCordoned, so the node stays cordoned, at later
    revisions and runs too, until a person releases it (`kubectl daemonjob release`)."""

    daemon_job: str  # namespace/name
    uid: str
    revision: str
    run: str | None = None
    cordoned: bool = True
    since: str = ""
    kept: bool = False

    def text(self) -> str:
        body: dict[str, Any] = {
            "daemonJob": self.daemon_job,
            "uid": self.uid,
            "revision": self.revision,
            "cordoned": self.cordoned,
            "since": self.since,
        }
        if self.run is not None:
            body["run"] = self.run
        if self.kept:
            body["kept"] = True
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, text: Any) -> NodeRecord | None:
        """The record in an annotation's text; None if it is not one (hand-edited, say)."""
        try:
            body = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None
        if not isinstance(body, Mapping):
            return None
        dj, uid, revision = body.get("daemonJob"), body.get("uid"), body.get("revision")
        run, since = body.get("run"), body.get("since", "")
        if not (isinstance(dj, str) and isinstance(uid, str) and uid and isinstance(revision, str)):
            return None
        return cls(
            dj,
            uid,
            revision,
            run if isinstance(run, str) else None,
            body.get("cordoned") is True,
            since if isinstance(since, str) else "",
            body.get("kept") is True,
        )

    def same_cordon(self, other: NodeRecord) -> bool:
        """The same DaemonJob's same cordon of the node (whether kept since or not)."""
        return (self.uid, self.revision, self.run, self.since) == (other.uid, other.revision, other.run, other.since)

    def of_rollout(self, revision: str, run: str | None) -> bool:
        return self.revision == revision and self.run == run


def record_of(node: Mapping[str, Any] | None) -> NodeRecord | None:
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION_MAINTENANCE)
    return NodeRecord.parse(text) if text is not None else None


@dataclass(frozen=True, slots=True)
class DrainOutcome:
    """A drain that timed out: written with the node's release, in the same patch, and read
    back by every later pass (and a restarted controller) so the node takes no new turn in
    that revision or run. One annotation per DaemonJob (`outcome_annotation`), so one
    DaemonJob's outcome never hides another's; a later cordon by the same DaemonJob removes it."""

    daemon_job: str  # namespace/name
    uid: str
    revision: str
    run: str | None
    on_timeout: str  # Fail: the node counts as failed; Skip: it is left out of the rollout

    @property
    def annotation(self) -> str:
        return outcome_annotation(self.uid)

    def text(self) -> str:
        body: dict[str, Any] = {
            "daemonJob": self.daemon_job,
            "revision": self.revision,
            "onTimeout": self.on_timeout,
        }
        if self.run is not None:
            body["run"] = self.run
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @classmethod
    def parse(cls, uid: str, text: Any) -> DrainOutcome | None:
        try:
            body = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None
        if not isinstance(body, Mapping):
            return None
        dj, revision, run, policy = body.get("daemonJob"), body.get("revision"), body.get("run"), body.get("onTimeout")
        if not (isinstance(dj, str) and isinstance(revision, str) and isinstance(policy, str) and uid):
            return None
        return cls(dj, uid, revision, run if isinstance(run, str) else None, policy)

    def of_rollout(self, revision: str, run: str | None) -> bool:
        return self.revision == revision and self.run == run


def outcome_annotation(uid: str) -> str:
    return DRAIN_OUTCOME_PREFIX + uid


def outcomes_of(node: Mapping[str, Any] | None) -> list[DrainOutcome]:
    """The drain outcomes on a Node, of every DaemonJob that left one."""
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    out = []
    for key, text in annotations.items():
        if key.startswith(DRAIN_OUTCOME_PREFIX):
            outcome = DrainOutcome.parse(key[len(DRAIN_OUTCOME_PREFIX) :], text)
            if outcome is not None:
                out.append(outcome)
    return out
