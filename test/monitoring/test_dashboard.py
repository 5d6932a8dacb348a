"""The Grafana dashboard: importable JSON, datasource, namespace and DaemonJob variables, and
every panel query valid PromQL (checked by promtool as recording rules). That each query
returns data is shown against a real Prometheus in e2e/test_monitoring.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from daemonjob.testing.prometheus import DASHBOARD_PATH, dashboard_queries, promtool, provision_prometheus

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "manifests" / "monitoring" / "dashboard.json"
VARIABLES = {"job": "daemonjob-controller-metrics", "namespace": "ops", "daemonjob": ".*"}


def load() -> dict:
    return json.loads(DASHBOARD.read_text())


def test_the_shipped_dashboard_is_the_packaged_one() -> None:
    assert DASHBOARD_PATH.resolve() == DASHBOARD.resolve()


def test_variables_datasource_namespace_daemonjob() -> None:
    variables = {v["name"]: v for v in load()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "daemonjob"):
        assert variables[name]["multi"] and variables[name]["includeAll"], name
    for panel in load()["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_panels_cover_what_operators_look_at() -> None:
    titles = {p["title"] for p in load()["panels"]}
    for wanted in (
        "Rollout state",
        "Nodes by state",
        "Runs started",
        "Ticks skipped",
        "Runs finished",
        "Time since the last successful run",
        "Rollout gate in force",
        "Time waiting at a gate",
        "Reconciles by result",
        "Reconcile duration",
        "Work queue depth",
        "Work queue latency",
        "API requests by verb and code",
        "Watch health",
        "Leader and build",
        "Nodes cordoned",
        "Drain duration",
        "Evictions refused",
    ):
        assert wanted in titles, wanted


def test_panel_ids_and_layout() -> None:
    panels = load()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        pos = p["gridPos"]
        assert pos["x"] + pos["w"] <= 24, p["title"]


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    queries = dashboard_queries(VARIABLES)
    assert queries and all("$" not in q for _, q in queries), [q for _, q in queries if "$" in q]
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"dashboard:query_{i}", "expr": q} for i, (_, q) in enumerate(queries)],
            }
        ]
    }
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump(rules))
    out = promtool("check", "rules", str(path), bin_dir=provision_prometheus())
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr}"
    assert re.search(rf"{len(queries)} rules found", out.stdout), out.stdout
