"""Template revisions are stable content hashes; Job names are valid and distinct."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from daemonjob.domain.spec.revision import (
    REVISION_LENGTH,
    current_revision,
    job_name,
    salted_revision,
    template_revision,
)

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

TEMPLATE = {
    "metadata": {"labels": {"app": "audit"}, "annotations": {"run": "1"}},
    "spec": {
        "backoffLimit": 2,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
    },
}


def test_revision_is_ten_lowercase_hex_chars() -> None:
    assert re.fullmatch(r"[0-9a-f]{10}", template_revision(TEMPLATE))


def test_revision_ignores_key_order() -> None:
    reordered = {"spec": dict(reversed(list(TEMPLATE["spec"].items()))), "metadata": TEMPLATE["metadata"]}
    assert template_revision(reordered) == template_revision(TEMPLATE)


def test_revision_is_a_fixed_function_of_content() -> None:
    # Pinned: a change here would re-run every DaemonJob in every cluster on upgrade.
    assert template_revision({}) == "44136fa355"
    assert template_revision(None) == template_revision({})


def test_any_change_changes_the_revision() -> None:
    changed = {**TEMPLATE, "metadata": {**TEMPLATE["metadata"], "annotations": {"run": "2"}}}
    assert template_revision(changed) != template_revision(TEMPLATE)
    assert template_revision({"a": 1}) != template_revision({"a": "1"})
    assert template_revision({"a": None}) != template_revision({})


def test_job_name_is_readable_for_short_names() -> None:
    name = job_name("node-audit", "worker-1", "abc")
    assert name.startswith("node-audit-worker-1-")
    assert DNS1123_LABEL.match(name)


def test_job_name_is_deterministic_and_covers_all_inputs() -> None:
    assert job_name("a", "n", "r1") == job_name("a", "n", "r1")
    assert job_name("a", "n", "r1") != job_name("a", "n", "r2")
    assert job_name("a", "n1", "r") != job_name("a", "n2", "r")
    assert job_name("a-b", "c", "r") != job_name("a", "b-c", "r")


def test_long_names_are_shortened_but_keep_both_parts() -> None:
    dj = "a-very-long-daemonjob-name-that-goes-on-and-on-and-on"
    node = "ip-10-0-123-45.eu-west-1.compute.internal.example.com.with.more.labels"
    name = job_name(dj, node, "0123456789")
    assert len(name) <= 63
    assert DNS1123_LABEL.match(name)
    assert name.startswith("a-very-long-daem")
    assert "ip-10-0" in name
    assert job_name(dj, node + "x", "0123456789") != name


name_text = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=253)


@settings(max_examples=200, deadline=None)
@given(name_text, name_text, st.text(alphabet="0123456789abcdef", min_size=10, max_size=10))
def test_job_name_is_always_a_dns1123_label(dj: str, node: str, revision: str) -> None:
    name = job_name(dj, node, revision)
    assert len(name) <= 63
    assert DNS1123_LABEL.match(name), name


@settings(max_examples=200, deadline=None)
@given(st.lists(name_text, min_size=2, max_size=2, unique=True), name_text)
def test_distinct_nodes_get_distinct_names(nodes: list[str], dj: str) -> None:
    assert job_name(dj, nodes[0], "r") != job_name(dj, nodes[1], "r")


def test_job_name_without_run_is_unchanged() -> None:
    # Pinned: Jobs created before runs existed keep their names (no duplicate on upgrade).
    assert job_name("audit", "node-1", "5f9c2a0b1d") == job_name("audit", "node-1", "5f9c2a0b1d", None)
    assert job_name("audit", "node-1", "5f9c2a0b1d") == "audit-node-1-" + _legacy_suffix(
        "audit", "node-1", "5f9c2a0b1d"
    )


def _legacy_suffix(*parts: str) -> str:
    import hashlib

    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:10]


def test_job_name_with_run_is_deterministic_distinct_and_short() -> None:
    runs = ["20261123t030000z", "20261124t030000z", "now-1-0123456789"]
    names = {job_name("audit", "node-1", "5f9c2a0b1d", run) for run in runs}
    assert len(names) == 3
    assert job_name("audit", "node-1", "5f9c2a0b1d") not in names
    assert job_name("audit", "node-1", "5f9c2a0b1d", runs[0]) == job_name("audit", "node-1", "5f9c2a0b1d", runs[0])


@settings(max_examples=200, deadline=None)
@given(
    dj=st.text(min_size=1, max_size=253),
    node=st.text(min_size=1, max_size=253),
    run=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=63),
)
def test_job_name_with_run_is_a_dns_label(dj: str, node: str, run: str) -> None:
    name = job_name(dj, node, "5f9c2a0b1d", run)
    assert len(name) <= 63 and DNS1123_LABEL.match(name)


def test_current_revision_starts_as_the_template_hash_and_is_kept_while_the_hash_is() -> None:
    assert current_revision("aaaa", 7, {}) == "aaaa"  # new, or re-created without its status
    kept = {"currentRevision": "r1", "templateHash": "aaaa"}
    assert current_revision("aaaa", 9, kept) == "r1"  # only a change outside the template
    assert current_revision("aaaa", 9, {"currentRevision": "aaaa"}) == "aaaa"  # status of an older controller


def test_every_template_change_is_a_new_revision_a_revert_included() -> None:
    first = current_revision("aaaa", 1, {})
    second = current_revision("bbbb", 2, {"currentRevision": first, "templateHash": "aaaa"})
    back = current_revision("aaaa", 3, {"currentRevision": second, "templateHash": "bbbb"})
    assert len({first, second, back}) == 3
    assert back == salted_revision("aaaa", 3) and len(back) == REVISION_LENGTH
    assert current_revision("bbbb", 2, {"currentRevision": "aaaa"}) == salted_revision("bbbb", 2)
