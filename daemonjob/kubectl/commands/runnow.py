"""`run-now NAME [--wait [--timeout D]]`: start one run now on every eligible node.

It writes the `daemonjob.io/run-now` annotation, as a user would with
`kubectl annotate dj NAME --overwrite daemonjob.io/run-now=...`: an annotation rather than
a spec field, so a GitOps tool that owns the spec leaves it alone. The controller starts one
run per new value and records the value in `status.lastRunNowTrigger` (under Forbid the run
waits for an active one, and a paused DaemonJob starts it once resumed). `--wait` follows
that run, and only that run, to its verdict, as `wait` follows a rollout.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from daemonjob.domain.schedule.runs import ANNOTATION_RUN_NOW
from daemonjob.domain.shared.apinames import API_VERSION
from daemonjob.domain.spec.validate import read_spec
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.cluster.client import PluginError
from daemonjob.kubectl.commands.wait import Progress, follow_to_exit, progress_of
from daemonjob.kubectl.formats.timefmt import parse_duration
from daemonjob.machinery.client.kube import path_for

TRIGGER_FORMAT = "%Y%m%dt%H%M%Sz"  # the guide's `date -u +%Y%m%dt%H%M%Sz` (docs/guides/kubectl.md)
TRIGGER_FORMAT_FINE = "%Y%m%dt%H%M%S%fz"  # when the same second was used already
REPLACED = "Replaced"


def trigger_value(now: datetime, previous: str | None) -> str:
    """A new value each time: the time in UTC, to the microsecond if that second was taken."""
    now = now.astimezone(timezone.utc)
    value = now.strftime(TRIGGER_FORMAT)
    return value if value != previous else now.strftime(TRIGGER_FORMAT_FINE)


def run_now_patch(value: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {ANNOTATION_RUN_NOW: value}}}


class RunProgress:
    """The progress of the run started by `trigger`: nothing until the controller took the
    trigger (status.lastRunNowTrigger), then that run's counts and verdict. A later run
    (the next tick, another run-now) ends the wait: the run is no longer the one reported."""

    def __init__(self, trigger: str) -> None:
        self.trigger = trigger
        self.run: str | None = None

    def __call__(self, dj: Mapping[str, Any]) -> Progress:
        status = dj.get("status") or {}
        if self.run is None:
            if status.get("lastRunNowTrigger") != self.trigger:
                paused = read_spec(dj).settings.suspend
                note = (
                    "the DaemonJob is paused: the run starts once it is resumed"
                    if paused
                    else "waiting for the controller to start the run"
                )
                return Progress(
                    desired=status.get("desiredNodes") or 0,
                    succeeded=0,
                    failed=0,
                    active=0,
                    pending=status.get("desiredNodes") or 0,
                    verdict=None,
                    message=note,
                )
            self.run = str(status.get("currentRun") or "")
        current = status.get("currentRun")
        if current != self.run:
            return Progress(0, 0, 0, 0, 0, REPLACED, f"run {self.run} was followed by run {current} before it finished")
        return progress_of(dj)


def run(args: argparse.Namespace, target: client.Target) -> int:
    if args.timeout and not args.wait:
        raise PluginError("--timeout applies only with --wait", client.EXIT_USAGE)
    timeout = parse_duration(args.timeout) if args.timeout else 0.0
    start = time.monotonic()
    dj = client.get_daemonjob(target, args.name)
    previous = ((dj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RUN_NOW)
    value = trigger_value(datetime.now(timezone.utc), previous)
    target.kube.patch(path_for(API_VERSION, client.PLURAL, target.namespace, args.name), run_now_patch(value))
    print(f"{client.KIND_RESOURCE}/{args.name} run requested ({ANNOTATION_RUN_NOW}={value})", flush=True)
    if not args.wait:
        return 0
    judge = RunProgress(value)
    return follow_to_exit(
        target,
        args.name,
        judge,
        subject=lambda: f'daemonjob "{args.name}" run {judge.run}',
        success="succeeded",
        timeout=timeout,
        timeout_text=args.timeout,
        what=f'the run of daemonjob "{args.name}"',
        start=start,
    )
