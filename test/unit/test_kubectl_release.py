"""`kubectl daemonjob release`: which nodes it may release, what it writes (the request
annotation, each node with the cordon it ends), and the refusals, by name, with nothing written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from daemonjob.domain.nodework.releases import ANNOTATION_RELEASE, release_requests
from daemonjob.domain.shared.noderecord import ANNOTATION_MAINTENANCE, NodeRecord
from daemonjob.kubectl.cli import parse
from daemonjob.kubectl.cluster.client import PluginError, Target
from daemonjob.kubectl.commands import release
from daemonjob.machinery.client.kube import ApiError
from daemonjob.testing.doubles.builders import daemonjob, node

UID = "uid-1"


def _record(since: str, kept: bool = True, uid: str = UID) -> NodeRecord:
    return NodeRecord("ns/dj", uid, "r1", None, True, since, kept)


def _held(name: str, record: NodeRecord) -> dict[str, Any]:
    n = node(name, unschedulable=True)
    n["metadata"]["annotations"] = {ANNOTATION_MAINTENANCE: record.text()}
    return n


class Cluster:
    """GET of the DaemonJob and of Nodes, the list of Nodes, PATCH of the DaemonJob."""

    def __init__(self, dj: dict[str, Any], nodes: list[dict[str, Any]], conflicts: int = 0) -> None:
        self.dj, self.nodes, self.conflicts = dj, {n["metadata"]["name"]: n for n in nodes}, conflicts
        self.patches: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        if path.endswith("/daemonjobs/dj"):
            return self.dj
        if path == "/api/v1/nodes":
            return {"items": list(self.nodes.values())}
        name = path.rsplit("/", 1)[-1]
        if name not in self.nodes:
            raise ApiError(404, "NotFound", f'nodes "{name}" not found')
        return self.nodes[name]

    def patch(self, path: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.patches.append((body, params))
        if self.conflicts:
            self.conflicts -= 1
            raise ApiError(409, "Conflict", "the object has been modified")
        return self.dj


def _dj(**annotations: str) -> dict[str, Any]:
    d = daemonjob("dj", namespace="ns", uid=UID, nodeMaintenance={"cordon": True, "keepFailedCordoned": True})
    d["metadata"]["resourceVersion"] = "7"
    if annotations:
        d["metadata"]["annotations"] = dict(annotations)
    return d


def _run(cluster: Cluster, *argv: str) -> int:
    return release.run(parse(["release", "dj", *argv]), Target(cluster, "ns"))  # type: ignore[arg-type]


def _written(cluster: Cluster) -> dict[str, str]:
    body, _ = cluster.patches[-1]
    assert body["metadata"]["resourceVersion"] == "7"
    return json.loads(body["metadata"]["annotations"][ANNOTATION_RELEASE])


def test_release_requests_each_node_with_the_cordon_it_ends(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = Cluster(_dj(), [_held("a", _record("t1")), _held("b", _record("t2")), node("c")], conflicts=1)
    assert _run(cluster, "--node", "a", "--node", "b") == 0
    assert _written(cluster) == {"a": "t1", "b": "t2"} and len(cluster.patches) == 2  # a conflict is read again
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "node/a release requested (daemonjob.daemonjob.io/dj)",
        "node/b release requested (daemonjob.daemonjob.io/dj)",
    ]


def test_all_releases_every_kept_node_and_drops_requests_whose_cordon_ended() -> None:
    nodes = [
        _held("a", _record("t1")),
        _held("b", _record("t2", kept=False)),  # its Job runs: not kept
        _held("c", _record("t3", uid="other")),
        _held("d", _record("t4")),
    ]
    stale = json.dumps({"gone": "t0", "d": "t-earlier"})
    cluster = Cluster(_dj(**{ANNOTATION_RELEASE: stale}), nodes)
    assert _run(cluster, "--all") == 0
    assert _written(cluster) == {"a": "t1", "d": "t4"}


def test_a_failure_the_status_names_before_its_mark_reached_the_node_may_be_released() -> None:
    d = _dj()
    d["status"] = {"nodeMaintenance": {"keptCordonedNodes": ["b"]}}
    cluster = Cluster(d, [_held("b", _record("t2", kept=False))])
    assert _run(cluster, "--node", "b") == 0 and _written(cluster) == {"b": "t2"}


def test_unknown_not_held_and_still_working_nodes_are_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [_held("a", _record("t1")), _held("busy", _record("t2", kept=False)), node("free")]
    cluster = Cluster(_dj(), nodes)
    with pytest.raises(PluginError, match='node "busy" is held by daemonjob "dj" for its Job, not kept cordoned'):
        _run(cluster, "--node", "a,nope,free", "--node", "busy")
    err = capsys.readouterr().err
    assert 'Error from server (NotFound): nodes "nope" not found' in err
    assert 'error: node "free" is not held by daemonjob "dj": nothing to release' in err
    assert cluster.patches == [], "nothing is written when a node is refused"


def test_dry_run_writes_nothing_or_lets_the_server_check(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = Cluster(_dj(), [_held("a", _record("t1"))])
    assert _run(cluster, "--node", "a", "--dry-run") == 0 and cluster.patches == []
    assert capsys.readouterr().out == "node/a release requested (daemonjob.daemonjob.io/dj) (dry run)\n"
    assert _run(cluster, "--node", "a", "--dry-run=server") == 0
    assert cluster.patches[-1][1] == {"dryRun": "All"}


def test_nothing_kept_is_said_and_node_or_all_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    cluster = Cluster(_dj(), [node("a")])
    assert _run(cluster, "--all") == 0 and cluster.patches == []
    assert "keeps no node cordoned: nothing to release" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parse(["release", "dj"])
    with pytest.raises(SystemExit):
        parse(["release", "dj", "--all", "--node", "a"])


def test_release_requests_read_what_the_plugin_writes_and_ignore_anything_else() -> None:
    assert release_requests(_dj(**{ANNOTATION_RELEASE: '{"a":"t1","b":3}'})) == {"a": "t1"}
    assert release_requests(_dj(**{ANNOTATION_RELEASE: "a,b"})) == {}
    assert release_requests(_dj()) == {}


def test_status_names_a_kept_node_and_a_drain_timeout_the_status_lists_leave_out() -> None:
    from daemonjob.domain.shared.noderecord import DrainOutcome
    from daemonjob.kubectl.views.nodes import build_view, current_revision

    d = _dj()
    revision = current_revision(d)
    d["status"] = {"currentRevision": revision, "nodeMaintenance": {"rollout": revision, "skippedNodes": []}}
    timed_out = node("late")
    outcome = DrainOutcome("ns/dj", UID, revision, None, "Skip")
    timed_out["metadata"]["annotations"] = {outcome.annotation: outcome.text()}
    view = build_view(d, [], [], [_held("kept", _record("t1")), timed_out])
    rows = {r.node: r for r in view.rows}
    assert rows["kept"].reason == "kept cordoned" and "release --node kept" in rows["kept"].message
    assert rows["late"].reason == "DrainSkipped"
