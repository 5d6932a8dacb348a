"""The changes a decision asks of a DaemonJob's Jobs: a Job to create, a Job to delete.

A create's body is built when read; a delete carries the UID the Job must still have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.spec.nodeparams import Env

__all__ = ["CreateJob", "DeleteJob"]


@dataclass(frozen=True, slots=True)
class CreateJob:
    """A Job to create; its body is built when read, so thousands of creates hold no bodies."""

    node: str
    name: str
    revision: str
    dj: Mapping[str, Any] = field(repr=False, compare=False)
    run: str | None = None
    template_hash: str | None = None
    tolerate_cordon: bool = False  # the node is cordoned for this Job (spec.nodeMaintenance)
    template: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)  # spec.jobTemplate as read
    attempt: int = 0  # above 0: the node's Job re-created after a delete (attempts.py)
    follows: int | None = None  # the attempt of the node's Job the controller saw go, if it did
    node_env: Env = ()  # the node's values of spec.nodeParameters, read when the create was decided
    boot_id: str | None = None  # a checked turn (nodecheck.py): its node's boot ID now, recorded on the Job
    reboot: bool = False  # the Job reboots its node: built to run once (jobbody.with_reboot_fields)

    @property
    def body(self) -> dict[str, Any]:
        """A fresh Job body on each read (the caller may change it)."""
        return build_job(
            self.dj,
            self.node,
            self.revision,
            self.run,
            self.template_hash,
            self.tolerate_cordon,
            self.template,
            attempt=self.attempt,
            node_env=self.node_env,
            boot_id=self.boot_id,
            reboot=self.reboot,
            name=self.name,
        )


@dataclass(frozen=True, slots=True)
class DeleteJob:
    """`uid` lets the act layer delete with a UID precondition (never a newer namesake)."""

    name: str
    node: str | None
    reason: str
    uid: str | None = None
