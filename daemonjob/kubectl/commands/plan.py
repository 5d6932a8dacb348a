"""`plan NAME` / `plan -f FILE`: what the DaemonJob would do on the cluster as it is now.

The answer is the domain's (domain/preview/preview.py, over `decide` itself); this reads what it
needs with a few lists, never a request per node: the Nodes, the DaemonJob's Jobs, and only
when the spec asks for them the other DaemonJobs of the namespace with their Jobs (exclusion
group, spec.after) and every pod and PodDisruptionBudget (a drain). A file is first put to
the admission webhook's own rule book (admission/review.py), as `kubectl apply` would be.

Exit status: 0; 1 when the DaemonJob would be refused or would be Stalled.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from daemonjob.admission import review
from daemonjob.controller.passes.alertpoller import AlertPoller
from daemonjob.domain.decision.decide import decide
from daemonjob.domain.gates.orderview import done_view, order_input
from daemonjob.domain.jobs.contract import (
    ACTIVE,
    SUCCEEDED,
    TERMINATING,
    job_finish_time,
    job_node,
    job_revision,
    job_run,
    job_state,
)
from daemonjob.domain.jobs.owners import controller_ref
from daemonjob.domain.nodework.allowance import NODE_MAINTENANCE_NOT_ALLOWED
from daemonjob.domain.nodework.disruption import disruption_of
from daemonjob.domain.preview.preview import Preview, PreviewInput, preview, with_applied
from daemonjob.domain.rollout.inputs import DecisionInput, FiringAlerts
from daemonjob.domain.rollout.keptplan import KeptPlan
from daemonjob.domain.shared.apinames import API_VERSION, GROUP, KIND, LABEL_NAME, PLURAL
from daemonjob.domain.spec.spec import DaemonJobSpec
from daemonjob.domain.spec.validate import read_spec
from daemonjob.domain.spec.warnings import no_effect
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.cluster.client import PluginError, Target, bulk_decoding
from daemonjob.kubectl.commands import planview, results
from daemonjob.kubectl.formats import output
from daemonjob.machinery.client.kube import ApiError, path_for

__all__ = ["run", "load_file", "make_plan"]

Obj = Mapping[str, Any]


def load_file(path: str) -> dict[str, Any]:
    """The one DaemonJob in `path` (`-` reads stdin), as `kubectl apply -f` would send it."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        docs = [d for d in yaml.safe_load_all(text) if d]
    except OSError as exc:
        raise PluginError(f'the path "{path}" cannot be read: {exc.strerror}') from None
    except yaml.YAMLError as exc:
        raise PluginError(f"error parsing {path}: {exc}") from None
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") == KIND]
    if len(found) != 1:
        raise PluginError(f"{path} holds {len(found)} DaemonJobs: plan one at a time")
    return found[0]


def _refusal(new: Obj, applied: Obj | None, namespace: str) -> list[str]:
    """What the admission webhook would answer: its messages, none if it lets the object in."""
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": GROUP, "version": API_VERSION.split("/")[1], "kind": KIND},
        "operation": "CREATE" if applied is None else "UPDATE",
        "namespace": namespace,
        "name": (new.get("metadata") or {}).get("name"),
        "object": new,
    }
    if applied is not None:
        request["oldObject"] = applied
    response = review.decide(request, review.Checks(_allowed(applied, namespace)))
    if response.get("allowed"):
        return []
    causes = ((response.get("status") or {}).get("details") or {}).get("causes") or ()
    return [f"{c.get('field')}: {c.get('message')}" for c in causes] or [str(response["status"].get("message"))]


def _allowed(applied: Obj | None, namespace: str) -> frozenset[str]:
    """Where node maintenance is allowed, as far as the plan can tell: the controller's flag is
    not readable from here, so its namespace unless the applied DaemonJob is Stalled for it."""
    conditions = ((applied or {}).get("status") or {}).get("conditions") or ()
    refused = any(
        c.get("type") == "Stalled" and c.get("status") == "True" and c.get("reason") == NODE_MAINTENANCE_NOT_ALLOWED
        for c in conditions
    )
    return frozenset() if refused else frozenset({namespace})


