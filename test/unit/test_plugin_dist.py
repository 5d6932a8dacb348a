"""The plugin as a distribution of its own (hack/plugin_dist.py): what it takes of the package
and of the lock, none of the controller's server-side dependencies, a valid krew manifest, and
an archive whose bytes depend on its content only."""

from __future__ import annotations

import configparser
import hashlib
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest
import yaml

import daemonjob

ROOT = Path(__file__).resolve().parents[2]
SERVER_SIDE = ("prometheus-client", "msgspec", "cachetools", "cryptography")


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plugin_dist", ROOT / "hack" / "plugin_dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


dist = _load()


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_plugin_imports_none_of_the_controller_and_its_server_side() -> None:
    modules, _ = dist.plugin_modules()
    assert "daemonjob.kubectl.cli" in modules and "daemonjob.domain.spec.warnings" in modules
    heavy = {"daemonjob.controller.wiring.controller", "daemonjob.manager", "daemonjob.metricsserver", "daemonjob.cli"}
    assert not modules & heavy
    assert not any(m.startswith("daemonjob.testing") for m in modules)


def test_every_module_the_plugin_loads_to_parse_its_arguments_is_in_the_archive() -> None:
    """The parser is built from several modules (cli, cliparts, viewargs, actionargs): each must be
    found by the archive's import walk, or the installed plugin fails on its first command."""
    code = (
        "import sys\n"
        "from daemonjob.kubectl import cli, complete\n"
        "cli.build_parser()\n"
        "print('\\n'.join(m for m in sys.modules if m.split('.')[0] == 'daemonjob'))"
    )
    run = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    loaded = set(run.stdout.split())
    modules, _ = dist.plugin_modules()
    assert {
        "daemonjob.kubectl.args.cliparts",
        "daemonjob.kubectl.args.viewargs",
        "daemonjob.kubectl.args.actionargs",
    } <= loaded
    assert loaded <= modules, sorted(loaded - modules)


def test_every_library_the_plugin_imports_is_in_what_it_declares_and_nothing_server_side() -> None:
    _, imported = dist.plugin_modules()
    provided = importlib.metadata.packages_distributions()
    needed = set(dist.plugin_requirements(dist.lock_entries(ROOT / "requirements.txt")))
    for name in sorted(imported):
        assert name in provided, f"{name}: no installed distribution provides it"
        assert {_canonical(d) for d in provided[name]} & needed, f"{name} ({provided[name]}) is not in the archive"
    assert not needed & set(SERVER_SIDE)
    assert not needed & {_canonical(n) for n in dist.LEFT_OUT}


def test_what_the_plugin_declares_is_what_the_package_requires() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    declared = {_canonical(re.split(r"[<>=!~ ]", line)[0]) for line in cfg["options"]["install_requires"].split()}
    declared.discard("")
    assert {_canonical(n) for n in dist.PLUGIN_REQUIRES} <= declared
    assert set(SERVER_SIDE) <= declared  # the controller's, and left out of the plugin


def test_the_rendered_krew_manifest_names_the_archive_its_sha256_and_the_version() -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    text = dist.render_manifest("1.2.3", digest, "https://example.com/releases/download/")
    manifest = yaml.safe_load(text)
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin"
    assert manifest["metadata"]["name"] == dist.TEMPLATE.stem == "daemonjob"  # krew: the file is named after it
    spec = manifest["spec"]
    assert spec["version"] == "v1.2.3" and spec["shortDescription"] and spec["homepage"].startswith("https://")
    (platform,) = spec["platforms"]
    assert platform["selector"] == {"matchLabels": {"os": "linux", "arch": "amd64"}}
    assert platform["uri"] == f"https://example.com/releases/download/v1.2.3/{dist.archive_name('1.2.3')}"
    assert platform["sha256"] == digest
    assert platform["bin"] == "kubectl-daemonjob"
    assert {f["from"] for f in platform["files"]} == {*dist.ENTRY_POINTS, "lib", "LICENSE"}
    assert "{{" not in text


def test_an_unfilled_placeholder_is_refused(tmp_path: Path) -> None:
    template = tmp_path / "daemonjob.yaml"
    template.write_text("spec: {version: v{{VERSION}}, other: '{{OTHER}}'}\n")
    with pytest.raises(SystemExit, match="OTHER"):
        dist.render_manifest("1.2.3", "0" * 64, template=template)


def test_the_version_is_the_packages() -> None:
    assert dist.version() == daemonjob.__version__
    assert dist.archive_name(daemonjob.__version__) == f"kubectl-daemonjob_v{daemonjob.__version__}_linux_amd64.tar.gz"


def test_the_archive_is_the_same_bytes_for_the_same_content(tmp_path: Path) -> None:
    archives = []
    for i in range(2):
        tree = tmp_path / f"tree{i}"
        (tree / "lib" / "pkg").mkdir(parents=True)
        (tree / "lib" / "pkg" / "m.py").write_text("x = 1\n")
        (tree / "kubectl-daemonjob").write_text("#!/usr/bin/env python3\n")
        (tree / "kubectl-daemonjob").chmod(0o700 if i else 0o755)
        out = tmp_path / f"a{i}.tar.gz"
        dist.write_archive(tree, out)
        archives.append(out.read_bytes())
    assert archives[0] == archives[1]
    with tarfile.open(tmp_path / "a0.tar.gz") as tar:
        assert tar.getnames() == ["kubectl-daemonjob", "lib", "lib/pkg", "lib/pkg/m.py"]
        assert tar.getmember("kubectl-daemonjob").mode == 0o755
        assert {m.uid for m in tar.getmembers()} == {0}


def test_the_lock_is_read_with_the_names_each_pin_is_there_for() -> None:
    entries = dist.lock_entries(ROOT / "requirements.txt")
    entry, via = entries["pydantic-core"]
    assert entry.startswith("pydantic-core==") and "--hash=sha256:" in entry and "#" not in entry
    assert via == {"pydantic"}
    assert "daemonjob" in entries["kubernetes"][1]
