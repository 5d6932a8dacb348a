"""What the unit tests share: the act layer's harness (`bed`) and, for its type and the
builders of DaemonJobs, Jobs and Nodes, `daemonjob.testing.doubles.actbed` and
`daemonjob.testing.doubles.builders`. A new rule's test adds nodes and a DaemonJob to the bed,
reconciles, and reads what was written."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from daemonjob.testing.doubles.actbed import ActBed


@pytest.fixture
def bed() -> Iterator[ActBed]:
    """A controller on fakes, with no node and no DaemonJob yet."""
    bed = ActBed.start()
    yield bed
    bed.stop()