def _get(target: Target, name: str) -> dict[str, Any] | None:
    try:
        return client.get_daemonjob(target, name)
    except PluginError as exc:
        if "NotFound" in exc.message:
            return None
        raise


def _owned(jobs: Iterable[Obj], uid: str | None) -> list[Obj]:
    """The Jobs the DaemonJob controls, and those it would adopt (no controller)."""
    out = []
    for job in jobs:
        ref = controller_ref(job)
        if ref is None or (uid and ref.get("uid") == uid):
            out.append(job)
    return out


class _ListedFacts:
    """The facts of `domain.orderview.OrderFacts` from the lists the plan read."""

    def __init__(
        self, dj: Obj, daemonjobs: Sequence[Obj], jobs: Sequence[Obj], nodes: Sequence[Obj], now: datetime
    ) -> None:
        self.dj, self.nodes, self.now = dj, nodes, now
        name = dj["metadata"]["name"]
        self.by_name = {d["metadata"]["name"]: d for d in daemonjobs if d["metadata"]["name"] != name}
        self.jobs_of: dict[str, list[Obj]] = {}
        for job in jobs:
            ref = controller_ref(job)
            if ref is not None and ref.get("uid"):
                self.jobs_of.setdefault(str(ref["uid"]), []).append(job)
        self.specs: dict[str, DaemonJobSpec] = {}

    def _jobs(self, dj: Obj) -> list[Obj]:
        return self.jobs_of.get(str(dj["metadata"].get("uid") or ""), [])

    def spec_of(self, dj: Obj) -> DaemonJobSpec:
        name = dj["metadata"]["name"]
        if name not in self.specs:
            self.specs[name] = read_spec(dj)
        return self.specs[name]

    def named(self, name: str) -> Obj | None:
        return self.by_name.get(name)

    def done(self, dj: Obj) -> frozenset[str]:
        revision, run = done_view(dj)
        if not revision:
            return frozenset()
        return frozenset(
            node
            for j in self._jobs(dj)
            if job_state(j) == SUCCEEDED and job_revision(j) == revision and job_run(j) == run and (node := job_node(j))
        )

    def peers(self) -> Iterable[Obj]:
        group = self.spec_of(self.dj).exclusion_group
        return [d for d in self.by_name.values() if group and self.spec_of(d).exclusion_group == group]

    def running_nodes(self, dj: Obj) -> Iterable[str]:
        for job in self._jobs(dj):
            state = job_state(job)
            if (state == ACTIVE or (state == TERMINATING and job_finish_time(job) is None)) and (node := job_node(job)):
                yield node

    def claimed(self) -> Mapping[str, str]:
        return {}  # creates in flight are the controller's to know

    def turn_nodes(self, dj: Obj) -> Sequence[str]:
        decision = decide(DecisionInput(dj, KeptPlan.of(self._jobs(dj), self.nodes), self.now))
        plan = decision.reading.plan if decision.reading is not None else None
        return [t.node for t in (*plan.replacing, *plan.starting)] if plan is not None else []


