"""`make dist` (hack/dist.sh, without the image: building it takes minutes, test/image covers it):
every file of the release carries the one version, the krew manifest names the plugin
archive's sha256, and the plugin runs from its archive alone, in a fresh virtualenv without
the package or any library, on every Python it is built for that this machine has."""

from __future__ import annotations

import email.parser
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

import daemonjob

ROOT = Path(__file__).resolve().parents[2]
VERSION = daemonjob.__version__
ARCHIVE = f"kubectl-daemonjob_v{VERSION}_linux_amd64.tar.gz"
SERVER_SIDE = ("prometheus_client", "msgspec", "cachetools", "cryptography")
COMMANDS = ("status", "results", "wait", "logs", "rerun", "pause", "resume", "promote", "release", "run-now")
COMMANDS += ("create", "plan", "list")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist") / "dist"
    env = {**os.environ, "PY": sys.executable, "DIST": str(out), "IMAGE": "0", "RELEASE_URL": "https://example.com/dl"}
    proc = subprocess.run(
        ["bash", str(ROOT / "hack" / "dist.sh")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def plugin(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The archive unpacked, as krew does."""
    where = tmp_path_factory.mktemp("krew-store")
    with tarfile.open(built / ARCHIVE) as tar:
        tar.extractall(where, filter="data")
    return where


def test_every_file_of_the_release_carries_the_one_version(built: Path) -> None:
    assert sorted(p.name for p in built.iterdir()) == sorted(
        [
            f"daemonjob-{VERSION}-py3-none-any.whl",
            f"daemonjob-{VERSION}.tar.gz",
            f"daemonjob-{VERSION}.tgz",
            ARCHIVE,
            "daemonjob.yaml",
            "SHA256SUMS",
        ]
    )
    with zipfile.ZipFile(built / f"daemonjob-{VERSION}-py3-none-any.whl") as wheel:
        metadata = email.parser.Parser().parsestr(wheel.read(f"daemonjob-{VERSION}.dist-info/METADATA").decode())
    assert metadata["Version"] == VERSION
    with tarfile.open(built / f"daemonjob-{VERSION}.tgz") as chart:
        member = chart.extractfile("daemonjob/Chart.yaml")
        assert member is not None
        meta = yaml.safe_load(member.read())
    assert (meta["version"], meta["appVersion"]) == (VERSION, VERSION)
    assert yaml.safe_load((built / "daemonjob.yaml").read_text())["spec"]["version"] == f"v{VERSION}"


def test_the_krew_manifest_names_the_archive_and_its_sha256(built: Path) -> None:
    (platform,) = yaml.safe_load((built / "daemonjob.yaml").read_text())["spec"]["platforms"]
    assert platform["uri"] == f"https://example.com/dl/v{VERSION}/{ARCHIVE}"
    assert platform["sha256"] == _sha256(built / ARCHIVE)
    sums = dict(reversed(line.split()) for line in (built / "SHA256SUMS").read_text().splitlines())
    assert sums == {p.name: _sha256(p) for p in built.iterdir() if p.name != "SHA256SUMS"}


def test_the_archive_holds_the_plugin_and_none_of_the_controllers_server_side(plugin: Path) -> None:
    assert sorted(p.name for p in plugin.iterdir()) == [
        "LICENSE",
        "kubectl-daemonjob",
        "kubectl_complete-daemonjob",
        "lib",
    ]
    assert os.access(plugin / "kubectl-daemonjob", os.X_OK)
    lib = plugin / "lib"
    assert (lib / "daemonjob" / "kubectl" / "cli.py").is_file()
    assert not (lib / "daemonjob" / "controller" / "controller.py").exists()
    for name in (*SERVER_SIDE, "aiohttp", "kubernetes/aio", "bin"):
        assert not (lib / name).exists(), name


def _python(version: str) -> str | None:
    """An interpreter of that version on this machine: on PATH, or one pyenv installed."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates = [shutil.which(f"python{version}"), *(str(p / "bin" / "python3") for p in pyenv.glob(f"{version}.*"))]
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:  # (a pyenv shim of another version fails)
            return candidate
    return None


def _fresh_python(version: str, where: Path) -> Path | None:
    """A virtualenv of that Python with nothing installed (no pip either), if this machine has it."""
    found = _python(version)
    if found is None:
        return None
    subprocess.run([found, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    return where / "bin"


@pytest.mark.parametrize("python", ["3.11", "3.12", "3.13"])
def test_the_plugin_runs_from_its_archive_alone(plugin: Path, tmp_path: Path, python: str) -> None:
    venv_bin = _fresh_python(python, tmp_path / "venv")
    if venv_bin is None:
        if python == f"{sys.version_info[0]}.{sys.version_info[1]}":
            raise AssertionError("the test's own Python must be found")
        pytest.fail(
            f"no Python {python} here: the plugin archive is built for it, "
            f"so its test needs one (pyenv install {python})"
        )
    # as krew installs it: a link on PATH to the entry point, run by python3 through its shebang
    links = tmp_path / "krew-bin"
    links.mkdir()
    (links / "kubectl-daemonjob").symlink_to(plugin / "kubectl-daemonjob")
    env = {"PATH": f"{links}:{venv_bin}:/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl-daemonjob", *args], env=env, capture_output=True, text=True, timeout=120)

    out = run("--help")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: kubectl daemonjob")
    for command in COMMANDS:
        out = run(command, "--help")
        assert out.returncode == 0 and "usage: kubectl daemonjob" in out.stdout, (command, out.stderr)
    # the rule book, cron and zone database, without a cluster
    out = run(
        *("create", "x", "--image=busybox:1.36", "-n", "ns", "--schedule=0 3 * * *", "--time-zone=Europe/Berlin"),
        *("--dry-run=client", "-o", "yaml", "--", "true"),
    )
    assert out.returncode == 0, out.stderr
    assert yaml.safe_load(out.stdout)["spec"]["timeZone"] == "Europe/Berlin"
    out = run("create", "x", "--image=busybox:1.36", "-n", "ns", "--schedule=0 25 * * *", "--dry-run=client")
    assert out.returncode == 1 and "spec.schedule" in out.stderr
    # no cluster: said in kubectl's words, not a traceback
    out = run("list")
    assert out.returncode == 1 and out.stderr.startswith("error: ") and "Traceback" not in out.stderr
