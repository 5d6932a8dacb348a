"""spec.nodeParameters: environment variables of a node's Job read from its Node.

A Downward API for node labels has been asked of Kubernetes since 2017 (#40610); a
DaemonJob creates each Job for a known node, so it passes what the spec names: each entry
takes a label (`fromLabel`) or an annotation (`fromAnnotation`) of the node into `env`, its
`default` (else "") when the node has none. Every node Job also gets `DAEMONJOB_NODE_NAME`,
unless its template sets that name itself.

The values are read when the node's Job is created and never again: the revision covers
what the Jobs are made of (`spec.jobTemplate` and these entries), not the nodes' values, so
a relabelled node (an autoscaler's or node-feature-discovery's label, say) does not re-run.

An entry whose `env` a container of the template also sets is refused: two values under one
name in one container is a guess of which wins. A `daemonjob.io/` key (or a subdomain's) is
never passed: those are the controllers' records on the Node (another DaemonJob's
maintenance record names its uid and revision), refused here, by the one rule book, and
never read by `value` either, for an object that got in without the webhook. Who may read
the other keys is the requester's right to read Nodes, which only the webhook can check
(admission/nodereads.py). `envFrom` is not checked (its keys are only
known at run time); explicit env wins over it, as Kubernetes has it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from daemonjob.domain.spec.labelrules import InvalidSelector, validate_label_key
from daemonjob.domain.spec.problems import INVALID_SPEC, Problem, show

__all__ = [
    "ENV_NODE_NAME",
    "OWN_PREFIX",
    "is_own_key",
    "PATH",
    "NodeParameter",
    "read_node_parameters",
    "node_values",
    "with_node_env",
    "hashed",
]

PATH = "spec.nodeParameters"
ENV_NODE_NAME = "DAEMONJOB_NODE_NAME"
PARAMETERS_MAX = 64
DEFAULT_MAX = 4096  # characters of a default: an env value, not a file
ENV_NAME_RE = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")  # IsEnvVarName of apimachinery
CONTAINER_KINDS = ("initContainers", "containers")
OWN_PREFIX = "daemonjob.io"  # keys under it, or under a subdomain of it, are the controllers' records
LABEL, ANNOTATION = "fromLabel", "fromAnnotation"

Env = tuple[tuple[str, str], ...]  # (name, value) in the order of spec.nodeParameters


@dataclass(frozen=True, slots=True)
class NodeParameter:
    """One entry: `env` from the node's label or annotation `key`, `default` when absent."""

    env: str
    source: str  # LABEL or ANNOTATION
    key: str
    default: str = ""

    def value(self, node: Mapping[str, Any] | None) -> str:
        if is_own_key(self.key):
            return self.default  # refused by the rule book; never copied, whatever got in
        meta = (node or {}).get("metadata") or {}
        found = (meta.get("labels" if self.source == LABEL else "annotations") or {}).get(self.key)
        return found if isinstance(found, str) else self.default

    def written(self) -> dict[str, str]:
        """As written in the spec (what the revision hashes)."""
        out = {"env": self.env, self.source: self.key}
        if self.default:
            out["default"] = self.default
        return out


def is_own_key(key: str) -> bool:
    """A `daemonjob.io/` key, or one under a subdomain of daemonjob.io: never passed to a Job."""
    prefix, sep, _ = key.rpartition("/")
    return bool(sep) and (prefix == OWN_PREFIX or prefix.endswith("." + OWN_PREFIX))


def hashed(job_template: Mapping[str, Any], parameters: Sequence[NodeParameter]) -> Mapping[str, Any]:
    """What the revision is a hash of: the template alone without parameters, so DaemonJobs
    that set none keep the revisions they had."""
    if not parameters:
        return job_template
    return {"jobTemplate": job_template, "nodeParameters": [p.written() for p in parameters]}


def _template_env(pod_template: Mapping[str, Any] | None) -> dict[str, str]:
    """Env names the template's containers set -> where the first is set."""
    spec = (pod_template or {}).get("spec")
    out: dict[str, str] = {}
    if not isinstance(spec, Mapping):
        return out
    for kind in CONTAINER_KINDS:
        containers = spec.get(kind)
        for i, c in enumerate(containers if isinstance(containers, list) else ()):
            env = c.get("env") if isinstance(c, Mapping) else None
            for j, e in enumerate(env if isinstance(env, list) else ()):
                name = e.get("name") if isinstance(e, Mapping) else None
                if isinstance(name, str):
                    where = f"spec.jobTemplate.spec.template.spec.{kind}[{i}].env[{j}]"
                    out.setdefault(name, f'container "{c.get("name")}" of the template sets it too ({where})')
    return out


