"""Render docs/dashboard.png: the panels of manifests/monitoring/dashboard.json, drawn with
matplotlib from the answers of a real Prometheus.

Starts the local control plane with simulated nodes, the controller and a Prometheus
scraping it (the shipped rules loaded), runs a few DaemonJobs for a couple of minutes (a
rollout with maxParallel and one failing node, a template change that re-runs it, a
scheduled DaemonJob run now, a small audit), then asks Prometheus for every panel's
queries over that window (`query_range`; tables with an instant query) and lays the panels
out on the dashboard's own 24-column grid. Grafana is not involved: this shows what the
queries return, not Grafana's styling.

    pip install -e '.[docs]'          # matplotlib
    python hack/dashboard_png.py      # about 3 minutes; writes docs/dashboard.png
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.parse
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402 - imported once sys.path has the checkout

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - after matplotlib.use("Agg")
from matplotlib.gridspec import GridSpec  # noqa: E402 - imported once sys.path has the checkout

from daemonjob.machinery.client.kube import PATCH_MERGE, Kube, path_for  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.testing.cluster import LocalCluster  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.testing.crd import install_crd  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.testing.process import ControllerProcess  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.testing.prometheus import DASHBOARD_PATH, JOB, LocalPrometheus, _http  # noqa: E402 - imported once sys.path has the checkout
from daemonjob.testing.sim.kubelet import NodeSpec, SimKubelet  # noqa: E402 - imported once sys.path has the checkout

NAMESPACE = "demo"
RATE_INTERVAL = "20s"
DJ_API = "daemonjob.io/v1alpha1"


def daemonjob(name: str, seconds: int, *, fail_on: str = "", **spec: Any) -> dict[str, Any]:
    annotations = {"sim.daemonjob.io/duration": str(seconds)}
    if fail_on:
        annotations |= {"sim.daemonjob.io/fail-on": fail_on, "sim.daemonjob.io/exit-code": "3"}
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36", "command": ["true"]}]}
    return {
        "apiVersion": DJ_API,
        "kind": "DaemonJob",
        "metadata": {"name": name},
        "spec": {
            "jobTemplate": {
                "spec": {"backoffLimit": 0, "template": {"metadata": {"annotations": annotations}, "spec": pod}}
            },
            **spec,
        },
    }


def run_scenario(kube: Kube, duration: float) -> None:
    """DaemonJobs that give every panel something to show."""
    djs = path_for(DJ_API, "daemonjobs", NAMESPACE)
    kube.create(path_for("v1", "namespaces"), {"metadata": {"name": NAMESPACE}})
    kube.create(djs, daemonjob("node-setup", 4, fail_on="node-04", maxParallel=2))
    kube.create(djs, daemonjob("audit", 1))
    nightly = daemonjob("nightly-cleanup", 2, schedule="0 3 * * *", timeZone="Europe/Berlin")
    nightly["metadata"]["annotations"] = {"daemonjob.io/run-now": "first"}
    kube.create(djs, nightly)
    started = time.monotonic()
    edits = 0
    while time.monotonic() - started < duration:
        time.sleep(5)
        elapsed = time.monotonic() - started
        if elapsed > 45 * (edits + 1) and elapsed < duration - 20:  # re-run everywhere now and then
            edits += 1
            kube.patch(
                path_for(DJ_API, "daemonjobs", NAMESPACE, "node-setup"),
                {"spec": {"jobTemplate": {"metadata": {"annotations": {"demo/rerun": str(edits)}}}}},
                content_type=PATCH_MERGE,
            )
            kube.patch(
                path_for(DJ_API, "daemonjobs", NAMESPACE, "nightly-cleanup"),
                {"metadata": {"annotations": {"daemonjob.io/run-now": f"again-{edits}"}}},
                content_type=PATCH_MERGE,
            )


def substitute(expr: str, variables: dict[str, str]) -> str:
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace("$" + name, variables[name])
    return expr


def legend(fmt: str, labels: dict[str, str]) -> str:
    if not fmt or fmt == "__auto":
        return ",".join(f"{k}={v}" for k, v in labels.items() if k != "__name__") or "value"
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m[1], ""), fmt)


def query(prom: LocalPrometheus, path: str, **params: Any) -> list[dict[str, Any]]:
    r = _http().request("GET", f"{prom.url}/api/v1/{path}?{urllib.parse.urlencode(params)}", timeout=30.0)
    body = json.loads(r.data)
    if body["status"] != "success":
        raise RuntimeError(f"{params.get('query')}: {body.get('error')}")
    return body["data"]["result"]


def draw_timeseries(
    ax: Any, prom: LocalPrometheus, panel: dict[str, Any], variables: dict[str, str], start: float, end: float
) -> None:
    for target in panel["targets"]:
        expr = substitute(target["expr"], variables)
        for series in query(prom, "query_range", query=expr, start=start, end=end, step=2):
            xs = [float(t) - start for t, _ in series["values"]]
            ys = [float(v) for _, v in series["values"]]
            ax.plot(xs, ys, linewidth=1.2, label=legend(target.get("legendFormat", ""), series["metric"]))
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    ax.set_xlabel("seconds", fontsize=7)
    if unit:
        ax.set_ylabel(unit, fontsize=7)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=6, loc="upper left", ncol=2 if len(handles) > 4 else 1, framealpha=0.6)


def draw_table(ax: Any, prom: LocalPrometheus, panel: dict[str, Any], variables: dict[str, str]) -> None:
    """A table with one row per (namespace, name) or per series, its labels as columns."""
    ax.axis("off")
    (target,) = panel["targets"]
    result = query(prom, "query", query=substitute(target["expr"], variables))
    pivot = next(
        (t["options"]["valueLabel"] for t in panel.get("transformations", ()) if t["id"] == "labelsToFields"), None
    )
    rows: dict[tuple[str, ...], dict[str, str]] = {}
    for r in result:
        labels = dict(r["metric"])
        value = r["value"][1]
        if pivot:
            column = labels.pop(pivot)
            rows.setdefault(tuple(labels.values()), dict(labels))[column] = f"{float(value):g}"
        else:
            rows[tuple(labels.values())] = {**labels, "value": f"{float(value):g}"}
    if not rows:
        return
    columns = list(dict.fromkeys(c for row in rows.values() for c in row))
    order = ["namespace", "name", "desired", "active", "succeeded", "failed", "pending"]
    columns.sort(key=lambda c: order.index(c) if c in order else len(order))
    cells = [[row.get(c, "") for c in columns] for row in sorted(rows.values(), key=lambda r: tuple(r.values()))]
    table = ax.table(cellText=cells, colLabels=columns, loc="upper center", cellLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.scale(1, 1.3)


def render(prom: LocalPrometheus, start: float, end: float, out: Path) -> None:
    dashboard = json.loads(DASHBOARD_PATH.read_text())
    variables = {
        "job": JOB,
        "namespace": NAMESPACE,
        "daemonjob": ".*",
        "__rate_interval": RATE_INTERVAL,
        "__interval": RATE_INTERVAL,
    }
    panels = dashboard["panels"]
    height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    fig = plt.figure(figsize=(22, height * 0.42))
    grid = GridSpec(height, 24, figure=fig, hspace=2.5, wspace=1.2, top=0.97, bottom=0.02)
    for panel in panels:
        pos = panel["gridPos"]
        if panel["type"] == "row":
            ax = fig.add_subplot(grid[pos["y"], :])
            ax.axis("off")
            ax.text(0, 0.2, panel["title"], fontsize=13, fontweight="bold")
            continue
        ax = fig.add_subplot(grid[pos["y"] : pos["y"] + pos["h"] - 1, pos["x"] : pos["x"] + pos["w"]])
        ax.set_title(panel["title"], fontsize=9, loc="left")
        if panel["type"] == "table":
            draw_table(ax, prom, panel, variables)
        else:
            draw_timeseries(ax, prom, panel, variables, start, end)
    when = datetime.fromtimestamp(end).strftime("%Y-%m-%d %H:%M")
    fig.suptitle(
        f"DaemonJob dashboard: its queries answered by Prometheus over {end - start:.0f} s of a local "
        f"cluster ({when}; namespace {NAMESPACE}, every DaemonJob)",
        fontsize=12,
        y=0.995,
    )
    fig.savefig(out, dpi=80, bbox_inches="tight")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--duration", type=float, default=150.0, help="seconds of activity to record")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    args = parser.parse_args()
    with LocalCluster() as cluster:
        kube = Kube.from_config(str(cluster.kubeconfig))
        with SimKubelet(kube) as kubelet:
            names = [f"node-{i:02d}" for i in range(1, args.nodes + 1)]
            kubelet.add_nodes(NodeSpec(n) for n in names)
            kubelet.wait_ready(names)
            install_crd(cluster.kubectl_command())
            controller = ControllerProcess(
                cluster.kubeconfig, cluster.workdir / "controller.log", "--log-format", "json"
            ).start(wait=True)
            try:
                with LocalPrometheus(
                    cluster.workdir / "prometheus", targets=[f"127.0.0.1:{controller.metrics_port}"]
                ) as prom:
                    start = time.time()
                    run_scenario(kube, args.duration)
                    time.sleep(3)  # the last scrape and evaluation
                    render(prom, start, time.time(), args.out)
            finally:
                controller.stop()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
