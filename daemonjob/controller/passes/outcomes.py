"""What the act layer's writes came to: per write kind, and for a whole pass's act step."""

from __future__ import annotations

from dataclasses import dataclass, field

from daemonjob.controller.runtime.events import error_message
from daemonjob.domain.jobs.changes import CreateJob, DeleteJob
from daemonjob.domain.shared.events import EventSpec
from daemonjob.machinery.client.kube import ApiError

__all__ = ["Acted", "CreateOutcome", "DeleteOutcome"]


@dataclass(slots=True)
class DeleteOutcome:
    deleted: list[DeleteJob] = field(default_factory=list)
    failed: list[tuple[DeleteJob, Exception]] = field(default_factory=list)


@dataclass(slots=True)
class CreateOutcome:
    created: list[CreateJob] = field(default_factory=list)
    existed: list[CreateJob] = field(default_factory=list)  # AlreadyExists: to be resolved
    failed: list[tuple[CreateJob, Exception]] = field(default_factory=list)
    error: Exception | None = None  # the first failure; later batches were not sent
    skipped: int = 0  # creates not attempted after the failure

    @property
    def rejected(self) -> ApiError | None:
        """The create the API server refused as invalid: the spec needs a user's change."""
        return self.error if isinstance(self.error, ApiError) and self.error.invalid else None

    def rejected_nodes(self) -> dict[str, str]:
        """Node -> the API server's message, for each create it refused (admission, quota, validation)."""
        return {c.node: error_message(e) for c, e in self.failed if isinstance(e, ApiError) and e.invalid}


@dataclass(slots=True)
class Acted:
    """A pass's act step: the errors of what failed (the rest was done), the Events that say
    what was done, and how many Jobs it created (and held back: backpressure.py)."""

    errors: list[Exception] = field(default_factory=list)
    created: int = 0
    held: int = 0
    events: list[EventSpec] = field(default_factory=list)