def _entry(raw: Any, path: str, problems: list[Problem]) -> NodeParameter | None:
    if not isinstance(raw, Mapping):
        problems.append(Problem(INVALID_SPEC, f"{path}: Invalid value: {show(raw)}: must be an object"))
        return None
    before = len(problems)
    env = raw.get("env")
    if not isinstance(env, str) or not env:
        problems.append(Problem(INVALID_SPEC, f"{path}.env: Required value"))
    elif not ENV_NAME_RE.match(env):
        problems.append(
            Problem(
                INVALID_SPEC,
                f"{path}.env: Invalid value: {show(env)}: a valid environment variable name must consist of "
                "alphabetic characters, digits, '_', '-', or '.', and must not start with a digit",
            )
        )
    elif env == ENV_NODE_NAME:
        problems.append(
            Problem(INVALID_SPEC, f"{path}.env: Invalid value: {show(env)}: every node Job gets it already")
        )
    sources = [s for s in (LABEL, ANNOTATION) if raw.get(s) is not None]
    if len(sources) != 1:
        problems.append(
            Problem(
                INVALID_SPEC,
                f"{path}: Invalid value: {show(dict(raw))}: must set exactly one of fromLabel, fromAnnotation",
            )
        )
    else:
        key, where = raw[sources[0]], f"{path}.{sources[0]}"
        try:
            validate_label_key(key, where)
        except InvalidSelector as e:
            problems.append(Problem(INVALID_SPEC, e.message))
        else:
            if is_own_key(key):
                problems.append(
                    Problem(
                        INVALID_SPEC,
                        f"{where}: Forbidden: {show(key)}: keys under {OWN_PREFIX}/ are the controllers' records "
                        "on the Node and are never passed to a Job",
                    )
                )
    default = raw.get("default", "")
    if not isinstance(default, str):
        problems.append(Problem(INVALID_SPEC, f"{path}.default: Invalid value: {show(default)}: must be a string"))
    elif len(default) > DEFAULT_MAX:
        problems.append(Problem(INVALID_SPEC, f"{path}.default: Too long: must have at most {DEFAULT_MAX} characters"))
    if len(problems) > before or not isinstance(env, str):
        return None
    return NodeParameter(env, sources[0], raw[sources[0]], default)


def read_node_parameters(raw: Any, job_template: Any, problems: list[Problem]) -> tuple[NodeParameter, ...]:
    """The valid entries of spec.nodeParameters; what is wrong appended to `problems`."""
    job_spec = job_template.get("spec") if isinstance(job_template, Mapping) else None
    pod_template = job_spec.get("template") if isinstance(job_spec, Mapping) else None
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append(Problem(INVALID_SPEC, f"{PATH}: Invalid value: {show(raw)}: must be a list"))
        return ()
    if len(raw) > PARAMETERS_MAX:
        problems.append(
            Problem(INVALID_SPEC, f"{PATH}: Too many: {len(raw)}: must have at most {PARAMETERS_MAX} items")
        )
        return ()
    set_by_template = _template_env(pod_template if isinstance(pod_template, Mapping) else None)
    seen: set[str] = set()
    out = []
    for i, item in enumerate(raw):
        path = f"{PATH}[{i}]"
        entry = _entry(item, path, problems)
        if entry is None:
            continue
        if entry.env in seen:
            problems.append(Problem(INVALID_SPEC, f"{path}.env: Duplicate value: {show(entry.env)}"))
            continue
        if entry.env in set_by_template:
            problems.append(
                Problem(
                    INVALID_SPEC,
                    f"{path}.env: Duplicate value: {show(entry.env)}: {set_by_template[entry.env]}",
                )
            )
            continue
        seen.add(entry.env)
        out.append(entry)
    return tuple(out)


def node_values(parameters: Sequence[NodeParameter], node: Mapping[str, Any] | None) -> Env:
    """The env a node's Job gets from `node` (None: unknown, every default)."""
    return tuple((p.env, p.value(node)) for p in parameters)


def with_node_env(pod_spec: dict[str, Any], node_name: str, env: Env) -> None:
    """Put DAEMONJOB_NODE_NAME and `env` first in every container and init container of
    `pod_spec` (a copy the caller owns): first, so the template's own env can refer to them
    as $(ZONE). Only the env lists are new; the containers are changed in place."""
    for kind in CONTAINER_KINDS:
        for container in pod_spec.get(kind) or ():
            if not isinstance(container, dict):
                continue
            own = container.get("env") or []
            # plain dicts (a JSON copy): isinstance against Mapping would cost more than the rest
            sets_it = any(type(e) is dict and e.get("name") == ENV_NODE_NAME for e in own)
            ours = [] if sets_it else [{"name": ENV_NODE_NAME, "value": node_name}]
            ours.extend({"name": name, "value": value} for name, value in env)
            container["env"] = [*ours, *own]
