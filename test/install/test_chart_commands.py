"""Every command the chart renders is one the binary accepts: the chart rendered with the real
helm over every combination of the values that change a container's or a hook's arguments,
and each one's arguments read by the parsers `daemonjob-controller` itself uses (cli.py's,
with the checks it makes before it needs a cluster, and release-nodes'). The manifests'
(kustomize) commands too. No cluster.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from installtools import CHART, NAMESPACE, docs, helm_env, kustomize, run

from daemonjob import cli, release
from daemonjob.defaults import LEADER_ELECTION_ID

ENTRYPOINT = "daemonjob-controller"  # the image's (Dockerfile); a container that sets no command runs it

# Each dimension: the values (--set) of its settings that change a command.
LEADER_ELECTION = {
    "lease-off": "leaderElection.enabled=false",
    "lease-on": "leaderElection.enabled=true",
    "lease-timed": "leaderElection.leaseDuration=30,leaderElection.renewDeadline=20,leaderElection.retryPeriod=4",
}
NODE_MAINTENANCE = {
    "maintenance-off": "nodeMaintenance.enabled=false",
    "maintenance-on": "nodeMaintenance.enabled=true,nodeMaintenance.namespaces={ops,batch},"
    "nodeMaintenance.maxUnavailableNodes=25%,nodeMaintenance.protectedNodeSelector=tier in (cp)",
}
WATCH_NAMESPACE = {"all-namespaces": "watchNamespace=", "namespaced": "watchNamespace=ops"}
METRICS = {
    "metrics-secure": "metrics.secure=true",
    "metrics-plain": "metrics.secure=false,logLevel=debug,logFormat=console",
    "metrics-port": "metrics.secure=true,metrics.port=9090",
}
WEBHOOK = {
    "webhook-off": "webhook.enabled=false",
    "webhook-on": "webhook.enabled=true,webhook.timeoutSeconds=10",
    "webhook-cert-manager": "webhook.enabled=true,webhook.certManager.enabled=true",
}
COMBINATIONS = list(itertools.product(LEADER_ELECTION, NODE_MAINTENANCE, WATCH_NAMESPACE, METRICS, WEBHOOK))


def _containers(objects: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(object/container, container) of every pod template rendered, hooks included."""
    for obj in objects:
        spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
            yield f"{obj['kind']}/{obj['metadata']['name']}/{container['name']}", container


def read_command(container: dict[str, Any]) -> argparse.Namespace:
    """The container's arguments as the binary reads them; AssertionError naming the refusal."""
    assert container.get("command") in (None, [ENTRYPOINT]), "a command other than the image's entrypoint"
    args = [str(a) for a in container.get("args") or ()]
    try:
        if args[:1] == ["release-nodes"]:
            return release.parser().parse_args(args[1:])
        parsed, problem = cli.read_flags(args)
    except SystemExit as exc:  # argparse has said why on stderr
        raise AssertionError(f"refused by the parser (exit {exc.code}): {args}") from exc
    assert problem is None, f"{problem}: {args}"
    return parsed


def _lease_role(objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    for obj in objects:
        if obj["kind"] == "Role" and any("leases" in (r.get("resources") or ()) for r in obj.get("rules") or ()):
            return obj
    return None


def _lease_verbs(role: dict[str, Any], name: str) -> set[str]:
    verbs: set[str] = set()
    for rule in role.get("rules") or ():
        if "leases" in (rule.get("resources") or ()) and name in (rule.get("resourceNames") or [name]):
            verbs.update(rule.get("verbs") or ())
    return verbs


@pytest.mark.parametrize("combination", COMBINATIONS, ids=["/".join(c) for c in COMBINATIONS])
def test_every_rendered_container_and_hook_is_a_command_the_binary_accepts(
    tmp_path: Path, combination: tuple[str, str, str, str, str]
) -> None:
    values = [
        setting
        for table, chosen in zip(
            (LEADER_ELECTION, NODE_MAINTENANCE, WATCH_NAMESPACE, METRICS, WEBHOOK), combination, strict=True
        )
        for setting in ("--set", table[chosen])
    ]
    objects = docs(
        run("helm", "template", "daemonjob", str(CHART), "-n", NAMESPACE, *values, env=helm_env(tmp_path)).stdout
    )
    commands = {where: read_command(container) for where, container in _containers(objects)}
    assert "Deployment/daemonjob-controller/controller" in commands, sorted(commands)
    hook = commands.get("Job/daemonjob-release-nodes/release-nodes")
    assert (hook is not None) == (combination[1] == "maintenance-on")
    if hook is not None:
        # the stop on new cordons is written on the Lease the controller reads, leader election on or off
        assert hook.leader_election_namespace == NAMESPACE and hook.leader_election_id == LEADER_ELECTION_ID
        assert hook.namespace == (None if combination[2] == "all-namespaces" else "ops")
        role = _lease_role(objects)
        assert role is not None and role["metadata"]["namespace"] == NAMESPACE, "the hook's Lease is not granted"
        assert {"get", "update", "create"} <= _lease_verbs(role, LEADER_ELECTION_ID)


@pytest.mark.parametrize(
    "components", [(), ("namespaced",), ("node-maintenance",), ("cert-manager",)], ids=lambda c: "+".join(c) or "base"
)
def test_every_command_of_the_manifests_is_one_the_binary_accepts(tmp_path: Path, components: tuple[str, ...]) -> None:
    objects = kustomize(*components, tmp=tmp_path)
    commands = {where: read_command(container) for where, container in _containers(objects)}
    assert commands, "no container rendered"
