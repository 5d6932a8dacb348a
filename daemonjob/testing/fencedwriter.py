"""A minimal fenced leader, run as a process by the fault bed's tests and as a reference for
the controller's wiring: it elects on a Lease and, while leading, writes an Event every
period through the fence. Leadership lost: it writes nothing more and exits 1. SIGTERM: it
stops writing, releases the Lease and exits 0.

    python -m daemonjob.testing.fencedwriter --kubeconfig K --namespace NS --lease NAME --identity ID
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

import structlog

from daemonjob import logsetup
from daemonjob.machinery.kube import Kube, path_for
from daemonjob.machinery.leaderelection import LeaderElector

log = structlog.get_logger("daemonjob.testing.fencedwriter")


class NotLeading(Exception):
    """The fence refused a write."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fencedwriter")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--namespace", required=True, help="where the Events are written")
    p.add_argument("--lease", required=True)
    p.add_argument("--lease-namespace", default="daemonjob-system")
    p.add_argument("--identity", required=True)
    p.add_argument("--period", type=float, default=0.05)
    p.add_argument("--lease-duration", type=float, default=3.0)
    p.add_argument("--renew-deadline", type=float, default=2.0)
    p.add_argument("--retry-period", type=float, default=0.5)
    args = p.parse_args(argv)
    logsetup.configure("info", "json")

    writes = Kube.from_config(args.kubeconfig)
    stop, lost = threading.Event(), threading.Event()
    # The elector has its own client: its requests never queue behind the workers' writes.
    elector = LeaderElector(Kube.from_config(args.kubeconfig), args.lease_namespace, args.lease, args.identity,
                            lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                            retry_period=args.retry_period, on_stopped_leading=lost.set)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    elected = threading.Thread(target=elector.run, name="elect", daemon=True)
    elected.start()

    def fence() -> None:
        if not elector.holds_lease():
            raise NotLeading()

    events = path_for("v1", "events", args.namespace)
    count = 0
    while not stop.is_set() and not lost.is_set():
        if elector.holds_lease():
            body = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": f"{args.identity}-"},
                    "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "fenced",
                                       "namespace": args.namespace},
                    "reason": "Tick", "message": f"{args.identity} {count}", "type": "Normal"}
            try:
                writes.create(events, body, guard=fence, request_timeout=max(0.05, elector.lease_remaining()))
                count += 1
            except NotLeading:
                log.info("write fenced")
            except Exception as exc:
                log.warning("write failed", error=str(exc))
        stop.wait(args.period)
    if lost.is_set():
        log.error("leadership lost; exiting", writes=count)
        return 1
    # SIGTERM: nothing is in flight any more (writes are made by this thread), so release.
    elector.release()
    log.info("released; exiting", writes=count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
