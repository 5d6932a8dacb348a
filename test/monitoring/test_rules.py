"""The shipped alerts, checked and unit-tested with promtool (provisioned if missing, never skipped)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from daemonjob.testing.prometheus import promtool, provision_prometheus, rule_groups, write_rules

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RULES = ROOT / "manifests" / "monitoring" / "prometheusrule.yaml"
UNIT_TESTS = HERE / "rules.test.yml"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
PER_DAEMONJOB_GROUP = "daemonjob.rollouts"
# The runbooks on the docs site (mkdocs.yml's site_url; the chart's monitoring.runbookBaseURL default).
RUNBOOK_BASE = "https://daemonjob.github.io/daemonjob/runbooks/"


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    return provision_prometheus()


def alerts() -> list[tuple[str, dict[str, Any]]]:
    return [(g["name"], r) for g in rule_groups(RULES)["groups"] for r in g["rules"] if "alert" in r]


def run(bin_dir: Path, *args: str, cwd: Path) -> None:
    out = promtool(*args, bin_dir=bin_dir, cwd=cwd)
    assert out.returncode == 0, f"promtool {' '.join(args)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"


def test_the_shipped_rule_file_is_the_packaged_one() -> None:
    from daemonjob.testing.prometheus import RULE_PATH

    assert RULE_PATH.resolve() == RULES.resolve()


def test_promtool_check_rules(bin_dir: Path, tmp_path: Path) -> None:
    run(bin_dir, "check", "rules", str(write_rules(tmp_path / "rules.yml")), cwd=tmp_path)


def test_promtool_test_rules(bin_dir: Path, tmp_path: Path) -> None:
    write_rules(tmp_path / "rules.yml")
    shutil.copy(UNIT_TESTS, tmp_path / "rules.test.yml")
    run(bin_dir, "test", "rules", "rules.test.yml", cwd=tmp_path)


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    cases = [c for t in yaml.safe_load(UNIT_TESTS.read_text())["tests"] for c in t.get("alert_rule_test", ())]
    for _, rule in alerts():
        name = rule["alert"]
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c.get("exp_alerts") for c in mine), f"{name}: no unit test where it fires"
        # exp_alerts lists exactly what fires, so the healthy series beside it are shown quiet;
        # an alert with `for:` also has a case just before it has held long enough.
        quiet = [c for c in mine if not c.get("exp_alerts")]
        if rule.get("for"):
            assert quiet, f"{name}: no unit test before its `for:` has passed"


def test_the_runbook_base_is_the_docs_site_and_the_charts_default() -> None:
    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["site_url"]
    values = yaml.safe_load((ROOT / "charts" / "daemonjob" / "values.yaml").read_text())
    assert RUNBOOK_BASE == f"{site}runbooks/" == values["monitoring"]["runbookBaseURL"]


def test_alerts_follow_the_conventions() -> None:
    runbooks = RUNBOOKS.read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^## (.+)$", runbooks, flags=re.M)
    }
    names = [r["alert"] for _, r in alerts()]
    assert len(names) == len(set(names))
    for group, rule in alerts():
        name = rule["alert"]
        assert name.startswith("DaemonJob"), name
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        ann = rule["annotations"]
        assert ann["summary"].endswith(".") and ann["description"], name
        if group == PER_DAEMONJOB_GROUP:
            assert "{{ $labels.namespace }}/{{ $labels.name }}" in ann["description"], name
        url = ann["runbook_url"]
        assert url == f"{RUNBOOK_BASE}#{name.lower()}", name
        assert name.lower() in anchors, f"docs/runbooks.md has no section '## {name}'"
        section = runbooks.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert "kubectl" in section, f"the runbook of {name} names no command to run"
