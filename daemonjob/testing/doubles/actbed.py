"""The act layer's test harness: a Controller on fake informers, a fake JobControl, a fake
clock (its wall time is what schedules read) and fake ConfigMap informers. A test adds
nodes and a DaemonJob, calls `bed.ctl.reconcile(bed.key)` and reads what was written."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, cast

from daemonjob.controller.wiring.controller import Controller
from daemonjob.domain.shared.timestamps import format_time
from daemonjob.machinery.cache.frozen import thaw
from daemonjob.machinery.process.clock import FakeClock
from daemonjob.testing.doubles.builders import node
from daemonjob.testing.doubles.fakes import FakeInformer, FakeJobControl, fake_informers

__all__ = ["ActBed", "ConfigMapInformers"]


@dataclass
class ConfigMapInformers:
    """The tracker's informer factory: one FakeInformer per watched ConfigMap."""

    made: dict[tuple[str, str], FakeInformer] = field(default_factory=dict)
    unlisted: bool = False  # new watches have not listed yet

    def __call__(self, namespace: str, name: str) -> FakeInformer:
        informer = FakeInformer(f"configmap-{name}")
        informer.synced = not self.unlisted
        self.made[(namespace, name)] = informer
        return informer


@dataclass
class ActBed:
    ctl: Controller
    control: FakeJobControl
    djs: FakeInformer
    jobs: FakeInformer
    nodes: FakeInformer
    clock: FakeClock
    configmaps: ConfigMapInformers
    key: str = ""  # the DaemonJob added last
    rv: int = 1

    @classmethod
    def start(cls, create_concurrency: int = 4, **controller_kw: Any) -> ActBed:
        """`controller_kw`: more of the Controller's arguments (say prometheus_url and prometheus_get)."""
        clock = FakeClock()
        informers = fake_informers()
        djs, jobs, nodes = (cast(FakeInformer, i) for i in (informers.daemonjobs, informers.jobs, informers.nodes))
        control = FakeJobControl(jobs=jobs)
        configmaps = ConfigMapInformers()
        ctl = Controller(
            informers,
            control,
            clock=clock,
            create_concurrency=create_concurrency,
            resync_interval=0,
            configmap_informers=configmaps,
            **controller_kw,
        )
        return cls(
            ctl,
            control,
            djs,
            jobs,
            nodes,
            clock,
            configmaps,
        )

    def stop(self) -> None:
        self.ctl.stop(timeout=1)

    # -- the cluster ---------------------------------------------------------------------
    def add_dj(self, dj: dict[str, Any]) -> None:
        """The DaemonJob in the cache and on the API server (which adoption reads afresh)."""
        self.djs.add(dj)
        self.key = f"{dj['metadata']['namespace']}/{dj['metadata']['name']}"
        self.control.daemonjobs[self.key] = dj

    def add_nodes(self, count: int, prefix: str = "node-") -> list[str]:
        names = [f"{prefix}{i:02d}" for i in range(count)]
        for n in names:
            self.nodes.add(node(n))
        return names

    def dj(self) -> dict[str, Any]:
        return thaw(self.djs.store.get(self.key))

    def sync(self) -> None:
        """The caches catch up: created Jobs appear, the last status patch is in the DaemonJob."""
        self.control.deliver()
        statuses = self.control.of("status")
        if statuses:
            dj = self.dj()
            status = dict(dj.get("status") or {})
            for k, v in statuses[-1].body.items():
                if v is None:
                    status.pop(k, None)
                else:
                    status[k] = v
            self.rv += 1
            dj["status"] = status
            dj["metadata"]["resourceVersion"] = str(self.rv)
            self.djs.update(dj)

    def finish_jobs(self) -> None:
        """Every unfinished Job succeeds now."""
        for job in list(self.control.objects.values()):
            if not (job.get("status") or {}).get("conditions"):
                job["status"] = {
                    "conditions": [
                        {"type": "Complete", "status": "True", "lastTransitionTime": format_time(self.clock.wall())}
                    ],
                    "completionTime": format_time(self.clock.wall()),
                }
                self.jobs.update(job)

    def user_deletes(self, name: str) -> None:
        """`kubectl delete job` (Background): gone from the API server, then from the cache."""
        namespace = self.key.partition("/")[0]
        job = self.control.objects.pop(f"{namespace}/{name}")
        self.jobs.delete(f"{namespace}/{job['metadata']['name']}")

    # -- the queue -----------------------------------------------------------------------
    def settle(self, timeout: float = 10.0) -> None:
        """Wait out the queue's delay thread: what came due on the fake clock is queued now, so
        a look at the queue does not miss a key that is only a moment late."""
        deadline = time.monotonic() + timeout
        while self.ctl.queue.due_waiting():
            if time.monotonic() > deadline:
                raise AssertionError(f"the queue's delay thread did not move what came due in {timeout} s")
            time.sleep(0.005)

    def drain(self) -> None:
        """Take every key queued, with those that came due on the fake clock."""
        self.settle()
        while len(self.ctl.queue):
            key, _ = self.ctl.queue.get()
            self.ctl.queue.done(key)

    def ready_within(self, seconds: float) -> bool:
        """Whether the key comes due once the fake clock moved `seconds` (real time to settle)."""
        self.clock.step(seconds)
        time.sleep(0.05)  # the queue's delay thread moves what came due
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if len(self.ctl.queue):
                return True
            time.sleep(0.005)
        return False

    # -- what was written ----------------------------------------------------------------
    def created(self) -> list[dict[str, Any]]:
        """The bodies of the Jobs created, in order."""
        return [c.body for c in self.control.of("create")]

    def created_names(self) -> list[str]:
        return [c.name for c in self.control.of("create")]

    def statuses(self) -> list[dict[str, Any]]:
        return [c.body for c in self.control.of("status")]

    def last_status(self) -> dict[str, Any]:
        return self.control.of("status")[-1].body

    def events(self, reason: str) -> list[str]:
        return self.control.events(reason)

    def counter(self, metric: str, **labels: str) -> float:
        """A metric's sample for the bed's DaemonJob (0 when absent)."""
        namespace, _, name = self.key.partition("/")
        value = self.ctl.metrics.registry.get_sample_value(metric, {"namespace": namespace, "name": name, **labels})
        return value or 0.0
