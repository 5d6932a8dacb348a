"""What the result recorder reads and writes: report objects, and the pods of finished Jobs.

The real store talks to the API server, each write fenced like every other write of the
controller; unit tests hand the recorder a fake. Pods are read in batches by their Job's
uid (`controller-uid in (...)`, the label the Job controller puts on its pods), from the
API server's watch cache: a pod ended before its Job was marked finished, so the cache
already shows how. Whether the reports' resource is served at all (its CRD installed) is
said in the log once for the controller (ReportsServed), not once per DaemonJob.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import structlog

from daemonjob import defaults
from daemonjob.controller.runtime.fence import Fence, always, as_fence
from daemonjob.domain.results.noderesult import pod_of_job, result_of
from daemonjob.domain.results.reports import PLURAL
from daemonjob.domain.shared.apinames import API_VERSION, LABEL_NAME
from daemonjob.machinery.client.kube import Kube, path_for

__all__ = ["ResultStore", "KubeResultStore", "POD_JOB_LABEL", "PATCH_JSON", "ReportsServed", "read_results"]

log = structlog.get_logger("daemonjob.results")

POD_JOB_LABEL = "controller-uid"  # set on a Job's pods by the Job controller (with batch.kubernetes.io/ since 1.27)
PATCH_JSON = "application/json-patch+json"
_PAGE = 50  # report objects per list page: at most 50 MiB in flight


class ResultStore(Protocol):
    def may_write(self) -> bool: ...

    def list_reports(self, namespace: str, daemonjob: str) -> list[Mapping[str, Any]]: ...

    def list_pods(self, namespace: str, job_uids: Sequence[str]) -> list[Mapping[str, Any]]: ...

    def create_report(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]: ...

    def append(self, namespace: str, name: str, patch: Sequence[Mapping[str, Any]]) -> None: ...

    def delete_report(self, namespace: str, name: str) -> None: ...


class KubeResultStore:
    def __init__(self, kube: Kube, fence: Fence | Callable[[], bool] = always) -> None:
        self.kube = kube
        self.fence = as_fence(fence)

    def may_write(self) -> bool:
        return self.fence()

    def list_reports(self, namespace: str, daemonjob: str) -> list[Mapping[str, Any]]:
        """Every chunk of the DaemonJob's kept rollouts, a page at a time."""
        items: list[Mapping[str, Any]] = []
        params: dict[str, Any] = {"labelSelector": f"{LABEL_NAME}={daemonjob}", "limit": _PAGE}
        while True:
            page = self.kube.get(path_for(API_VERSION, PLURAL, namespace), **params)
            items.extend(page.get("items") or ())
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items
            params["continue"] = token

    def list_pods(self, namespace: str, job_uids: Sequence[str]) -> list[Mapping[str, Any]]:
        selector = f"{POD_JOB_LABEL} in ({','.join(job_uids)})"
        return self.kube.get(path_for("v1", "pods", namespace), labelSelector=selector, resourceVersion="0")["items"]

    def create_report(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        with self.fence.writing("report create") as fenced:
            return self.kube.create(path_for(API_VERSION, PLURAL, namespace), dict(body), **fenced)

    def append(self, namespace: str, name: str, patch: Sequence[Mapping[str, Any]]) -> None:
        with self.fence.writing("report append") as fenced:
            self.kube.patch(
                path_for(API_VERSION, PLURAL, namespace, name), list(patch), PATCH_JSON, want_answer=False, **fenced
            )

    def delete_report(self, namespace: str, name: str) -> None:
        with self.fence.writing("report delete") as fenced:
            self.kube.delete(path_for(API_VERSION, PLURAL, namespace, name), **fenced)


class ReportsServed:
    """Whether the DaemonJobReport resource is served, as the last read or write found it:
    logged once when it is not (the CRD not installed) and once when it is again; each
    DaemonJob's status and Event say it too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.missing = False

    def found(self, served: bool) -> None:
        with self._lock:
            was, self.missing = self.missing, not served
        if served and was:
            log.info("the DaemonJobReport CRD is installed: results are recorded again")
        elif not served and not was:
            log.error(
                "the DaemonJobReport CRD (daemonjobreports.daemonjob.io) is not installed: no result is recorded "
                "until it is (kubectl apply -f manifests/reports-crd.yaml); finished Jobs beyond historyLimit are "
                "deleted unrecorded after --history-result-wait"
            )


def read_results(store: ResultStore, namespace: str, jobs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The results of finished `jobs`, their pods read RESULT_POD_BATCH Jobs to a list."""
    out: list[dict[str, Any]] = []
    step = defaults.RESULT_POD_BATCH
    for i in range(0, len(jobs), step):
        batch = jobs[i : i + step]
        pods: dict[str, list[Mapping[str, Any]]] = {}
        for pod in store.list_pods(namespace, [j["metadata"]["uid"] for j in batch]):
            owner = ((pod.get("metadata") or {}).get("labels") or {}).get(POD_JOB_LABEL)
            pods.setdefault(owner or "", []).append(pod)
        for job in batch:
            result = result_of(job, pod_of_job(pods.get(job["metadata"]["uid"], ())))
            if result is not None:
                out.append(result)
    return out
