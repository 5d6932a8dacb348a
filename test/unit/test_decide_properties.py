"""Safety properties of `decide` over random clusters, Job states and rollout settings."""

from __future__ import annotations

import copy
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemonjob.controller.runtime.transforms import job_transform, node_transform
from daemonjob.domain.decision.decide import Decision
from daemonjob.domain.jobs.contract import job_node, job_revision, job_state
from daemonjob.domain.jobs.jobbody import build_job
from daemonjob.domain.rollout.inputs import FiringAlerts
from daemonjob.domain.rollout.keptplan import KeptPlan
from daemonjob.domain.rollout.plan import job_view
from daemonjob.domain.shared.timestamps import format_time, parse_time
from daemonjob.domain.spec.eligibility import InvalidSpec, compile_eligibility
from daemonjob.domain.spec.revision import template_revision
from daemonjob.domain.spec.validate import parse_duration
from daemonjob.machinery.cache.frozen import freeze, thaw
from daemonjob.machinery.cache.memo import object_memo
from daemonjob.testing.doubles.builders import daemonjob
from daemonjob.testing.doubles.decisions import Given, decide_over
from daemonjob.testing.doubles.decisions import apply as apply_decision

NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
# The alerts firing in every decision here: haltOnAlerts [{alertname: A}] halts, the others do not
ALERTS = FiringAlerts(firing=((("alertname", "A"), ("node", "n1")),), unknown=None)
POOL = [f"node-{i}" for i in range(8)]
OLD_REVISIONS = ["0ld0000001", "0ld0000002"]
TAINTS = [
    {"key": "gpu", "value": "a100", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
    {"key": "soft", "effect": "PreferNoSchedule"},
]
TOLERATIONS = [
    {"key": "gpu", "operator": "Exists"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
]
SELECTORS = [
    None,
    {},
    {"matchLabels": {"role": "worker"}},
    {"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["infra"]}]},
    {"matchExpressions": [{"key": "role", "operator": "In"}]},  # invalid
]
SETTINGS = dict(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def node_strategy(draw: st.DrawFn, name: str) -> dict[str, Any]:
    labels = {}
    role = draw(st.sampled_from([None, "worker", "infra"]))
    if role:
        labels["role"] = role
    spec: dict[str, Any] = {"taints": draw(st.lists(st.sampled_from(TAINTS), unique_by=lambda t: t["key"], max_size=2))}
    if draw(st.booleans()):
        spec["unschedulable"] = draw(st.booleans())
    return {"metadata": {"name": name, "labels": labels}, "spec": spec}


@st.composite
def daemonjob_strategy(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "jobTemplate": {
            "metadata": {"annotations": {"run": draw(st.sampled_from(["1", "2"]))}},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": draw(st.sampled_from(["Never", "Never", "OnFailure", "Always"])),
                        "containers": [{"name": "c", "image": "busybox"}],
                        "tolerations": draw(st.lists(st.sampled_from(TOLERATIONS), unique_by=lambda t: t["key"])),
                    }
                }
            },
        },
    }
    selector = draw(st.sampled_from(SELECTORS))
    if selector is not None:
        spec["nodeSelector"] = selector
    for key, values in {
        "maxParallel": st.one_of(st.integers(1, 6), st.sampled_from(["1%", "25%", "50%", "100%"])),
        "maxFailedNodes": st.one_of(st.integers(0, 3), st.sampled_from(["0%", "10%", "50%"])),
        "suspend": st.booleans(),
        "rerunPolicy": st.sampled_from(["OnTemplateChange", "Never"]),
        "historyLimit": st.integers(0, 2),
        # gates: a pause some successes fall in; a window open at NOW, one closed at NOW
        "rollout": st.fixed_dictionaries(
            {},
            optional={
                "pauseBetweenNodes": st.sampled_from(["0s", "6h", "49h"]),
                "canary": st.sampled_from([1, 2, "30%"]),
                "window": st.sampled_from(
                    [
                        {"schedule": "0 11 * * *", "duration": "2h"},
                        {"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Europe/Berlin"},
                    ]
                ),
                "haltOnAlerts": st.sampled_from(
                    [[{"alertname": "A"}], [{"alertname": "A", "severity": "critical"}], [{"alertname": "B"}]]
                ),
            },
        ),
    }.items():
        if draw(st.booleans()):
            spec[key] = draw(values)
    template = spec.pop("jobTemplate")
    return daemonjob("dj", "ns", uid="u", resource_version=None, status={}, template=template, **spec)


def make_job(dj: dict[str, Any], node: str, revision: str, state: str, created: int) -> dict[str, Any]:
    body = build_job(dj, node, revision)
    ts = format_time(NOW - timedelta(hours=created))
    body["metadata"]["creationTimestamp"] = ts
    body["status"] = {"conditions": []}
    if state == "succeeded":
        body["status"]["conditions"].append({"type": "Complete", "status": "True", "lastTransitionTime": ts})
        body["status"]["completionTime"] = ts
    elif state == "failed":
        body["status"]["conditions"].append({"type": "Failed", "status": "True", "lastTransitionTime": ts})
    elif state == "terminating":
        body["metadata"]["deletionTimestamp"] = ts
    return body


@st.composite
def cluster(
    draw: st.DrawFn,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], tuple[str, str] | None]:
    dj = draw(daemonjob_strategy())
    current = template_revision(dj["spec"]["jobTemplate"])
    present = draw(st.lists(st.sampled_from(POOL), unique=True))
    nodes = [draw(node_strategy(name)) for name in sorted(present)]
    jobs: list[dict[str, Any]] = []
    for name in POOL:  # nodes not in `present` are deleted nodes that may still have Jobs
        revisions = draw(st.lists(st.sampled_from([current, *OLD_REVISIONS]), unique=True, max_size=3))
        live_left = 1  # reachable states: at most one active or terminating Job per node
        for revision in revisions:
            states = ["succeeded", "failed"] + (["active", "terminating"] if live_left else [])
            state = draw(st.sampled_from(states))
            live_left -= state in ("active", "terminating")
            jobs.append(make_job(dj, name, revision, state, draw(st.integers(0, 48))))
    stalled = draw(st.one_of(st.none(), st.just(("Invalid", "the API server said no"))))
    return dj, jobs, nodes, stalled


