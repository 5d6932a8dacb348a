"""The project's own tests load the test bed's pytest plugin here; it is not registered on
install (see daemonjob/testing/pytest_plugin.py).

It also orders the test files longest first, from test/durations.json. Under `--dist
loadfile` a file is what a worker takes, so a long file taken last ends the run alone while
the other workers idle; taken first, the short files fill in around it (the longest-first
rule of scheduling). setup.cfg turns off xdist's own reordering, which puts the files with
the most tests first. `pytest --record-durations` rewrites the file from a run's timings.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

pytest_plugins = ["daemonjob.testing.pytest_plugin"]

DURATIONS = Path(__file__).resolve().parent / "test" / "durations.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"write each test file's seconds (setup, call, teardown) to {DURATIONS.name} at the end",
    )


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        seconds: dict[str, float] = json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return
    # A file not timed yet may be long: it goes first rather than risk ending the run.
    unknown = max(seconds.values(), default=0.0) + 1
    items.sort(key=lambda item: -seconds.get(_file(item.nodeid), unknown))  # stable: a file's own order kept


class _Timings:
    """Each file's seconds, summed on the process that runs the session (xdist's controller too)."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[_file(report.nodeid)] += report.duration

    def pytest_sessionfinish(self) -> None:
        """Merged into the table: a run of some files leaves the others' times as they were."""
        if not self.seconds:
            return
        table = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
        table.update({name: round(s, 1) for name, s in self.seconds.items()})
        DURATIONS.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("record_durations") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Timings(), "daemonjob-timings")
