"""A Job name this DaemonJob needs, held by a Job it may not adopt."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Conflict"]


@dataclass(frozen=True, slots=True)
class Conflict:
    """A deterministic Job name taken by a Job this DaemonJob may not adopt."""

    node: str
    job: str
    owner: str

    @property
    def text(self) -> str:
        return f"Job {self.job} for node {self.node} exists and is controlled by {self.owner}"
