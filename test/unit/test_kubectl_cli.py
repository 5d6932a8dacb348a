"""The plugin's command line as a user meets it: exit statuses, help, version, kubectl's global
flags and the scope of `rerun`, through the installed entry points run as processes, against a
loopback stand-in for the API server that answers a few paths and records every request."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from daemonjob import __version__, cli
from daemonjob.domain.shared.apinames import ANNOTATION_NODE, LABEL_NAME, LABEL_REVISION
from daemonjob.kubectl.cli import parse
from daemonjob.kubectl.cluster import connection
from daemonjob.kubectl.cluster.client import EXIT_ERROR, EXIT_FAILED, EXIT_OK, EXIT_USAGE, PluginError, Target
from daemonjob.kubectl.cluster.connection import Connection
from daemonjob.kubectl.commands import rerun
from daemonjob.kubectl.commands.version import image_tag
from daemonjob.testing.doubles.builders import daemonjob

BIN = Path(sys.executable).parent
DJ = "/apis/daemonjob.io/v1alpha1/namespaces/ns/daemonjobs"
NOT_FOUND = {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}


@dataclass
class Seen:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: Any = None


@dataclass
class FakeApi:
    """Answers GETs from `answers` (by path, query left out) and PATCHes with {}; 404 otherwise."""

    answers: dict[str, Any] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    def writes(self) -> list[Seen]:
        return [s for s in self.seen if s.method != "GET"]


@pytest.fixture
def api() -> Iterator[FakeApi]:
    fake = FakeApi()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            path = urlsplit(self.path).path
            fake.seen.append(Seen(self.command, path, list(self.headers.items()), body))
            found = fake.answers.get(path) if self.command == "GET" else {}
            data = json.dumps(found if found is not None else NOT_FOUND).encode()
            self.send_response(200 if found is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PATCH = do_POST = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def plugin(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`kubectl daemonjob ARGS` as kubectl runs it: the installed executable, stdin not a terminal."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(home or "/nonexistent")  # no ~/.kube/config of the machine's
    return subprocess.run(
        [str(BIN / "kubectl-daemonjob"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def failed_daemonjob() -> dict[str, Any]:
    cond = {"type": "Failed", "status": "True", "reason": "NodesFailed", "message": "1 of 1 nodes failed: n1"}
    return daemonjob(
        "dj",
        "ns",
        status={"observedGeneration": 1, "currentRevision": "abc", "failedNodes": 1, "conditions": [cond]},
    )


def failed_job() -> dict[str, Any]:
    return {
        "metadata": {
            "name": "dj-n1-abc",
            "uid": "u1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {LABEL_NAME: "dj", LABEL_REVISION: "abc"},
            "annotations": {ANNOTATION_NODE: "n1"},
        },
        "status": {
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}],
        },
    }


def serve_failed(api: FakeApi) -> None:
    api.answers[f"{DJ}/dj"] = failed_daemonjob()
    api.answers["/apis/batch/v1/namespaces/ns/jobs"] = {"items": [failed_job()]}
    api.answers["/api/v1/namespaces/ns/pods"] = {"items": []}
    node = {"metadata": {"name": "n1", "labels": {}}, "spec": {}, "status": {"conditions": [{"type": "Ready"}]}}
    node["status"]["conditions"][0]["status"] = "True"
    api.answers["/api/v1/nodes"] = {"items": [node]}


# -- 1. exit statuses apart, the same for every command ------------------------------------------
def test_each_exit_status_is_its_own_and_the_same_for_every_command(api: FakeApi) -> None:
    serve_failed(api)
    at = ("--server", api.url, "-n", "ns")
    # 0: done
    assert plugin("version", "--client").returncode == EXIT_OK
    # 2: the command line, whichever command; nothing is sent
    for usage in (
        ("bogus",),
        ("status",),  # NAME missing
        ("status", "dj", "--no-such-flag"),
        ("wait", "dj", "--timeout", "5q"),
        ("logs", "dj", "--since", "soon"),
        ("run-now", "dj", "--timeout", "1m"),  # without --wait
        ("create", "x", "--dry-run=client"),  # --image missing
        ("create", "x", "--image", "i", "--max-parallel", "lots", "--dry-run=client"),
        ("rerun", "dj", "--failed", "--node", "n1"),
        ("rerun", "dj"),  # no scope, no terminal to ask on
        ("plan",),  # neither NAME nor -f
        ("status", "dj", "--as-group", "admins"),  # a group without a user
    ):
        out = plugin(*usage, *at)
        assert out.returncode == EXIT_USAGE, (usage, out.stderr)
        assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("error: "), out.stderr
    assert api.writes() == []
    # 3: the DaemonJob has failed nodes, or its rollout failed
    failed = plugin("status", "dj", *at)
    assert failed.returncode == EXIT_FAILED, failed.stderr
    assert "n1" in failed.stdout and "failed" in failed.stdout
    waited = plugin("wait", "dj", *at)
    assert waited.returncode == EXIT_FAILED, waited.stderr
    assert "1 of 1 nodes failed: n1" in waited.stderr
    # 1: an error: no such DaemonJob, no cluster
    missing = plugin("status", "nope", *at)
    assert missing.returncode == EXIT_ERROR and "NotFound" in missing.stderr, missing.stderr
    gone = plugin("wait", "dj", "--server", "http://127.0.0.1:1")
    assert gone.returncode == EXIT_ERROR and "cannot reach the API server" in gone.stderr, gone.stderr


def test_help_lists_the_exit_statuses_for_the_plugin_and_every_command() -> None:
    parser = cli_parser()
    texts = [parser.format_help()] + [p.format_help() for p in subcommands(parser)]
    assert len(texts) > 15
    for text in texts:
        assert "exit status, the same for every command:" in text
        assert "  2  a usage error" in text and "  3  the DaemonJob has failed nodes" in text


def cli_parser() -> Any:
    from daemonjob.kubectl.cli import build_parser

    return build_parser()


def subcommands(parser: Any) -> list[Any]:
    import argparse

    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for p in action.choices.values():
                found += subcommands(p) or [p]
    return found


# -- 2. discoverable: bare command, version -------------------------------------------------------
def test_bare_plugin_prints_its_help_and_exits_0() -> None:
    out = plugin()
    assert out.returncode == EXIT_OK, out.stderr
    assert out.stdout.startswith("usage: kubectl daemonjob") and "status" in out.stdout and "version" in out.stdout
    assert out.stderr == ""


def test_version_names_the_plugin_the_controller_and_the_crd(api: FakeApi) -> None:
    api.answers["/apis/apps/v1/deployments"] = {
        "items": [
            {
                "metadata": {"namespace": "daemonjob-system", "name": "daemonjob-controller", "labels": {}},
                "spec": {"template": {"spec": {"containers": [{"image": "registry.local:5000/dj/controller:0.3.1"}]}}},
            },
            {
                "metadata": {
                    "namespace": "team",
                    "name": "dj",
                    "labels": {"app.kubernetes.io/version": "0.2.0"},
                },
                "spec": {"template": {"spec": {"containers": [{"image": "controller@sha256:abc"}]}}},
            },
        ]
    }
    api.answers["/apis/apiextensions.k8s.io/v1/customresourcedefinitions/daemonjobs.daemonjob.io"] = {
        "metadata": {"name": "daemonjobs.daemonjob.io", "labels": {"app.kubernetes.io/version": "0.3.1"}},
        "spec": {"versions": [{"name": "v1alpha1", "served": True, "storage": True}]},
    }
    for args in (("version",), ("--version",)):
        out = plugin(*args, "--server", api.url)
        assert out.returncode == EXIT_OK, out.stderr
        assert out.stdout.splitlines() == [
            f"Plugin Version: {__version__}",
            "Controller Version: 0.3.1 (deployment daemonjob-system/daemonjob-controller, "
            "image registry.local:5000/dj/controller:0.3.1)",
            "Controller Version: 0.2.0 (deployment team/dj, image controller@sha256:abc)",  # pinned by digest
            "CRD Version: v1alpha1 (served, storage) (daemonjobs.daemonjob.io, app.kubernetes.io/version=0.3.1)",
        ]
    asked = [s for s in api.seen if s.path == "/apis/apps/v1/deployments"]
    assert asked  # found by label, in every namespace
    doc = json.loads(plugin("version", "-o", "json", "--server", api.url).stdout)
    assert doc["pluginVersion"] == __version__ and doc["crd"]["versions"][0]["storage"] is True
    assert [c["version"] for c in doc["controllers"]] == ["0.3.1", "0.2.0"]


def test_version_without_a_cluster_or_a_crd_still_names_the_plugin_and_exits_0(api: FakeApi) -> None:
    for args in (("version", "--server", "http://127.0.0.1:1"), ("--version",), ("version", "--client")):
        out = plugin(*args)
        assert out.returncode == EXIT_OK, (args, out.stderr)
        assert out.stdout == f"Plugin Version: {__version__}\n", args
    assert "cannot reach the API server at http://127.0.0.1:1" in plugin("version", "-s", "http://127.0.0.1:1").stderr
    # A cluster without the CRD, and no controller found: said, still 0.
    api.answers["/apis/apps/v1/deployments"] = {"items": []}
    out = plugin("version", "--server", api.url)
    assert out.returncode == EXIT_OK
    assert "Controller Version: none found" in out.stdout and "the CRD's version unknown" in out.stderr


@pytest.mark.parametrize(
    ("image", "tag"),
    [
        ("ghcr.io/x/daemonjob-controller:0.3.1", "0.3.1"),
        ("registry.local:5000/controller", None),
        ("registry.local:5000/controller:1.2@sha256:abc", "1.2"),
        ("controller@sha256:abc", None),
    ],
)
def test_image_tag(image: str, tag: str | None) -> None:
    assert image_tag(image) == tag


# -- 3. kubectl's global flags, read through the client's own kubeconfig loading -----------------
def write_kubeconfig(tmp: Path) -> Path:
    (tmp / "certs").mkdir()
    (tmp / "certs" / "ca.crt").write_text("CA")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "dev",
        "contexts": [
            {"name": "dev", "context": {"cluster": "dev", "user": "dev-user", "namespace": "dev-ns"}},
            {"name": "prod", "context": {"cluster": "prod", "user": "prod-user"}},
        ],
        "clusters": [
            {"name": "dev", "cluster": {"server": "https://dev.example:6443", "certificate-authority": "certs/ca.crt"}},
            {"name": "prod", "cluster": {"server": "https://prod.example:6443", "certificate-authority-data": "Q0E="}},
        ],
        "users": [
            {"name": "dev-user", "user": {"token": "dev-token"}},
            {"name": "prod-user", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "no"}}},
        ],
    }
    path = tmp / "config"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_context_in_use_with_cluster_user_server_and_certificates_overridden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_kubeconfig(tmp_path)
    before = path.read_text()
    plain = connection.configuration(Connection(kubeconfig=str(path)))
    assert plain.host == "https://dev.example:6443"
    assert plain.ssl_ca_cert == str(tmp_path / "certs" / "ca.crt")  # relative to the kubeconfig's own file
    assert plain.api_key["BearerToken"] == "Bearer dev-token"
    # --cluster and --user pick other entries; --token replaces the exec plugin it would run.
    other = connection.configuration(
        Connection(kubeconfig=str(path), cluster="prod", user="prod-user", token="t0ken", server="https://lb:443")
    )
    assert other.host == "https://lb:443" and other.api_key["BearerToken"] == "Bearer t0ken"
    assert Path(other.ssl_ca_cert).read_text() == "CA"  # prod's CA data
    # --context, then certificates from files named relative to where kubectl runs.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-ca.crt").write_text("MINE")
    (tmp_path / "me.crt").write_text("CERT")
    (tmp_path / "me.key").write_text("KEY")
    mine = connection.configuration(
        Connection(
            kubeconfig=str(path),
            context="prod",
            user="dev-user",
            certificate_authority="my-ca.crt",
            client_certificate="me.crt",
            client_key="me.key",
        )
    )
    assert mine.host == "https://prod.example:6443" and mine.api_key["BearerToken"] == "Bearer dev-token"
    assert (mine.ssl_ca_cert, mine.cert_file, mine.key_file) == tuple(
        str(tmp_path / f) for f in ("my-ca.crt", "me.crt", "me.key")
    )
    insecure = connection.configuration(Connection(kubeconfig=str(path), insecure_skip_tls_verify=True))
    assert insecure.verify_ssl is False and insecure.ssl_ca_cert is None
    assert path.read_text() == before  # the flags are never written to the kubeconfig


def test_server_and_token_alone_need_no_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    cfg = connection.configuration(Connection(server="https://10.0.0.1:6443", token="abc"))
    assert cfg.host == "https://10.0.0.1:6443" and cfg.api_key["BearerToken"] == "Bearer abc"
    with pytest.raises(Exception, match="no kubeconfig found"):
        connection.configuration(Connection())


def test_the_global_flags_reach_the_api_server_from_before_or_after_the_command(api: FakeApi) -> None:
    api.answers[f"{DJ}/dj"] = daemonjob("dj", "ns", status={"observedGeneration": 1, "conditions": []})
    api.answers[f"{DJ}/dj"]["status"]["conditions"] = [{"type": "Complete", "status": "True", "message": "done"}]
    out = plugin(
        "--as", "jane", "wait", "dj", "-n", "ns", "--server", api.url,
        "--as-group", "ops", "--as-group", "audit", "--token", "s3cret", "--request-timeout", "20s",
    )  # fmt: skip
    assert out.returncode == EXIT_OK, out.stderr
    headers = api.seen[-1].headers
    assert ("Impersonate-User", "jane") in headers
    assert [v for k, v in headers if k == "Impersonate-Group"] == ["ops", "audit"]  # one header per group
    assert ("Authorization", "Bearer s3cret") in headers
    assert parse(["status", "x", "--request-timeout", "1m"]).request_timeout == 60.0
    assert plugin("status", "x", "--request-timeout", "soon").returncode == EXIT_USAGE


# -- 5. no fleet-wide rerun by default ---------------------------------------------------------
def test_rerun_without_a_scope_refuses_off_a_terminal_unless_all(api: FakeApi) -> None:
    api.answers[f"{DJ}/dj"] = daemonjob("dj", "ns")
    for refused in (("rerun", "dj"), ("rerun", "dj", "--yes")):
        out = plugin(*refused, "-n", "ns", "--server", api.url)
        assert out.returncode == EXIT_USAGE, out.stderr
        assert "--all for every eligible node" in out.stderr
    assert api.writes() == []
    out = plugin("rerun", "dj", "--all", "-n", "ns", "--server", api.url)
    assert out.returncode == EXIT_OK, out.stderr
    assert out.stdout == "daemonjob.daemonjob.io/dj restarted\n"
    [patch] = api.writes()
    assert patch.method == "PATCH" and patch.path == f"{DJ}/dj"


class AskedKube:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return daemonjob("dj", "ns")

    def patch(self, path: str, body: dict[str, Any], **params: Any) -> dict[str, Any]:
        self.patches.append(body)
        return {}


@pytest.mark.parametrize(("answer", "patched", "code"), [("y\n", 1, EXIT_OK), ("\n", 0, EXIT_ERROR)])
def test_rerun_without_a_scope_asks_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], answer: str, patched: int, code: int
) -> None:
    monkeypatch.setattr(rerun, "interactive", lambda: True)
    monkeypatch.setattr(sys, "stdin", io.StringIO(answer))
    kube = AskedKube()
    assert rerun.run(parse(["rerun", "dj"]), Target(kube, "ns")) == code  # type: ignore[arg-type]
    assert len(kube.patches) == patched
    assert 'Re-run daemonjob "dj" on every eligible node (a new revision)? [y/N]' in capsys.readouterr().err
    with pytest.raises(PluginError) as info:  # --yes answers the question, it does not give the scope
        rerun.run(parse(["rerun", "dj", "--yes"]), Target(kube, "ns"))  # type: ignore[arg-type]
    assert info.value.code == EXIT_USAGE


# -- 7. the controller's help -----------------------------------------------------------------------
def test_controller_help_lists_release_nodes_and_every_flags_default() -> None:
    out = subprocess.run([str(BIN / "daemonjob-controller"), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "release-nodes" in out.stdout and "daemonjob-controller release-nodes --help" in out.stdout
    parser = cli.parser()
    formatter = parser._get_formatter()
    missing = [
        a.option_strings[-1]
        for a in parser._actions
        if a.option_strings
        and a.dest not in ("help", "version")
        and "default" not in formatter._get_help_string(a) % {"default": a.default}
    ]
    assert missing == []
    flat = " ".join(out.stdout.split())
    for words in (
        "concurrent reconciles (default: 4)",
        "client-side API request burst (default: 100)",
        "(0: unlimited) (default: 50)",
        "before taking it (default: 15)",
        "sent (default: 10)",
        "attempts (default: 2)",
        "(default: 10%)",
        "(default: node-role.kubernetes.io/control-plane)",
    ):
        assert words in flat, words


def test_the_flags_page_lists_every_controller_flag() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "operations" / "flags.md").read_text()
    section = page[page.index("# Flags of `daemonjob-controller`") : page.index("## What each server reads")]
    flags = [o for a in cli.parser()._actions for o in a.option_strings if o not in ("-h", "--help", "--version")]
    assert [f for f in flags if f"`{f}`" not in section] == []


# -- 8. one output model: -o json|yaml|name|wide|jsonpath=|custom-columns=, --no-headers -----------
def run_plugin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, api: FakeApi, *args: str
) -> tuple[int, str, str]:
    """The plugin in this process (faster than a process per call), against the fake API server."""
    from daemonjob.kubectl.cli import main

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")
    capsys.readouterr()
    code = main([*args, "--server", api.url, "-n", "ns"])
    out, err = capsys.readouterr()
    return code, out, err


def serve_list(api: FakeApi) -> None:
    other = daemonjob("b-dj", "ns", maxParallel="25%", schedule="0 3 * * *")
    api.answers[DJ] = {"items": [other, failed_daemonjob()]}


def serve_results(api: FakeApi) -> None:
    api.answers[f"{DJ}/dj"] = failed_daemonjob()
    api.answers["/apis/daemonjob.io/v1alpha1/namespaces/ns/daemonjobreports"] = {
        "items": [
            {
                "chunk": 0,
                "results": [
                    {"node": "n1", "state": "failed", "exitCode": 3, "reason": "Error", "message": "no lock"},
                    {"node": "n2", "state": "succeeded", "exitCode": 0, "reason": "Completed", "message": "ok"},
                ],
            }
        ]
    }


def test_status_prints_each_output_format_and_keeps_its_exit_status(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    serve_failed(api)

    def status(*args: str) -> str:
        code, out, err = run_plugin(capsys, monkeypatch, api, "status", "dj", *args)
        assert code == EXIT_FAILED, err  # a shown node failed, whatever the format
        return out

    assert status("-o", "name") == "node/n1\n"  # the rows are nodes: kubectl's kind/name of each
    assert status("-o", "jsonpath={.nodes[*].node}") == "n1"
    assert status("-o", 'jsonpath={range .nodes[*]}{.node}{"\\t"}{.state}{"\\n"}{end}') == "n1\tfailed\n"
    assert status("-o", "custom-columns=NODE:.node,STATE:{.state},CODE:.exit_code").splitlines() == [
        "NODE   STATE    CODE",
        "n1     failed   <none>",
    ]
    assert status("-o", "custom-columns=NODE:.node", "--no-headers") == "n1\n"
    rows = status("--no-headers").splitlines()  # the rows alone: no rollout words, no column names
    assert len(rows) == 1 and rows[0].startswith("n1 ") and "failed" in rows[0]
    assert "POD" in status("-o", "wide") and "ELIGIBILITY" in status("-o", "wide")
    assert json.loads(status("-o", "json"))["nodes"][0]["node"] == "n1"
    assert yaml.safe_load(status("-o", "yaml"))["nodes"][0]["state"] == "failed"


def test_list_prints_each_output_format(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    serve_list(api)

    def listing(*args: str) -> str:
        code, out, err = run_plugin(capsys, monkeypatch, api, "list", *args)
        assert code == EXIT_OK, err
        return out

    assert listing("-o", "name") == "daemonjob.daemonjob.io/b-dj\ndaemonjob.daemonjob.io/dj\n"
    assert listing("-o", "jsonpath={.items[*].metadata.name}") == "b-dj dj"
    assert listing("-o", "custom-columns=NAME:.metadata.name,SCHEDULE:.spec.schedule").splitlines() == [
        "NAME   SCHEDULE",
        "b-dj   0 3 * * *",
        "dj     <none>",
    ]
    table = listing().splitlines()
    assert table[0].split()[:2] == ["NAME", "REVISION"] and len(table) == 3
    assert [r.split()[0] for r in listing("--no-headers").splitlines()] == ["b-dj", "dj"]
    wide = listing("-o", "wide").splitlines()
    assert wide[0].endswith("RUN   SCHEDULE    SUSPENDED   MAX PARALLEL") and wide[1].split()[-2:] == ["false", "25%"]
    assert json.loads(listing("-o", "json"))["kind"] == "List"


def test_results_prints_each_output_format(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    serve_results(api)

    def results(*args: str) -> str:
        code, out, err = run_plugin(capsys, monkeypatch, api, "results", "dj", *args)
        assert code == EXIT_FAILED, err
        return out

    assert results("-o", "name") == "node/n1\nnode/n2\n"
    assert results("--failed", "-o", "name") == "node/n1\n"
    assert results("-o", 'jsonpath={.results[?(@.state=="failed")].node}') == "n1"
    assert results("-o", "custom-columns=NODE:.node,CODE:.exitCode", "--no-headers").splitlines() == [
        "n1   3",
        "n2   0",
    ]
    # grouped, the columns are of the groups
    grouped = results("--group-by", "-o", "custom-columns=COUNT:.count,CODE:.exitCode").splitlines()
    assert grouped[0].split() == ["COUNT", "CODE"] and len(grouped) == 3
    assert results("-o", "csv", "--no-headers").splitlines()[0].startswith("n1,failed,3,")
    assert results("--no-headers").splitlines()[0].split()[:3] == ["n1", "failed", "3"]


def test_create_and_version_print_name_and_jsonpath(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    create = ("create", "x", "--image", "busybox", "--dry-run=client", "--node-selector", "pool=gpu")
    code, out, err = run_plugin(capsys, monkeypatch, api, *create, "-o", "name")
    assert (code, out, err) == (EXIT_OK, "daemonjob.daemonjob.io/x\n", "")
    code, out, _ = run_plugin(capsys, monkeypatch, api, *create, "-o", "jsonpath={.spec.nodeSelector.matchLabels}")
    assert json.loads(out) == {"pool": "gpu"}
    code, out, _ = run_plugin(capsys, monkeypatch, api, "version", "--client", "-o", "jsonpath={.pluginVersion}")
    assert (code, out) == (EXIT_OK, __version__)
    assert api.seen == []  # a client dry run and --client ask nothing


@pytest.mark.parametrize(
    "args",
    [
        ("status", "dj", "-o", "csv"),  # results' alone
        ("status", "dj", "-o", "jsonpath"),  # no template
        ("status", "dj", "-o", "jsonpath={.nodes["),  # a template that does not parse
        ("status", "dj", "-o", "jsonpath={range .nodes[*]}{.node}"),  # range without end
        ("list", "-o", "custom-columns="),
        ("list", "-o", "custom-columns=NAME"),  # no path
        ("create", "x", "--image", "i", "--dry-run=client", "-o", "wide"),
        ("version", "-o", "name"),
        ("create", "x", "--image", "i", "-l", "a=b", "--node-selector", "c=d"),
    ],
)
def test_a_bad_output_format_is_a_usage_error_before_any_request(api: FakeApi, args: tuple[str, ...]) -> None:
    out = plugin(*args, "--server", api.url, "-n", "ns")
    assert out.returncode == EXIT_USAGE, out.stderr
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("error: "), out.stderr
    assert api.seen == []


def test_l_chooses_nodes_one_release_more_with_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["status", "dj"], ["logs", "dj"], ["create", "x", "--image", "i"]):
        args = parse([*command, "-l", "zone=a"])
        assert args.node_selector == "zone=a"
        err = capsys.readouterr().err
        assert err.startswith("warning: ") and "-l/--selector is deprecated" in err and "--node-selector" in err
        assert parse([*command, "--node-selector", "zone=a"]).node_selector == "zone=a"
        assert capsys.readouterr().err == ""  # the new flag: no warning
    assert parse(["list", "-l", "team=a"]).selector == "team=a"  # list: -l selects the DaemonJobs listed
    assert capsys.readouterr().err == ""


def test_plan_prints_custom_columns_jsonpath_and_rows_alone(
    api: FakeApi, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    serve_failed(api)
    api.answers["/apis/batch/v1/namespaces/ns/jobs"] = {"items": []}
    manifest = daemonjob("new", "ns", manifest=True)
    path = tmp_path / "new.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "daemonjob.io/v1alpha1", "kind": "DaemonJob", **manifest}))

    def plan(*args: str) -> str:
        code, out, err = run_plugin(capsys, monkeypatch, api, "plan", "-f", str(path), *args)
        assert code == EXIT_OK, err
        return out

    assert plan("-o", "custom-columns=NODE:.name,STATE:.state").splitlines() == ["NODE   STATE", "n1     runs"]
    assert plan("-o", "jsonpath={.eligibleNodes[*]}") == "n1"
    assert plan("--no-headers").split() == ["n1", "runs", "1"]  # no revision, no waves: the rows alone
    assert "Revision:" in plan()
