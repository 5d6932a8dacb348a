"""The process lifecycle around a controller, in the manner of controller-runtime's Manager.

Start order: serving, Event posting, informers; then, once elected (or at once without
leader election) and with synced caches, the workers. Stop order matters for "one leader
at a time": workers stop taking keys, in-flight reconciles get `shutdown_timeout` (shorter
than the lease) to finish, then the fence closes (what still runs abandons its remaining
writes) and the writes in flight end, and only then is the Lease released for a successor.
A lost lease closes the fence at once and is never released: the successor waits it out.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import structlog

from daemonjob import defaults
from daemonjob.controller.metrics.metrics import Metrics
from daemonjob.controller.runtime.events import EventRecorder
from daemonjob.controller.runtime.fence import Fence
from daemonjob.controller.wiring.controller import Controller
from daemonjob.machinery.cache.gcpolicy import FreezeSurvivors
from daemonjob.machinery.process.leaderelection import LeaderElector
from daemonjob.machinery.server.serving import Server

log = structlog.get_logger("daemonjob.manager")

EXIT_OK = 0
EXIT_LOST_LEADERSHIP = 1


@dataclass
class Manager:
    controller: Controller
    events: EventRecorder
    metrics: Metrics
    elector: LeaderElector | None = None
    fence: Fence | None = None  # the writers' fence (of the elector's lease), closed at shutdown
    servers: list[Server] = field(default_factory=list)
    gc_policy: FreezeSurvivors | None = None  # freezes the caches once filled (gcpolicy.py)
    shutdown_timeout: float = defaults.GRACEFUL_SHUTDOWN_TIMEOUT
    stop_requested: threading.Event = field(default_factory=threading.Event)
    _lost: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        if self.elector is not None:
            self.elector.on_leading = self.start_workers_when_synced
            self.elector.on_stopped_leading = self.lost_leadership

    def request_stop(self) -> None:
        """From a signal handler: a clean stop (exit 0)."""
        self.stop_requested.set()

    def lost_leadership(self) -> None:
        """Leadership ended or is in doubt: stop at once and exit non-zero."""
        self._lost.set()
        if self.fence is not None:
            self.fence.close()
        self.stop_requested.set()

    def run(self) -> int:
        self.events.start()
        self.controller.start_informers()
        try:
            if self.elector is None:
                self.metrics.leader.set(1)
                threading.Thread(target=self.start_workers_when_synced, name="start", daemon=True).start()
                self.stop_requested.wait()
            else:
                self.metrics.leader.set(0)
                threading.Thread(target=self._elect, name="leader-election", daemon=True).start()
                while not self.stop_requested.wait(0.5):
                    self.metrics.leader.set(1 if self.elector.is_leader else 0)
        finally:
            self._shutdown()
        code = EXIT_LOST_LEADERSHIP if self._lost.is_set() else EXIT_OK
        log.info("stopped", exit_code=code)
        return code

    def _elect(self) -> None:
        assert self.elector is not None
        if not self.elector.run():
            self.lost_leadership()
        else:
            self.stop_requested.set()

    def start_workers_when_synced(self) -> None:
        """Called when leading: wait for the caches, then work."""
        while not self.controller.wait_synced(timeout=1.0):
            if self.stop_requested.is_set():
                return
        if self.stop_requested.is_set() or (self.elector is not None and not self.elector.is_leader):
            return
        if self.gc_policy is not None:
            self.gc_policy.freeze_now()
        self.controller.start_workers()
        log.info("workers started", workers=self.controller.workers)

    def _shutdown(self) -> None:
        log.info("shutting down", lost_leadership=self._lost.is_set())
        finished = self.controller.stop_workers(self.shutdown_timeout)
        if not finished:
            log.warning("in-flight work abandoned", timeout=self.shutdown_timeout)
        idle = True
        if self.fence is not None:
            self.fence.close()  # nothing more is sent; batches still running give up their creates
            if self.elector is not None:  # each write's timeout ends with the lease
                idle = self.fence.wait_idle(self.elector.lease_remaining())
        if self.elector is not None:
            self.elector.stop()
            if not self._lost.is_set() and idle:
                self.elector.release()  # only now may a successor act
            elif not idle:
                log.warning("writes still in flight: the lease is left to expire")
        self.controller.stop(timeout=0)
        self.events.stop()
        for server in self.servers:
            server.stop()
        self.metrics.leader.set(0)
