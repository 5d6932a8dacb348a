"""`wait NAME` / `rollout status NAME`: follow a rollout to Complete (exit 0) or Failed (exit 3).

Reads only the DaemonJob (its status carries the counts), once a second: cheap at any scale.
A verdict counts only once the controller has observed the current generation.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from daemonjob import defaults
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.formats.output import is_terminal
from daemonjob.kubectl.formats.timefmt import human_duration, parse_duration

if TYPE_CHECKING:
    from rich.console import Console

EXIT_FAILED = client.EXIT_FAILED
EXIT_TIMEOUT = client.EXIT_ERROR


@dataclass(frozen=True, slots=True)
class Progress:
    desired: int
    succeeded: int
    failed: int
    active: int
    pending: int
    verdict: str | None  # "Complete", "Failed", "Stalled" or None while in progress
    message: str

    @property
    def done(self) -> int:
        return self.succeeded + self.failed


def _true(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or ():
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def progress_of(dj: Mapping[str, Any]) -> Progress:
    """The counts and, once observed, the verdict of a DaemonJob's status."""
    status = dj.get("status") or {}
    observed = status.get("observedGeneration") is not None and status.get("observedGeneration") == (
        dj.get("metadata") or {}
    ).get("generation")
    verdict, message = None, ""
    if observed:
        for kind in ("Complete", "Failed", "Stalled"):
            cond = _true(status, kind)
            if cond is not None:
                verdict, message = kind, cond.get("message") or cond.get("reason") or ""
                break
    return Progress(
        desired=status.get("desiredNodes") or 0,
        succeeded=status.get("succeededNodes") or 0,
        failed=status.get("failedNodes") or 0,
        active=status.get("activeNodes") or 0,
        pending=status.get("pendingNodes") or 0,
        verdict=verdict,
        message=message,
    )


class Rate:
    """Nodes finished per second since the first reading, and the time left at that pace."""

    def __init__(self, now: float, done: int) -> None:
        self.t0, self.done0 = now, done

    def per_second(self, now: float, done: int) -> float:
        elapsed = now - self.t0
        return (done - self.done0) / elapsed if elapsed > 0 and done > self.done0 else 0.0

    def left(self, now: float, p: Progress) -> str:
        rate = self.per_second(now, p.done)
        return human_duration((p.desired - p.done) / rate) if rate > 0 and p.desired > p.done else "?"


def plain_line(p: Progress, rate: Rate, now: float) -> str:
    return (
        f"{datetime.now().strftime('%H:%M:%S')} {p.done}/{p.desired} nodes done, {p.failed} failed, "
        f"{p.active} active, {p.pending} pending, {rate.per_second(now, p.done):.1f} nodes/s, "
        f"{rate.left(now, p)} left"
    )


def run(args: argparse.Namespace, target: client.Target) -> int:
    timeout = parse_duration(args.timeout) if args.timeout else 0.0
    return follow_to_exit(
        target,
        args.name,
        progress_of,
        subject=lambda: f'daemonjob "{args.name}"',
        success="successfully rolled out",
        timeout=timeout,
        timeout_text=args.timeout,
    )


def follow_to_exit(
    target: client.Target,
    name: str,
    judge: Callable[[Mapping[str, Any]], Progress],
    *,
    subject: Callable[[], str],
    success: str,
    timeout: float = 0.0,
    timeout_text: str | None = None,
    what: str = "",
    start: float | None = None,
) -> int:
    """`follow`, then say the verdict and return the exit code: 0 when Complete (`success`
    said on stdout), EXIT_FAILED otherwise, EXIT_TIMEOUT when the time ran out. `subject()`
    names what the verdict is about, asked once it is known."""
    p = follow(target, name, judge, timeout=timeout, timeout_text=timeout_text, what=what, start=start)
    if p is None:
        return EXIT_TIMEOUT
    if p.verdict == "Complete":
        print(f"{subject()} {success}: {p.message}")
        return 0
    print(f"{subject()} {(p.verdict or '').lower()}: {p.message}", file=sys.stderr)
    return EXIT_FAILED


def follow(
    target: client.Target,
    name: str,
    judge: Callable[[Mapping[str, Any]], Progress],
    *,
    timeout: float = 0.0,
    timeout_text: str | None = None,
    what: str = "",
    start: float | None = None,
) -> Progress | None:
    """Read the DaemonJob once a second, showing `judge`'s progress, until it gives a verdict
    (returned) or `timeout` seconds from `start` pass (None, said on stderr). `what` names the
    thing waited for in the timeout's words (default: the DaemonJob)."""
    start = time.monotonic() if start is None else start
    p = judge(client.get_daemonjob(target, name))
    rate = Rate(start, p.done)
    bar = _Bar() if is_terminal(sys.stdout) else None
    last_line, last_print = "", 0.0
    try:
        while True:
            now = time.monotonic()
            if bar is not None:
                bar.update(p, rate, now)
            else:
                line = plain_line(p, rate, now)
                key = line.split(" ", 1)[1].rsplit(",", 2)[0]  # the counts, not the clock or pace
                if key != last_line or now - last_print >= defaults.PLUGIN_PLAIN_PROGRESS_EVERY:
                    print(line, flush=True)
                    last_line, last_print = key, now
            if p.verdict is not None:
                return p
            if timeout and now - start >= timeout:
                if bar is not None:
                    bar.stop()
                    bar = None
                subject = what or f'daemonjob "{name}"'
                print(
                    f"error: timed out after {timeout_text} waiting for {subject}: "
                    f"{p.done}/{p.desired} nodes done, {p.failed} failed" + (f"; {p.message}" if p.message else ""),
                    file=sys.stderr,
                )
                return None
            time.sleep(defaults.PLUGIN_POLL_INTERVAL)
            p = judge(client.get_daemonjob(target, name))
    finally:
        if bar is not None:
            bar.stop()


class _Bar:
    """A rich progress bar: nodes done of desired, failed count, pace and time left."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
        from rich.progress import Progress as RichProgress

        self._progress = RichProgress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[red]{task.fields[failed]} failed"),
            TextColumn("{task.fields[active]} active"),
            TextColumn("{task.fields[rate]:.1f} nodes/s"),
            TextColumn("{task.fields[left]} left"),
            transient=False,
            console=console,
        )
        self._task = self._progress.add_task("nodes", total=None, failed=0, active=0, rate=0.0, left="?")
        self._progress.start()

    def update(self, p: Progress, rate: Rate, now: float) -> None:
        self._progress.update(
            self._task,
            total=p.desired or None,
            completed=p.done,
            failed=p.failed,
            active=p.active,
            rate=rate.per_second(now, p.done),
            left=rate.left(now, p),
        )

    def stop(self) -> None:
        self._progress.stop()
