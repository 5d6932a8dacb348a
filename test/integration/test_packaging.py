"""The test bed from a wheel in a fresh virtualenv, with no source checkout in sight.

Builds the wheel, installs it with the `testing` extra into a new virtualenv, and from a
directory outside the checkout runs `python -m daemonjob.testing up` and `down`, and a
user's own pytest file that uses the plugin's fixtures.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemonjob.testing.cluster import provision_binaries

ROOT = Path(__file__).resolve().parents[2]

USER_TEST = """
from daemonjob.machinery.client.kube import path_for


def test_my_daemonjob_is_accepted(kube, installed_crd, namespace, make_nodes):
    nodes = make_nodes(2)
    body = {"apiVersion": "daemonjob.io/v1alpha1", "kind": "DaemonJob", "metadata": {"name": "mine"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}}
    created = kube.create(path_for("daemonjob.io/v1alpha1", "daemonjobs", namespace), body)
    assert created["spec"]["rerunPolicy"] == "OnTemplateChange"  # defaulted by the shipped CRD
    assert len(nodes) == 2
"""


def run(cmd: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["DAEMONJOB_KUBE_BIN"] = str(provision_binaries())  # the cached binaries: no second build
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "dist"), str(ROOT)], cwd=work)
    (wheel,) = (work / "dist").glob("daemonjob-*.whl")
    run([sys.executable, "-m", "venv", str(work / "venv")], cwd=work)
    python = work / "venv" / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", f"{wheel}[testing]"], cwd=work)
    yield python


def test_the_installed_package_has_no_path_into_a_checkout(venv: Path, tmp_path: Path) -> None:
    out = run(
        [
            str(venv),
            "-c",
            "import daemonjob.testing.cluster as c; print(c.PROVISION_SCRIPT); "
            "print('kind: CustomResourceDefinition' in c.CRD_PATH.read_text())",
        ],
        cwd=tmp_path,
    ).stdout
    assert str(ROOT) not in out and "site-packages" in out
    assert out.split()[-1] == "True"


def test_up_and_down_from_an_installed_wheel(venv: Path, tmp_path: Path) -> None:
    """`up --prometheus` also starts Prometheus with the packaged alerts and prints its URL."""
    cluster_dir = tmp_path / "cluster"
    up = run(
        [str(venv), "-m", "daemonjob.testing", "up", "--dir", str(cluster_dir), "--nodes", "2", "--prometheus"],
        cwd=tmp_path,
    )
    try:
        assert "cluster up: 2 Ready node(s)" in up.stdout
        kubectl = [str(provision_binaries() / "kubectl"), "--kubeconfig", str(cluster_dir / "kubeconfig")]
        nodes = run([*kubectl, "get", "nodes", "-o", "name"], cwd=tmp_path).stdout.split()
        assert len(nodes) == 2
        run([*kubectl, "get", "crd", "daemonjobs.daemonjob.io"], cwd=tmp_path)
        supervisor = int((cluster_dir / "supervisor.pid").read_text())
        prometheus = int((cluster_dir / "prometheus.pid").read_text())
        url = re.search(r"prometheus: (http://127\.0\.0\.1:\d+) \(alerts: (\S+)\)", up.stdout)
        assert url, up.stdout
        with urllib.request.urlopen(f"{url[1]}/api/v1/rules?type=alert", timeout=10) as resp:
            rules = [r["name"] for g in json.load(resp)["data"]["groups"] for r in g["rules"]]
        assert "DaemonJobNodesFailed" in rules and len(rules) == len(set(rules)) >= 10, rules
        with urllib.request.urlopen(url[2], timeout=10) as resp:  # the UI's alerts page
            assert "DaemonJobNodesFailed" in resp.read().decode()
    finally:
        run([str(venv), "-m", "daemonjob.testing", "down", "--dir", str(cluster_dir)], cwd=tmp_path)
    for pid in (supervisor, prometheus):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_the_pytest_plugin_serves_a_users_own_tests(venv: Path, tmp_path: Path) -> None:
    """Only where the user's conftest.py enables it: installing the package registers no fixtures."""
    (tmp_path / "test_mine.py").write_text(USER_TEST)
    fixtures = run(
        [str(venv), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--fixtures", "test_mine.py"], cwd=tmp_path
    ).stdout
    assert "installed_crd" not in fixtures and "make_nodes" not in fixtures
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["daemonjob.testing.pytest_plugin"]\n')
    out = run([str(venv), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mine.py"], cwd=tmp_path).stdout
    assert "1 passed" in out
