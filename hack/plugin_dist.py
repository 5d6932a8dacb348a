"""`kubectl daemonjob` as a distribution of its own: the archive krew installs, and its manifest.

The plugin is the client side of the package: daemonjob/kubectl and what it imports of the
domain, the admission rule book and the machinery, never the controller's server-side
dependencies (prometheus-client, msgspec, cachetools, cryptography). The archive holds

  kubectl-daemonjob            the entry point: python3 on PATH runs it, it finds lib/ beside itself
  kubectl_complete-daemonjob   kubectl's completion of the plugin's arguments (kubectl 1.26+)
  lib/                         the plugin's modules, and its dependencies at the lock's pins
                               (requirements.txt, hashes checked), with the native modules of
                               every Python of --python
  LICENSE

and is reproducible (sorted entries, fixed times and owners), so its sha256, written into the
krew manifest rendered beside it (krew/daemonjob.yaml with its placeholders filled), names one
content. `make dist` runs it:

  python hack/plugin_dist.py --out dist [--python 3.11 ...] [--release-url URL]
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "daemonjob"
ENTRY_POINTS = {  # file in the archive -> module whose main() it runs (setup.cfg's console_scripts)
    "kubectl-daemonjob": "daemonjob.kubectl.cli",
    "kubectl_complete-daemonjob": "daemonjob.kubectl.complete",
}
# What the plugin declares: setup.cfg's install_requires that its modules import (and tzdata,
# the zone database zoneinfo reads for spec.timeZone where the system has none).
PLUGIN_REQUIRES = (
    "kubernetes",
    "orjson",
    "structlog",
    "httptools",
    "cronsim",
    "tzdata",
    "rich",
    "pyyaml",
    "jsonpath-ng",
)
# Dependencies of those that the plugin never imports: kubernetes' asyncio client (kubernetes.aio)
# and aiohttp with everything only it needs. Left out, with kubernetes/aio itself (41 MB).
LEFT_OUT = ("aiohttp", "aiohttp-retry")
PRUNED = ("kubernetes/aio", "bin")
# The first is the lock's (make lock resolves for the image's 3.11): every pin is installed for
# it, the others get the extension modules of the same pins. Not 3.10: cronsim 2.8 needs 3.11.
PYTHONS = ("3.11", "3.12", "3.13")
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64")
TEMPLATE = ROOT / "krew" / "daemonjob.yaml"
RELEASE_URL = "https://github.com/daemonjob/daemonjob/releases/download"
EPOCH = 315532800  # 1980-01-01: the earliest time a zip (and so a wheel) can hold; fixed for reproducibility


def version() -> str:
    """The release, from its one place: daemonjob/__init__.py's __version__."""
    text = (ROOT / PACKAGE / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"$', text, re.M)
    if found is None:
        raise SystemExit("daemonjob/__init__.py: no __version__")
    return found[1]


def archive_name(release: str) -> str:
    return f"kubectl-daemonjob_v{release}_linux_amd64.tar.gz"


# -- which of the package's modules, and which libraries, the plugin imports ----------------------
def _module_file(name: str, root: Path) -> Path | None:
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(path: Path, name: str) -> Iterable[str]:
    """Every module `path` imports, at the top or inside a function (a lazy import runs too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            yield base
            yield from (f"{base}.{a.name}" for a in node.names)  # `from pkg import module`


def plugin_modules(root: Path = ROOT) -> tuple[set[str], set[str]]:
    """The package's modules the entry points import, directly or not (with the packages that
    hold them), and the top-level names of everything else they import."""
    seen: set[str] = set()
    others: set[str] = set()
    todo = list(ENTRY_POINTS.values())
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name, root)
        if path is None:
            continue  # `from module import function`: not a module
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # its packages' __init__
        for imported in _imports(path, name):
            if imported.split(".")[0] == PACKAGE:
                todo.append(imported)
            elif imported:
                others.add(imported.split(".")[0])
    return seen, others - set(sys.stdlib_module_names) - {"__future__"}


# -- the lock ---------------------------------------------------------------------------------------
def lock_entries(path: Path) -> dict[str, tuple[str, set[str]]]:
    """name -> (its entry as written, pin and hashes; the names it is there for) of a pip-compile output."""
    entries: dict[str, tuple[str, set[str]]] = {}
    name = None
    for block in re.split(r"\n(?=[A-Za-z0-9])", path.read_text()):
        head = re.match(r"([A-Za-z0-9_.-]+)==", block)
        if head is None:
            continue
        name = _canonical(head[1])
        via = set()
        for line in block.splitlines():
            found = re.match(r"\s+#\s+(?:via\s+)?([A-Za-z0-9_.-]+)(?: \(setup\.cfg\))?\s*$", line)
            if found and found[1] != "via":
                via.add(_canonical(found[1]))
        entry = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("#")).rstrip(" \\\n")
        entries[name] = (entry, via)
    return entries


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def plugin_requirements(entries: dict[str, tuple[str, set[str]]]) -> list[str]:
    """The lock's names the plugin needs: PLUGIN_REQUIRES and what they need, but LEFT_OUT and
    what only those need."""
    needed = {_canonical(n) for n in PLUGIN_REQUIRES}
    missing = needed - set(entries)
    if missing:
        raise SystemExit(f"requirements.txt has no pin for {sorted(missing)}: run make lock")
    left_out = {_canonical(n) for n in LEFT_OUT}
    grown = True
    while grown:
        grown = False
        for name, (_, via) in entries.items():
            if name not in needed and name not in left_out and via & needed:
                needed.add(name)
                grown = True
    return sorted(needed)


# -- building ---------------------------------------------------------------------------------------
def _pip_install(target: Path, requirements: Path, python: str) -> None:
    platforms = [f"--platform={p}" for p in PLATFORMS]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
        + ["--no-deps", "--require-hashes", "--only-binary=:all:", f"--python-version={python}", *platforms]
        + ["--target", str(target), "-r", str(requirements)],
        check=True,
    )


def _native(lib: Path) -> dict[str, list[str]]:
    """name -> the extension modules (paths in lib) of each installed distribution that has any."""
    out: dict[str, list[str]] = {}
    for record in lib.glob("*.dist-info/RECORD"):
        name = _canonical(record.parent.name.removesuffix(".dist-info").rsplit("-", 1)[0])
        so = [line.split(",")[0] for line in record.read_text().splitlines() if line.split(",")[0].endswith(".so")]
        if so:
            out[name] = so
    return out


LAUNCHER = '''#!/usr/bin/env python3
"""{name}: {module}.main with the plugin's modules from lib/ beside this file."""
import os
import sys

