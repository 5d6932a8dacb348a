"""Who wrote what, from the API server's audit log rather than from the writer's own metrics.

A controller that believes it stopped writing cannot be trusted to count its own writes: the
API server's log (LocalCluster with `ClusterOptions(audit=True)`, JSON lines) records every
answered write with the authenticated user and the time it completed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson

__all__ = ["AUDIT_POLICY", "WRITE_VERBS", "AuditRecord", "AuditLog", "parse_time"]

# Writes that tell who acted (controller replicas, tests): Metadata level, one JSON line per
# request once answered. Node heartbeats (kube-node-lease) are left out: they are most requests.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
  namespaces: [kube-node-lease]
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - {group: batch, resources: [jobs]}
  - {group: daemonjob.io, resources: [daemonjobs, daemonjobs/status]}
  - {group: "", resources: [events]}
  - {group: events.k8s.io, resources: [events]}
  - {group: coordination.k8s.io, resources: [leases]}
  - {group: "", resources: [nodes, pods/eviction]}
- level: None
"""

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp of the audit log (microseconds, 'Z') as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True)
class AuditRecord:
    user: str
    verb: str
    group: str  # "" for the core group
    resource: str
    subresource: str
    name: str
    namespace: str
    received: datetime  # requestReceivedTimestamp
    completed: datetime  # stageTimestamp of ResponseComplete
    code: int  # HTTP status of the answer (0 if none)

    @property
    def write(self) -> bool:
        return self.verb in WRITE_VERBS

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300

    @classmethod
    def from_event(cls, event: dict) -> AuditRecord:
        ref = event.get("objectRef") or {}
        return cls(
            user=(event.get("user") or {}).get("username", ""),
            verb=event.get("verb", ""),
            group=ref.get("apiGroup", ""),
            resource=ref.get("resource", ""),
            subresource=ref.get("subresource", ""),
            name=ref.get("name", ""),
            namespace=ref.get("namespace", ""),
            received=parse_time(event["requestReceivedTimestamp"]),
            completed=parse_time(event["stageTimestamp"]),
            code=int((event.get("responseStatus") or {}).get("code") or 0),
        )


class AuditLog:
    """The records of one audit log file; `mark()` then `records(since=...)` reads only what is new."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def mark(self) -> int:
        """The log's current end: records written after this call come after this offset."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def records(self, since: int = 0) -> list[AuditRecord]:
        """Answered requests (stage ResponseComplete) from byte offset `since` on."""
        try:
            with open(self.path, "rb") as f:
                f.seek(since)
                data = f.read()
        except FileNotFoundError:
            return []
        out = []
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:  # the last line, still being written
                continue
            if event.get("stage") == "ResponseComplete":
                out.append(AuditRecord.from_event(event))
        return out

    def writes(
        self,
        *,
        user: str | None = None,
        users: Iterable[str] | None = None,
        after: datetime | None = None,
        resources: Iterable[str] | None = None,
        namespace: str | None = None,
        since: int = 0,
        succeeded_only: bool = False,
    ) -> list[AuditRecord]:
        """Write requests, filtered: by user(s); received after `after`; of these resources
        ("jobs", "daemonjobs/status", ...); in a namespace; answered 2xx only."""
        wanted_users = set(users or ()) | ({user} if user else set())
        wanted = set(resources or ())
        out = []
        for r in self.records(since):
            if not r.write:
                continue
            if wanted_users and r.user not in wanted_users:
                continue
            if after is not None and r.received <= after:
                continue
            if wanted and r.resource not in wanted and f"{r.resource}/{r.subresource}" not in wanted:
                continue
            if namespace is not None and r.namespace != namespace:
                continue
            if succeeded_only and not r.succeeded:
                continue
            out.append(r)
        return out