def _list(target: Target, api_version: str, plural: str, namespace: str | None, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = target.kube.get(path_for(api_version, plural, namespace), **params)["items"]
    return items


def _recorded(target: Target, name: str) -> list[dict[str, Any]]:
    """Its recorded results (spec.results.deleteSucceededJobs: they stand for deleted Jobs); none
    where no report is readable (an older install, or no such right)."""
    try:
        return results.list_results(target, name, "")
    except ApiError as exc:
        if exc.status in (403, 404):
            return []
        raise


def _policy_version(target: Target) -> str:
    versions = {v.get("version") for v in target.kube.get("/apis/policy").get("versions") or ()}
    return "policy/v1" if "v1" in versions else "policy/v1beta1"


def _alerts(url: str) -> FiringAlerts:
    """The firing alerts as the controller's poller reads them (unreachable: unknown, which halts)."""
    poller = AlertPoller(url, lambda: None)
    poller.poll_once()
    return poller.current()


def make_plan(
    target: Target,
    name: str | None,
    path: str | None,
    prometheus_url: str | None = None,
    budget: tuple[int | str | None, str] | None = None,
) -> tuple[Preview, list[str], list[str]]:
    """The plan of the applied DaemonJob `name`, or of the one in file `path`; the
    webhook's refusal of that file (empty: it would be let in); and its warnings of
    settings that have no effect (domain/spec/warnings.py). `prometheus_url`: where the
    controller reads the alerts of spec.rollout.haltOnAlerts (None: taken as none firing);
    `budget`: the controller's --max-unavailable-nodes and --protected-node-selector."""
    new = load_file(path) if path is not None else None
    if new is not None:
        name = (new.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise PluginError(f"{path}: metadata.name is required")
        target.namespace = (new.get("metadata") or {}).get("namespace") or target.namespace
    assert name is not None
    applied = _get(target, name) if new is not None else client.get_daemonjob(target, name)
    namespace = target.namespace
    refused: list[str] = []
    now = datetime.now(timezone.utc)
    if new is not None:
        new = {**new, "metadata": {**(new.get("metadata") or {}), "namespace": namespace}}
        refused = _refusal(new, applied, namespace)
        dj = with_applied(new, applied, now)
    else:
        assert applied is not None
        dj = applied
    spec = read_spec(dj)
    ordered = bool(spec.exclusion_group or spec.after)
    drains = spec.maintenance is not None and spec.maintenance.drain is not None
    with bulk_decoding(), ThreadPoolExecutor(max_workers=5, thread_name_prefix="read") as pool:
        nodes = pool.submit(client.list_nodes, target, None, True)
        jobs = pool.submit(client.list_jobs, target, name, True)
        others = pool.submit(_list, target, API_VERSION, PLURAL, namespace) if ordered else None
        all_jobs = (
            pool.submit(_list, target, "batch/v1", "jobs", namespace, labelSelector=LABEL_NAME) if ordered else None
        )
        pods = pool.submit(_list, target, "v1", "pods", None, resourceVersion="0") if drains else None
        budgets = (
            pool.submit(lambda: _list(target, _policy_version(target), "poddisruptionbudgets", None))
            if drains
            else None
        )
        recorded = pool.submit(_recorded, target, name) if spec.delete_succeeded_jobs and applied else None
        listed_nodes = nodes.result()
        own = _owned(jobs.result(), (dj.get("metadata") or {}).get("uid"))
        order = None
        if others is not None and all_jobs is not None:
            order = order_input(dj, spec, _ListedFacts(dj, others.result(), all_jobs.result(), listed_nodes, now))
        inp = PreviewInput(
            dj,
            listed_nodes,
            own,
            now,
            pods=pods.result() if pods is not None else (),
            budgets=budgets.result() if budgets is not None else (),
            allowed_namespaces=_allowed(applied, namespace),
            recorded=recorded.result() if recorded is not None else (),
        )
        if order is not None:
            inp = replace(inp, order=order)
        if budget is not None and spec.asks_maintenance:
            inp = replace(inp, disruption=disruption_of(listed_nodes, *budget))
        if prometheus_url and spec.rollout.halt_on_alerts:
            inp = replace(inp, alerts=_alerts(prometheus_url), alerts_read=True)
    return preview(inp), refused, no_effect(dj)


def run(args: argparse.Namespace, target: Target) -> int:
    if (args.name is None) == (args.filename is None):
        raise PluginError("give either NAME (a DaemonJob applied) or -f FILE (one to apply)", client.EXIT_USAGE)
    budget = (args.max_unavailable_nodes, args.protected_node_selector)
    plan, refused, warnings = make_plan(target, args.name, args.filename, args.prometheus_url, budget)
    output.print_warnings(warnings)
    doc = {**plan.as_dict(), "refused": refused or None, "warnings": warnings or None}
    if not output.emit(args.output, document=lambda: doc, items=lambda: doc["nodes"], no_headers=args.no_headers):
        planview.show(plan, refused, no_headers=args.no_headers)
    return 1 if refused or plan.stalled is not None else 0