def apply(decision: Decision, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return apply_decision(decision, jobs, NOW)


def may_run_pods(job: dict[str, Any]) -> bool:
    """Active, or being deleted without having finished (its pods may still be running)."""
    finished = any(
        c["type"] in ("Complete", "Failed") and c["status"] == "True"
        for c in job.get("status", {}).get("conditions", [])
    )
    return job_state(job) == "active" or (job_state(job) == "terminating" and not finished)


def scaled(value: int | str, total: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    exact = total * int(value[:-1]) / 100
    return -int(-exact // 1) if round_up else int(exact // 1)


def eligible_names(dj: dict[str, Any], nodes: list[dict[str, Any]]) -> set[str] | None:
    try:
        e = compile_eligibility(dj)
    except InvalidSpec:
        return None
    return {n["metadata"]["name"] for n in nodes if e.eligible(n)}


def standing(dj: dict[str, Any], jobs: list[dict[str, Any]], node: str, current: str) -> dict[str, Any] | None:
    """The Job that stands for a node: its newest non-terminating one of the current revision (any with Never)."""
    never = dj["spec"].get("rerunPolicy") == "Never"
    mine = [
        j
        for j in jobs
        if job_node(j) == node and job_state(j) != "terminating" and (never or job_revision(j) == current)
    ]
    return max(mine, key=lambda j: (j["metadata"]["creationTimestamp"], j["metadata"]["name"]), default=None)


def check(
    dj: dict[str, Any], jobs: list[dict[str, Any]], nodes: list[dict[str, Any]], stalled: tuple[str, str] | None
) -> Decision:
    spec = dj["spec"]
    before = copy.deepcopy((dj, jobs, nodes))
    d = decide_over(Given(dj, jobs, nodes, NOW, stalled, alerts=ALERTS))
    assert (dj, jobs, nodes) == before, "decide mutated its inputs"
    current = template_revision(spec["jobTemplate"])
    node_names = {n["metadata"]["name"] for n in nodes}
    eligible = eligible_names(dj, nodes)
    by_name = {j["metadata"]["name"]: j for j in jobs}

    # creates: eligible nodes only, sorted, fresh names, no node twice
    created = [c.node for c in d.creates]
    assert created == sorted(created) and len(set(created)) == len(created)
    assert all(c.name not in by_name for c in d.creates)
    if eligible is None:
        assert not d.creates
    else:
        assert set(created) <= eligible
    for c in d.creates:
        assert job_node(c.body) == c.node and job_revision(c.body) == current

    # no creates while suspended, stalled by the spec, or over the failure threshold
    desired = d.status["desiredNodes"]
    if spec.get("suspend"):
        assert not d.creates
    if spec["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == "Always":
        assert not d.creates
    # only failures of the current revision's Jobs spend the failure budget
    failed_current = 0
    for name in eligible or ():
        record = standing(dj, jobs, name, current)
        failed_current += record is not None and job_state(record) == "failed" and job_revision(record) == current
    if "maxFailedNodes" in spec and failed_current > scaled(spec["maxFailedNodes"], desired, round_up=False):
        assert not d.creates
        failed = next(c for c in d.status["conditions"] if c["type"] == "Failed")
        assert failed["status"] == "True" and failed["reason"] in ("FailureThresholdExceeded", "CanaryFailed")
    # canary (never promoted here): no more nodes start the current revision than the canary's count,
    # and none once one of them failed
    canary = (spec.get("rollout") or {}).get("canary")
    if canary is not None and spec.get("rerunPolicy") != "Never" and d.creates:
        count = max(1, scaled(canary, desired, round_up=True))
        started = {
            job_node(j)
            for j in jobs
            if job_revision(j) == current
            and job_state(j) != "terminating"
            and (job_node(j) in (eligible or set()) or (job_node(j) in node_names and job_state(j) == "active"))
        }
        assert len(started) + len(d.creates) <= count
        assert failed_current == 0
    if stalled is not None:
        assert len(d.creates) <= 1

    # maxParallel: every node running a Job of this DaemonJob, whatever its revision or run, holds a
    # slot; a create only goes where the running nodes and the creates stay within the limit, and
    # running older Jobs are replaced (each in the slot it holds) at most `limit` at a time
    replaced = {
        x.node for x in d.deletes if x.reason == "OldRevision" and standing(dj, jobs, x.node or "", current) is None
    }
    if "maxParallel" in spec:
        limit = max(1, scaled(spec["maxParallel"], desired, round_up=True))
        # a deleted node runs nothing, but its active Job holds the slot until its delete is issued
        running = {
            job_node(j) for j in jobs if may_run_pods(j) and (job_node(j) in node_names or job_state(j) == "active")
        }
        if d.creates:
            assert len(running) + len(d.creates) <= limit
        assert len(replaced) <= limit
        # pauseBetweenNodes: a node that succeeded less than the pause ago still holds its slot
        pause = parse_duration((spec.get("rollout") or {}).get("pauseBetweenNodes"))
        if pause and d.creates:
            paused = {
                job_node(j)
                for j in jobs
                if job_state(j) == "succeeded"
                and job_node(j) in (eligible or set())
                and j is standing(dj, jobs, job_node(j) or "", current)
                and (parse_time(j["status"].get("completionTime")) or NOW - pause) > NOW - pause
            }
            assert len(running) + len(paused) + len(d.creates) <= limit

    # window: outside it nothing starts and nothing running is torn down
    window = (spec.get("rollout") or {}).get("window")
    if window is not None and window["schedule"] == "0 22 * * *":  # closed at NOW
        assert not d.creates and not replaced

    # haltOnAlerts: while a matching alert fires nothing starts and nothing running is torn down
    if (spec.get("rollout") or {}).get("haltOnAlerts") == [{"alertname": "A"}]:
        assert not d.creates and not replaced

    # deletes: existing, not already terminating, never a current Job of an existing node
    assert len({x.name for x in d.deletes}) == len(d.deletes)
    for x in d.deletes:
        j = by_name[x.name]
        assert job_state(j) != "terminating"
        if job_node(j) in node_names:
            assert job_revision(j) != current
            assert x.reason in ("OldRevision", "History")
        else:
            assert x.reason == "NodeGone"
        if x.reason == "OldRevision":
            assert spec.get("rerunPolicy") != "Never"
            assert not spec.get("suspend") and stalled is None
    assert {job_node(by_name[x.name]) for x in d.deletes if x.reason == "NodeGone"} <= set(POOL) - node_names

    # at most one Job per node may have pods (active, or terminating before it finished)
    live = Counter(job_node(j) for j in apply(d, jobs) if may_run_pods(j))
    assert max(live.values(), default=0) <= 1

    # status arithmetic
    s = d.status
    counts = (s["activeNodes"], s["succeededNodes"], s["failedNodes"], s["pendingNodes"])
    assert all(n >= 0 for n in counts)
    assert s["desiredNodes"] == sum(counts)
    # a node no longer eligible stays desired (and active) while the Job standing for it is active
    held = {
        n
        for n in node_names - (eligible or set())
        if (r := standing(dj, jobs, n, current)) is not None and job_state(r) == "active"
    }
    assert s["desiredNodes"] == len(eligible or ()) + len(held)
    assert s["failedNodeNames"] == sorted(s["failedNodeNames"])
    assert len(s["failedNodeNames"]) == min(s["failedNodes"], 20)
    assert set(s["failedNodeNames"]) <= (eligible or set())
    conditions = {c["type"]: c["status"] for c in s["conditions"]}
    assert set(conditions) == {"Complete", "Failed", "Reconciling", "Stalled"}
    if conditions["Complete"] == "True":
        assert s["pendingNodes"] == s["activeNodes"] == s["failedNodes"] == 0 and "completionTime" in s
    else:
        assert "completionTime" not in s
    if conditions["Reconciling"] == "True":
        assert conditions["Stalled"] == "False" and not spec.get("suspend")
    if conditions["Complete"] == "True":
        assert conditions["Stalled"] == conditions["Reconciling"] == "False"
    if conditions["Failed"] == "True":
        assert conditions["Stalled"] == "True"  # kstatus reads the failed rollout as Failed, not Current
    return d


@settings(**SETTINGS)
@given(cluster())
def test_single_decision_is_safe(case: tuple[Any, ...]) -> None:
    check(*case)


@settings(**SETTINGS)
@given(cluster(), st.data())
def test_rollouts_stay_safe_over_many_steps(case: tuple[Any, ...], data: st.DataObject) -> None:
    """Apply decisions while Jobs finish and deletions complete at random."""
    dj, jobs, nodes, stalled = case
    for _ in range(4):
        d = check(dj, jobs, nodes, stalled)
        dj = {**dj, "status": d.status}
        jobs = apply(d, jobs)
        evolved = []
        for j in jobs:
            state = job_state(j)
            if state == "terminating" and data.draw(st.booleans()):
                continue  # deletion completed
            if state == "active":
                outcome = data.draw(st.sampled_from(["active", "succeeded", "failed"]))
                if outcome != "active":
                    j = copy.deepcopy(j)
                    kind = "Complete" if outcome == "succeeded" else "Failed"
                    j["status"] = {
                        "conditions": [{"type": kind, "status": "True", "lastTransitionTime": format_time(NOW)}]
                    }
            evolved.append(j)
        jobs = evolved
        if data.draw(st.booleans()):
            stalled = None


@settings(**SETTINGS)
@given(cluster())
def test_cached_objects_decide_like_plain_ones(case: tuple[Any, ...]) -> None:
    """The caches' trimmed, shared, frozen Jobs (parsed once per version) decide like full ones."""
    dj, jobs, nodes, stalled = case
    cached_jobs = [freeze(job_transform(copy.deepcopy(j))) for j in jobs]
    cached_nodes = [freeze(node_transform(copy.deepcopy(n))) for n in nodes]
    plain = decide_over(Given(dj, jobs, nodes, NOW, stalled=stalled))
    for _ in range(2):  # the second pass reads the values kept by the first
        assert decide_over(Given(dj, cached_jobs, cached_nodes, NOW, stalled=stalled, memo=object_memo)) == plain


@settings(**SETTINGS)
@given(cluster())
def test_suspended_or_api_stalled_rollouts_never_tear_down_old_revisions(case: tuple[Any, ...]) -> None:
    dj, jobs, nodes, _ = case
    dj = copy.deepcopy(dj)
    dj["spec"]["suspend"] = True
    d = decide_over(Given(dj, jobs, nodes, NOW))
    assert not d.creates and all(x.reason != "OldRevision" for x in d.deletes)
    dj["spec"]["suspend"] = False
    d = decide_over(Given(dj, jobs, nodes, NOW, stalled=("Forbidden", "quota")))
    assert all(x.reason != "OldRevision" for x in d.deletes)


# ---------------------------------------------------------------- the incremental plan equals the full one

EVENTS = st.sampled_from(
    ["node", "node-gone", "job-new", "job-finish", "job-gone", "job-terminating", "template", "max-parallel"]
)


@given(
    cluster(),
    st.lists(st.tuples(EVENTS, st.sampled_from(POOL), st.integers(0, 1000)), min_size=1, max_size=25),
    st.data(),
)
@settings(**{**SETTINGS, "max_examples": 80})
def test_the_incremental_plan_equals_the_full_plan_after_every_event(
    case: tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], tuple[str, str] | None],
    events: list[tuple[str, str, int]],
    data: st.DataObject,
) -> None:
    """Random node and Job events, each told to the state for its node only, and spec edits."""
    dj, jobs, nodes, stalled = case
    nodes_by_name = {n["metadata"]["name"]: freeze(n) for n in nodes}
    jobs_by_name = {j["metadata"]["name"]: freeze(j) for j in jobs}
    state = KeptPlan.of(jobs_by_name.values(), nodes_by_name.values(), object_memo)

    def tell(node: str) -> None:
        mine = [job_view(j, object_memo) for j in jobs_by_name.values() if job_node(j) == node]
        state.set_node(node, nodes_by_name.get(node), mine)

    for i, (kind, node, seed) in enumerate(events):
        on_node = sorted(n for n, j in jobs_by_name.items() if job_node(j) == node)
        if kind == "node":
            nodes_by_name[node] = freeze(data.draw(node_strategy(node)))
        elif kind == "node-gone":
            nodes_by_name.pop(node, None)
        elif kind == "job-new":
            revision = data.draw(st.sampled_from([template_revision(dj["spec"]["jobTemplate"]), *OLD_REVISIONS]))
            job = make_job(dj, node, revision, data.draw(st.sampled_from(["active", "succeeded", "failed"])), seed % 48)
            job["metadata"]["name"] += f"-{i}"
            jobs_by_name[job["metadata"]["name"]] = freeze(job)
        elif on_node and kind in ("job-finish", "job-gone", "job-terminating"):
            name = on_node[seed % len(on_node)]
            job = thaw(jobs_by_name[name])
            if kind == "job-gone":
                del jobs_by_name[name]
            elif kind == "job-terminating":
                job["metadata"]["deletionTimestamp"] = job["metadata"]["creationTimestamp"]
                jobs_by_name[name] = freeze(job)
            else:
                job["status"] = {
                    "conditions": [
                        {
                            "type": "Complete" if seed % 2 else "Failed",
                            "status": "True",
                            "lastTransitionTime": job["metadata"]["creationTimestamp"],
                        }
                    ]
                }
                jobs_by_name[name] = freeze(job)
        elif kind == "template":
            dj = copy.deepcopy(dj)
            dj["spec"]["jobTemplate"]["metadata"]["annotations"]["run"] = str(seed % 3)
        elif kind == "max-parallel":
            dj = copy.deepcopy(dj)
            dj["spec"]["maxParallel"] = 1 + seed % 4
        if kind in ("node", "node-gone"):  # a node event: its Jobs are as the state has them
            inputs = state.node(node)
            state.set_node(node, nodes_by_name.get(node), inputs[1] if inputs is not None else ())
        elif kind not in ("template", "max-parallel"):
            tell(node)
        full = decide_over(Given(dj, list(jobs_by_name.values()), list(nodes_by_name.values()), NOW, stalled))
        kept = decide_over(Given(dj, [], [], NOW, stalled, memo=object_memo, kept_plan=state))
        assert kept.status == full.status
        assert [(c.node, c.name) for c in kept.creates] == [(c.node, c.name) for c in full.creates]
        assert kept.deletes == full.deletes and kept.events == full.events
        fresh = KeptPlan.of(jobs_by_name.values(), nodes_by_name.values())
        ctx = state._ctx
        assert ctx is not None and state.plan == fresh.plan_for(ctx)
