"""What a node's turn waits for after its Job, as the spec says: a reboot
(`spec.nodeMaintenance.reboot: Expected`) and a health check (`spec.healthCheck`).

The health check sits at the top of the spec, not under nodeMaintenance: a DaemonJob that
never cordons (a rollout of an agent's configuration, say) needs the next node held back
while the last one is unhealthy as much as one that drains. The reboot stays under
nodeMaintenance, where the DaemonJob says what its Job does to the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from daemonjob import defaults
from daemonjob.domain.spec.problems import INVALID_SPEC, Problem, show, too_many
from daemonjob.domain.spec.rolloutspec import read_duration

__all__ = ["HealthCheck", "NodeChecks", "REBOOT_EXPECTED", "REBOOT_NEVER", "read_node_checks"]

REBOOT_EXPECTED = "Expected"
REBOOT_NEVER = "Never"
REBOOT_VALUES = (REBOOT_EXPECTED, REBOOT_NEVER)
HEALTH_PATH = "spec.healthCheck"
REBOOT_PATH = "spec.nodeMaintenance"


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """spec.healthCheck: the node Ready, untainted, the named DaemonSets' pods on it Ready, for `settle`."""

    timeout: timedelta = defaults.HEALTH_TIMEOUT
    settle: timedelta = defaults.HEALTH_SETTLE
    daemon_sets: tuple[tuple[str, str], ...] = ()  # (namespace, name)


@dataclass(frozen=True, slots=True)
class NodeChecks:
    """What a node's turn waits for once its Job is over."""

    reboot: bool = False  # the Job reboots its node: success is a new boot ID and Ready
    reboot_timeout: timedelta = defaults.REBOOT_TIMEOUT
    health: HealthCheck | None = None

    @property
    def any(self) -> bool:
        return self.reboot or self.health is not None


def read_node_checks(spec: Mapping[str, Any], problems: list[Problem]) -> NodeChecks:
    """The reboot and the health check compiled; a problem is appended for what is invalid."""
    maintenance = spec.get("nodeMaintenance")
    maintenance = maintenance if isinstance(maintenance, Mapping) else {}
    reboot = maintenance.get("reboot")
    if reboot is not None and reboot not in REBOOT_VALUES:
        supported = ", ".join(show(v) for v in REBOOT_VALUES)
        problems.append(
            Problem(
                INVALID_SPEC, f"{REBOOT_PATH}.reboot: Unsupported value: {show(reboot)}: supported values: {supported}"
            )
        )
    expected = reboot == REBOOT_EXPECTED
    timeout = read_duration(maintenance, "rebootTimeout", REBOOT_PATH, problems, positive=True)
    if expected and _restart_policy(spec) != "Never":
        problems.append(
            Problem(
                INVALID_SPEC,
                f"{REBOOT_PATH}.reboot: Invalid value: {show(reboot)}: needs "
                "spec.jobTemplate.spec.template.spec.restartPolicy: Never (a container restarted "
                "after the reboot would run the reboot again)",
            )
        )
    return NodeChecks(expected, timeout or defaults.REBOOT_TIMEOUT, _health(spec.get("healthCheck"), problems))


def _restart_policy(spec: Mapping[str, Any]) -> Any:
    template = spec.get("jobTemplate")
    job_spec = template.get("spec") if isinstance(template, Mapping) else None
    pod = job_spec.get("template") if isinstance(job_spec, Mapping) else None
    pod_spec = pod.get("spec") if isinstance(pod, Mapping) else None
    return pod_spec.get("restartPolicy") if isinstance(pod_spec, Mapping) else None


def _health(raw: Any, problems: list[Problem]) -> HealthCheck | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"{HEALTH_PATH}: Invalid value: {show(raw)}: must be an object"))
        return None
    timeout = read_duration(raw, "timeout", HEALTH_PATH, problems, positive=True) or defaults.HEALTH_TIMEOUT
    settle = read_duration(raw, "settle", HEALTH_PATH, problems)
    names: list[tuple[str, str]] = []
    listed = raw.get("daemonSets")
    if listed is not None and not isinstance(listed, list):
        problems.append(
            Problem(INVALID_SPEC, f"{HEALTH_PATH}.daemonSets: Invalid value: {show(listed)}: must be a list")
        )
        listed = []
    if listed and too_many(listed, defaults.HEALTH_DAEMONSETS_MAX, f"{HEALTH_PATH}.daemonSets", problems):
        listed = []
    for i, item in enumerate(listed or ()):
        parts = item.split("/") if isinstance(item, str) else []
        if len(parts) != 2 or not all(parts):
            problems.append(
                Problem(
                    INVALID_SPEC,
                    f"{HEALTH_PATH}.daemonSets[{i}]: Invalid value: {show(item)}: must be namespace/name",
                )
            )
            continue
        names.append((parts[0], parts[1]))
    return HealthCheck(timeout, defaults.HEALTH_SETTLE if settle is None else settle, tuple(dict.fromkeys(names)))
