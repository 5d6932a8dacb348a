"""Applying a decision to a list of Jobs as the act layer and the API server would: for tests
of `decide` that run several decisions in a row."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from daemonjob.domain.decide import Decision
from daemonjob.domain.jobs import format_time


def apply(decision: Decision, jobs: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """The Jobs after the act layer: deleted ones start terminating, created ones appear active."""
    gone = {d.name for d in decision.deletes}
    out = []
    for j in jobs:
        j = copy.deepcopy(j)
        if j["metadata"]["name"] in gone:
            j["metadata"]["deletionTimestamp"] = format_time(now)
        out.append(j)
    for c in decision.creates:
        body = copy.deepcopy(c.body)
        body["metadata"]["creationTimestamp"] = format_time(now)
        out.append(body)
    return out
