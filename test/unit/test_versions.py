"""One version for the whole release: the package's, the chart's, the image's tag and the krew
manifest's all come to daemonjob/__init__.py's __version__ (make dist refuses otherwise)."""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml

import daemonjob

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_takes_its_version_from_the_one_place() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert cfg["metadata"]["version"] == "attr: daemonjob.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+", daemonjob.__version__)


def test_the_chart_and_its_app_carry_it() -> None:
    chart = yaml.safe_load((ROOT / "charts" / "daemonjob" / "Chart.yaml").read_text())
    assert (str(chart["version"]), str(chart["appVersion"])) == (daemonjob.__version__, daemonjob.__version__)


def test_the_image_tag_of_the_manifests_is_it() -> None:
    kustomization = yaml.safe_load((ROOT / "manifests" / "kustomization.yaml").read_text())
    tags = {i["name"]: str(i["newTag"]) for i in kustomization["images"]}
    assert tags == {"daemonjob-controller": daemonjob.__version__}


def test_the_krew_manifest_takes_it_from_make_dist_and_names_no_version_of_its_own() -> None:
    text = (ROOT / "krew" / "daemonjob.yaml").read_text()
    manifest = yaml.safe_load(text)
    assert manifest["spec"]["version"] == "v{{VERSION}}"
    assert not re.search(r"\d+\.\d+\.\d+", text), "a version written in the template would not follow the release"


def test_make_dist_reads_the_same_places() -> None:
    script = (ROOT / "hack" / "dist.sh").read_text()
    for place in ("daemonjob/__init__.py", "charts/daemonjob/Chart.yaml", "manifests/kustomization.yaml"):
        assert place in script


def test_make_dist_refuses_to_build_a_release_of_two_versions(tmp_path: Path) -> None:
    for part in (
        "hack/dist.sh",
        "daemonjob/__init__.py",
        "charts/daemonjob/Chart.yaml",
        "manifests/kustomization.yaml",
    ):
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / part, tmp_path / part)
    chart = tmp_path / "charts" / "daemonjob" / "Chart.yaml"
    chart.write_text(chart.read_text().replace(f'appVersion: "{daemonjob.__version__}"', 'appVersion: "9.9.9"'))
    out = subprocess.run(
        ["bash", str(tmp_path / "hack" / "dist.sh")],
        env={**os.environ, "DIST": str(tmp_path / "dist")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert f"Chart.yaml appVersion is 9.9.9, __version__ is {daemonjob.__version__}" in out.stderr
    assert not (tmp_path / "dist").exists()  # nothing built, nothing emptied
