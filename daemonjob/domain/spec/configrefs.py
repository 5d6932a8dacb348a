"""The ConfigMaps a pod template reads, and a revision that covers their content.

With `spec.rerunOnConfigChange: true` the revision is a hash of the Job template and of
the data of every ConfigMap its pod template references, so editing a mounted script
re-runs every eligible node as a template edit does. Only ConfigMaps: Secrets are never
read (the controller has no access to them), so a Secret change does not re-run.

Pure: the caller reads the referenced ConfigMaps (from a cache of the few it watches)
and passes their content in; a missing one is passed as None.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from daemonjob.domain.spec.revision import REVISION_LENGTH, template_revision
from daemonjob.domain.spec.spec import DaemonJobSpec

__all__ = [
    "ConfigMapRef",
    "referenced_configmaps",
    "config_revision",
    "revision_for",
    "missing_configmaps",
    "ConfigMapLimitExceeded",
]

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


class ConfigMapLimitExceeded(str):
    """Why a DaemonJob's referenced ConfigMaps are not watched: a cap on watches was reached.

    It travels as the "why" of an unreadable ConfigMap, and the condition it makes names the
    cap instead of a read error that a retry would cure."""


@dataclass(frozen=True, slots=True, order=True)
class ConfigMapRef:
    """A ConfigMap in the DaemonJob's namespace; `optional` only if every reference says so."""

    name: str
    optional: bool = False


def _mappings(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, Mapping))


def _ref(source: Any) -> tuple[str, bool] | None:
    if not isinstance(source, Mapping):
        return None
    name = source.get("name")
    if not isinstance(name, str) or not name:
        return None
    return name, source.get("optional") is True


def _raw_refs(pod_spec: Mapping[str, Any]) -> Iterator[tuple[str, bool]]:
    for volume in _mappings(pod_spec.get("volumes")):
        if (ref := _ref(volume.get("configMap"))) is not None:
            yield ref
        projected = volume.get("projected")
        if isinstance(projected, Mapping):
            for source in _mappings(projected.get("sources")):
                if (ref := _ref(source.get("configMap"))) is not None:
                    yield ref
    for key in _CONTAINER_LISTS:
        for container in _mappings(pod_spec.get(key)):
            for env_from in _mappings(container.get("envFrom")):
                if (ref := _ref(env_from.get("configMapRef"))) is not None:
                    yield ref
            for env in _mappings(container.get("env")):
                value_from = env.get("valueFrom")
                if isinstance(value_from, Mapping) and (ref := _ref(value_from.get("configMapKeyRef"))) is not None:
                    yield ref


def referenced_configmaps(pod_template: Mapping[str, Any] | None) -> tuple[ConfigMapRef, ...]:
    """Every ConfigMap the pod template reads, sorted by name, each once.

    Volumes, projected volumes, envFrom and env valueFrom.configMapKeyRef, in init,
    regular and ephemeral containers alike. A name referenced both optionally and not
    is required: the pod cannot start without it.
    """
    pod_spec = (pod_template or {}).get("spec") if isinstance(pod_template, Mapping) else None
    if not isinstance(pod_spec, Mapping):
        return ()
    optional: dict[str, bool] = {}
    for name, is_optional in _raw_refs(pod_spec):
        optional[name] = optional.get(name, True) and is_optional
    return tuple(ConfigMapRef(name, optional[name]) for name in sorted(optional))


def _content(configmap: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What counts of a ConfigMap: its data, not its labels, annotations or resourceVersion."""
    if configmap is None:
        return None
    return {"data": dict(configmap.get("data") or {}), "binaryData": dict(configmap.get("binaryData") or {})}


def config_revision(
    job_template: Mapping[str, Any] | None,
    refs: Iterable[ConfigMapRef],
    configmaps: Mapping[str, Mapping[str, Any] | None],
) -> str:
    """Hash of the template and the content of each referenced ConfigMap (missing counts too).

    A ConfigMap appearing, disappearing or changing its data changes the revision; one
    not referenced by the template never does, whatever `configmaps` holds.
    """
    folded = {
        "jobTemplate": job_template if job_template is not None else {},
        "configMaps": {ref.name: _content(configmaps.get(ref.name)) for ref in refs},
    }
    text = json.dumps(folded, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:REVISION_LENGTH]


def revision_for(spec: DaemonJobSpec, configmaps: Mapping[str, Mapping[str, Any] | None]) -> str:
    """The DaemonJob's revision: the template hash, or with rerunOnConfigChange the folded one."""
    if not spec.rerun_on_config_change:
        return template_revision(spec.revision_source)
    return config_revision(spec.revision_source, referenced_configmaps(spec.pod_template), configmaps)


def missing_configmaps(refs: Iterable[ConfigMapRef], configmaps: Mapping[str, Mapping[str, Any] | None]) -> list[str]:
    """Required ConfigMaps that do not exist (for a condition: their pods cannot start)."""
    return [ref.name for ref in refs if not ref.optional and configmaps.get(ref.name) is None]
