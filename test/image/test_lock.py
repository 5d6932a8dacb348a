"""The lock files agree with what the package declares, and the Dockerfile uses the image's.

requirements.txt pins the runtime dependencies (setup.cfg's install_requires and theirs),
requirements-build.txt the build backend (pyproject.toml's build-system requires); both
come from `make lock` (pip-compile --generate-hashes) and the Dockerfile installs them with
`pip install --require-hashes`.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
# The image's interpreter: the lock is resolved for it.
IMAGE_PYTHON = {
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def pins(path: Path) -> dict[str, tuple[Version, list[str]]]:
    """name -> (version, hashes) of a pip-compile output; fails on anything but `==` pins."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())  # join continued lines
    out: dict[str, tuple[Version, list[str]]] = {}
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        spec, *options = line.split(" --hash=")
        req = Requirement(spec.strip())
        (pin,) = req.specifier
        assert pin.operator == "==", f"{path.name}: {line!r} is not an exact pin"
        out[canonicalize_name(req.name)] = (Version(pin.version), options)
    return out


def install_requires() -> list[Requirement]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return [Requirement(line) for line in cfg["options"]["install_requires"].strip().splitlines()]


def lint_requires() -> list[Requirement]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extra = cfg["options.extras_require"]["lint"]
    return [*install_requires(), *(Requirement(line) for line in extra.strip().splitlines())]


def build_requires() -> list[Requirement]:
    return [Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]]


@pytest.mark.parametrize(
    ("lock", "declared"),
    [
        ("requirements.txt", install_requires),
        ("requirements-build.txt", build_requires),
        ("requirements-lint.txt", lint_requires),
    ],
)
def test_every_declared_requirement_is_satisfied_by_a_pin(lock: str, declared: object) -> None:
    locked = pins(ROOT / lock)
    missing, unsatisfied = [], []
    for req in declared():
        if req.marker is not None and not req.marker.evaluate(IMAGE_PYTHON):
            continue
        name = canonicalize_name(req.name)
        if name not in locked:
            missing.append(str(req))
        elif not req.specifier.contains(locked[name][0], prereleases=True):
            unsatisfied.append(f"{req} (locked: {locked[name][0]})")
    assert not missing and not unsatisfied, f"run `make lock`: missing {missing}, not satisfied {unsatisfied}"


def test_the_lint_lock_pins_the_runtime_libraries_as_the_image_does() -> None:
    """mypy checks the code against the libraries the image runs, not newer ones."""
    image, lint = pins(ROOT / "requirements.txt"), pins(ROOT / "requirements-lint.txt")
    differ = {name: (v, lint[name][0]) for name, (v, _) in image.items() if name in lint and lint[name][0] != v}
    assert not differ, f"run `make lock`: image and lint locks differ on {differ}"


@pytest.mark.parametrize("lock", ["requirements.txt", "requirements-build.txt", "requirements-lint.txt"])
def test_every_pin_carries_hashes(lock: str) -> None:
    locked = pins(ROOT / lock)
    assert locked
    bare = [
        name
        for name, (_, hashes) in locked.items()
        if not hashes or not all(re.fullmatch(r"sha256:[0-9a-f]{64}", h.strip()) for h in hashes)
    ]
    assert not bare, f"{lock}: pins without sha256 hashes: {bare}"


def test_the_dockerfile_installs_the_locks_with_hashes_on_a_base_pinned_by_digest() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE=python:[\w.-]+@sha256:[0-9a-f]{64}$", dockerfile, re.M), "BASE is not pinned by digest"
    installs = [i.rstrip(" \\") for i in re.findall(r"pip install ([^\n&]*)", dockerfile)]
    assert any("--require-hashes" in i and "-r requirements.txt" in i for i in installs), installs
    assert any("--require-hashes" in i and "-r requirements-build.txt" in i for i in installs), installs
    # Everything else pip installs is the project's own wheel, built from the checkout.
    others = [i for i in installs if "--require-hashes" not in i]
    assert others == ["--no-deps /tmp/wheels/daemonjob-*.whl"], others
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert not {"requirements.txt", "requirements-build.txt", "requirements*.txt"} & set(ignored)
