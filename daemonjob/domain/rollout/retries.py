"""Automatic retries (spec.retry): a failed node runs again, as its next attempt, after a backoff.

A node's failures are counted from the cluster: its failed turns of the current rollout
(revision, run): a turn's verdict where its node is checked (a health check not passed, not
back after its reboot, a Job failed before the reboot or by its start timeout), not its Job's
own state (JobView.turn), so retries end at `limit` and a node has at most limit + 1 turns.
Those Jobs are kept while the rollout is current (plan.py deletes only other rollouts' Jobs as
history). A restart therefore keeps the count, a new revision or run starts
at none, and a failed Job deleted by hand (a rerun) no longer counts. While a node has
failed at most `limit` times it is pending, not failed: it does not spend maxFailedNodes, and
its turn comes once the backoff after its last failure has passed (`Retrying.at`, from the
failed Job's finish time: the same in every process). Its next Job takes the next attempt's
name and label (attempts.py), never the failed Job's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from daemonjob.domain.jobs.contract import FAILED
from daemonjob.domain.jobs.jobview import JobView
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.domain.spec.retryspec import Retry, backoff_delay

__all__ = ["next_retry", "Retrying", "retry_of", "retrying_status", "STATUS_FIELD", "RETRY_BACKOFF"]

STATUS_FIELD = "retryingNodes"
RETRY_BACKOFF = "RetryBackoff"  # Reconciling's reason while only retries wait for their backoff


@dataclass(frozen=True, slots=True, order=True)
class Retrying:
    """A failed node that runs again at `at` (ordered by it): `failures` so far, the last
    failed Job and its attempt."""

    at: datetime
    node: str
    failures: int
    job: str
    attempt: int


def retry_of(jobs: Sequence[JobView], record: JobView, retry: Retry | None) -> Retrying | None:
    """The retry due to a node whose record is `record`, None when it has none left (or none is
    set): the record failed, in the current rollout, and nothing of the node still runs."""
    if retry is None or record.state != FAILED or record.node is None:
        return None
    failures = sum(
        1
        for j in jobs
        if (record.state if j.name == record.name else j.turn) == FAILED
        and j.revision == record.revision
        and j.run == record.run
    )
    if failures > retry.limit:
        return None
    at = (record.finished or record.created) + backoff_delay(retry, failures)
    return Retrying(at, record.node, failures, record.name, record.attempt)


def retrying_status(retrying: Sequence[Retrying], limit: int, cap: int) -> list[dict[str, object]]:
    """status.retryingNodes: the first `cap` nodes waiting to run again, soonest first."""
    return [
        {
            "node": r.node,
            "failedJob": r.job,
            "attempt": r.attempt,
            "failures": r.failures,
            "retriesLeft": limit - r.failures + 1,
            "retryAt": format_time(r.at),
        }
        for r in retrying[:cap]
    ]


def next_retry(retrying: Sequence[Retrying], now: datetime) -> datetime | None:
    """When the soonest retry still backing off at `now` becomes due (the pass to wake then)."""
    return min((r.at for r in retrying if r.at > now), default=None)
