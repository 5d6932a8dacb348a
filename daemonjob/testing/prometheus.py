"""A real Prometheus beside the local cluster: the shipped alerts loaded, controllers scraped.

The rules come from the PrometheusRule of `manifests/monitoring/` (shipped in the package
as data), unchanged except that tests may shorten every `for:` so that an alert goes
pending, then firing, within seconds. Targets are scraped as the ServiceMonitor would:
job `daemonjob-controller-metrics`, the controller's own `namespace` labels kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
import yaml

from .children import die_with_parent, free_port, stop_pid
from .cluster import DATA_DIR

PROVISION_SCRIPT = DATA_DIR / "provision-prometheus.sh"
RULE_PATH = DATA_DIR / "prometheusrule.yaml"  # manifests/monitoring/prometheusrule.yaml
DASHBOARD_PATH = DATA_DIR / "dashboard.json"  # manifests/monitoring/dashboard.json
JOB = "daemonjob-controller-metrics"  # the metrics Service's name: the ServiceMonitor's job label
CONTROLLER_NAMESPACE = "daemonjob-system"


def provision_prometheus() -> Path:
    """Directory holding `prometheus` and `promtool` (provisioned on first use)."""
    out = subprocess.run(["bash", str(PROVISION_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{PROVISION_SCRIPT} failed (exit {out.returncode}); its message is above")
    return Path(out.stdout.strip().splitlines()[-1])


def rule_groups(rule_path: Path = RULE_PATH, for_override: str | None = None) -> dict[str, Any]:
    """The PrometheusRule's `spec` as a Prometheus rules file; `for_override` replaces every `for:`."""
    spec = yaml.safe_load(rule_path.read_text())["spec"]
    if for_override is not None:
        for group in spec["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    rule["for"] = for_override
    return {"groups": spec["groups"]}


def write_rules(dest: Path, for_override: str | None = None, rule_path: Path = RULE_PATH) -> Path:
    dest.write_text(yaml.safe_dump(rule_groups(rule_path, for_override), sort_keys=False))
    return dest


@dataclass
class LocalPrometheus:
    """`start()` / `stop()` (by PID), or a context manager. Targets are host:port strings."""

    workdir: Path
    targets: Sequence[str] = ()
    scrape_interval: str = "1s"
    evaluation_interval: str = "1s"
    for_override: str | None = None  # e.g. "5s": alerts pend, then fire, within a test
    port: int = 0
    bin_dir: Path | None = None
    extra_rule_groups: Sequence[dict[str, Any]] = ()  # more rule groups beside the shipped ones
    extra_scrape_configs: Sequence[dict[str, Any]] = ()  # more scrape jobs beside the controllers'
    # Secure metrics: https, the bearer token read from this file at every scrape, the
    # controller's self-signed certificate accepted (the shipped ServiceMonitor's settings).
    token_file: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.workdir / "prometheus.yml"

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    def config(self) -> dict[str, Any]:
        job: dict[str, Any] = {
            "job_name": JOB,
            "honor_labels": True,  # keep the DaemonJob's own `namespace` label
            "static_configs": [{"targets": list(self.targets), "labels": {"namespace": CONTROLLER_NAMESPACE}}],
        }
        if self.token_file is not None:
            job.update(
                {
                    "scheme": "https",
                    "authorization": {"credentials_file": str(self.token_file)},
                    "tls_config": {"insecure_skip_verify": True},
                }
            )
        return {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.evaluation_interval},
            "rule_files": ["rules.yml"],
            "scrape_configs": [job, *self.extra_scrape_configs],
        }

    def write_config(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        rules = self.workdir / "rules.yml"
        write_rules(rules, self.for_override)
        if self.extra_rule_groups:
            groups = yaml.safe_load(rules.read_text())
            groups["groups"].extend(self.extra_rule_groups)
            rules.write_text(yaml.safe_dump(groups, sort_keys=False))
        self.config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))

    def __enter__(self) -> LocalPrometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, wait: bool = True) -> LocalPrometheus:
        self.bin_dir = self.bin_dir or provision_prometheus()
        self.port = self.port or free_port()
        self.write_config()
        args = [
            str(self.bin_dir / "prometheus"),
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
            "--log.level=warn",
            *self._asset_args(),
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                preexec_fn=die_with_parent,
            )
        if wait:
            self.wait_ready()
        return self

    def _asset_args(self) -> list[str]:
        """Debian's build reads its web UI from disk; the cache keeps it beside bin/."""
        assert self.bin_dir is not None
        share = self.bin_dir.parent / "share" / "web"
        return [f"--web.local-assets={share}/"] if share.is_dir() and _debian_build(self.bin_dir) else []

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self) -> None:
        if self.proc is not None:
            stop_pid(self.proc.pid)
            self.proc.wait()

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                if _http().request("GET", f"{self.url}/-/ready", timeout=2.0, retries=False).status == 200:
                    return
            except urllib3.exceptions.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready after {timeout}s: {self.log_tail()}")

    def page(self, name: str) -> str:
        """The URL of a page of Prometheus's own UI ("alerts", "graph"): Debian's build
        serves only the classic UI, under /classic."""
        for path in (f"/{name}", f"/classic/{name}"):
            try:
                if _http().request("GET", self.url + path, timeout=2.0, retries=False, redirect=False).status == 200:
                    return self.url + path
            except urllib3.exceptions.HTTPError:
                pass
        return f"{self.url}/{name}"

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    # -- the HTTP API ----------------------------------------------------------------------
    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; returns `data`, raises with Prometheus's error otherwise."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        r = _http().request("GET", url, timeout=10.0, retries=False)
        body = json.loads(r.data)
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result (a vector's samples, or [scalar] for a scalar)."""
        data = self.api("query", query=expr)
        return data["result"] if data["resultType"] in ("vector", "matrix") else [{"value": data["result"]}]

    def alerts(self, name: str | None = None) -> list[dict[str, Any]]:
        """Active alerts (pending and firing), optionally of one alert name."""
        found = self.api("alerts")["alerts"]
        return [a for a in found if name is None or a["labels"].get("alertname") == name]

    def targets_up(self) -> int:
        return sum(1 for t in self.api("targets")["activeTargets"] if t.get("health") == "up")


def dashboard_queries(
    variables: dict[str, str], rate_interval: str = "1m", dashboard_path: Path = DASHBOARD_PATH
) -> list[tuple[str, str]]:
    """(panel title, query) for every query of every panel, with the dashboard's variables and
    Grafana's interval macros replaced as Grafana would before sending them to Prometheus."""
    dashboard = json.loads(dashboard_path.read_text())
    macros = {"__rate_interval": rate_interval, "__interval": rate_interval, "__range": rate_interval}
    values = {**macros, **variables}
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", ()):
            expr = target["expr"]
            for name in sorted(values, key=len, reverse=True):  # $namespace before a shorter $name
                expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
            out.append((panel["title"], expr))
    return out


class PrometheusError(RuntimeError):
    pass


def _debian_build(bin_dir: Path) -> bool:
    out = subprocess.run([str(bin_dir / "prometheus"), "--version"], capture_output=True, text=True, check=False)
    return "+ds" in (out.stdout + out.stderr)


_POOL: urllib3.PoolManager | None = None


def _http() -> urllib3.PoolManager:
    global _POOL
    if _POOL is None:
        _POOL = urllib3.PoolManager()
    return _POOL


def promtool(*args: str, bin_dir: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool; the caller checks the exit code (its output explains a failure)."""
    tool = (bin_dir or provision_prometheus()) / "promtool"
    return subprocess.run(
        [str(tool), *args], capture_output=True, text=True, check=False, cwd=cwd, env={**os.environ}, timeout=300
    )
