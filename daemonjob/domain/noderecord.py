"""The record a DaemonJob writes on a Node it takes into maintenance: the truth a successor
reads after a crash, and what eligibility reads to tell this DaemonJob's own cordon from
anyone else's. Its own module, so that eligibility and the maintenance step both read it
without one importing the other."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ANNOTATION_MAINTENANCE", "NodeRecord", "record_of"]

ANNOTATION_MAINTENANCE = "daemonjob.io/maintenance"  # on a Node: the DaemonJob that holds it in maintenance


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """The annotation a DaemonJob writes on a Node it takes into maintenance, before the cordon.

    `cordoned`: this DaemonJob cordoned the node (it was schedulable), so only then does it
    uncordon it; `since`: when the cordon was written (the drain's timeout counts from it)."""

    daemon_job: str  # namespace/name
    uid: str
    revision: str
    run: str | None = None
    cordoned: bool = True
    since: str = ""

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
        )

    def of_rollout(self, revision: str, run: str | None) -> bool:
        return self.revision == revision and self.run == run


def record_of(node: Mapping[str, Any] | None) -> NodeRecord | None:
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION_MAINTENANCE)
    return NodeRecord.parse(text) if text is not None else None
