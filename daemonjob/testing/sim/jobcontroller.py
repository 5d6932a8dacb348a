"""A stand-in for the Job controller at scale: Jobs end without pods.

The real Job controller (kube-controller-manager 1.20) makes a pod per Job, which the
scheduler places and the simulated kubelet runs: some eight API writes per Job, and it
lists every pod of a Job's namespace on each sync of that Job. Converging tens of
thousands of Jobs that way takes most of an hour on two cores. Where those pods are not
what is measured, this writes each Job's end into its status, as the Job controller does
once the pod has finished: one write per Job. The pod template's `sim.daemonjob.io/duration`
and `/exit-code` annotations choose when and how, as for the simulated kubelet.

Run it only while the real Job controller is off (`--controllers=*,-job`), or both act.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog

from daemonjob.machinery.cache.informer import Handlers, Informer, Tombstone, deleted_object
from daemonjob.machinery.client.kube import PATCH_MERGE, ApiError, Kube, path_for

from .simpod import now_rfc3339, sim_duration, sim_exit_code
from .timers import Timers

log = structlog.get_logger("daemonjob.sim")


class SimJobController:
    """Finishes the Jobs its label selector picks, Complete or Failed, after their duration."""

    def __init__(self, kube: Kube, *, label_selector: str | None = None, writers: int = 16) -> None:
        self.kube = kube
        self._seen: set[str] = set()  # uids with an end already scheduled
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=writers, thread_name_prefix="sim-job-writer")
        self._timers = Timers()
        self._jobs = Informer(
            kube, "batch/v1", "jobs", label_selector=label_selector, name="sim-jobs", transform=_job_transform
        )
        self._jobs.add_handlers(
            Handlers(on_add=self._on_job, on_update=lambda _o, n: self._on_job(n), on_delete=self._on_job_gone)
        )

    def start(self, timeout: float = 60.0) -> None:
        self._timers.start()
        self._jobs.start()
        if not self._jobs.wait_for_sync(timeout):
            raise TimeoutError(f"the simulated Job controller's informer did not sync in {timeout}s")

    def stop(self) -> None:
        self._jobs.stop()
        self._timers.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> SimJobController:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_job(self, job: Mapping[str, Any]) -> None:
        meta = job["metadata"]
        if meta.get("deletionTimestamp") or job["finished"]:
            return
        uid = meta["uid"]
        with self._lock:
            if uid in self._seen:
                return
            self._seen.add(uid)
        self._timers.at(time.monotonic() + sim_duration(job["template"]), lambda: self._pool.submit(self._finish, job))

    def _on_job_gone(self, job: Mapping[str, Any] | Tombstone) -> None:
        obj = deleted_object(job)
        with self._lock:
            self._seen.discard(obj["metadata"]["uid"])

    def _finish(self, job: Mapping[str, Any]) -> None:
        meta = job["metadata"]
        now = now_rfc3339()
        if sim_exit_code(job["template"]) == 0:
            status = {
                "succeeded": 1,
                "completionTime": now,
                "conditions": [{"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}],
            }
        else:
            status = {
                "failed": 1,
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "lastProbeTime": now,
                        "lastTransitionTime": now,
                        "reason": "BackoffLimitExceeded",
                        "message": "Job has reached the specified backoff limit",
                    }
                ],
            }
        status["startTime"] = meta.get("creationTimestamp") or now
        try:
            self.kube.patch(
                path_for("batch/v1", "jobs", meta["namespace"], meta["name"], "status"),
                {"metadata": {"uid": meta["uid"]}, "status": status},
                content_type=PATCH_MERGE,
            )
        except ApiError as exc:
            if not (exc.not_found or exc.conflict):
                log.warning("job status update failed", job=meta["name"], error=str(exc))


def _job_transform(job: dict[str, Any]) -> dict[str, Any]:
    meta = job.get("metadata") or {}
    template = ((job.get("spec") or {}).get("template") or {}).get("metadata") or {}
    conditions = (job.get("status") or {}).get("conditions") or ()
    return {
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")
            if k in meta
        },
        "template": {"metadata": {"annotations": template.get("annotations") or {}}},
        "finished": any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions),
    }