PYTHONS = {pythons!r}
if "%d.%d" % sys.version_info[:2] not in PYTHONS:
    sys.exit("{name}: needs Python %s as python3 (this is %d.%d)" % (" or ".join(PYTHONS), *sys.version_info[:2]))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
from {module} import main  # noqa: E402

sys.exit(main())
'''


def build_tree(tree: Path, pythons: list[str]) -> None:
    """The archive's content, in `tree`."""
    entries = lock_entries(ROOT / "requirements.txt")
    names = plugin_requirements(entries)
    lib = tree / "lib"
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text("".join(entries[n][0] + "\n" for n in names))
        first, *others = pythons
        _pip_install(lib, requirements, first)
        native = _native(lib)
        for python in others:  # the same pins' extension modules built for each other Python
            subdir = Path(tmp) / python
            requirements.write_text("".join(entries[n][0] + "\n" for n in sorted(native)))
            _pip_install(subdir, requirements, python)
            for so in subdir.rglob("*.so"):
                dest = lib / so.relative_to(subdir)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(so, dest)
    for pruned in PRUNED:
        shutil.rmtree(lib / pruned, ignore_errors=True)
    modules, _ = plugin_modules()
    for module in sorted(modules):
        path = _module_file(module, ROOT)
        assert path is not None
        dest = lib / path.relative_to(ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    for name, module in ENTRY_POINTS.items():
        (tree / name).write_text(LAUNCHER.format(name=name, module=module, pythons=tuple(pythons)))
        (tree / name).chmod(0o755)
    shutil.copy2(ROOT / "LICENSE", tree / "LICENSE")


def write_archive(tree: Path, path: Path) -> None:
    """A tar.gz of `tree` whose bytes depend on its content only."""

    def normal(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "", ""
        info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
        return info

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in sorted(tree.rglob("*")):
            tar.add(entry, entry.relative_to(tree).as_posix(), recursive=False, filter=normal)
    with open(path, "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def render_manifest(release: str, digest: str, release_url: str = RELEASE_URL, template: Path = TEMPLATE) -> str:
    """krew/daemonjob.yaml with its placeholders filled: the version, the archive's address and sha256."""
    text = template.read_text()
    for key, value in (("RELEASE_URL", release_url.rstrip("/")), ("VERSION", release), ("SHA256", digest)):
        text = text.replace("{{" + key + "}}", value)
    left = re.findall(r"\{\{[A-Z0-9_]+\}\}", text)
    if left:
        raise SystemExit(f"{template}: placeholders left unfilled: {left}")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where the archive and manifest go")
    parser.add_argument("--python", action="append", help=f"a Python the archive runs on (default {PYTHONS})")
    parser.add_argument("--release-url", default=RELEASE_URL, help="where the release's files are downloaded from")
    args = parser.parse_args(argv)
    release = version()
    pythons = args.python or list(PYTHONS)
    args.out.mkdir(parents=True, exist_ok=True)
    archive = args.out / archive_name(release)
    with tempfile.TemporaryDirectory() as tmp:
        build_tree(Path(tmp), pythons)
        write_archive(Path(tmp), archive)
    digest = sha256(archive)
    (args.out / TEMPLATE.name).write_text(render_manifest(release, digest, args.release_url))
    print(f"{archive} {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
