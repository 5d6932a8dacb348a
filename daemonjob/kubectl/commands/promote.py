"""`promote NAME`: let a canaried revision or run go on to every node.

It writes the `daemonjob.io/promote` annotation naming the current run (or, without runs,
the current revision), as a user would with `kubectl annotate dj NAME --overwrite
daemonjob.io/promote=<revision>`: an annotation rather than a spec field, so a GitOps tool
that owns the spec leaves it alone. A promote names what it promotes, so it never carries
over to the next revision or run: that one starts on the canary nodes again.
"""

from __future__ import annotations

import argparse
from typing import Any

from daemonjob.domain.rollout.canarystate import ANNOTATION_PROMOTE
from daemonjob.domain.shared.apinames import API_VERSION
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.cluster.client import PluginError
from daemonjob.machinery.client.kube import path_for


def promote_patch(value: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {ANNOTATION_PROMOTE: value}}}


def promote_target(dj: dict[str, Any]) -> str:
    """The current run, else the current revision, as the status records them."""
    status = dj.get("status") or {}
    target = status.get("currentRun") or status.get("currentRevision")
    if not isinstance(target, str) or not target:
        name = (dj.get("metadata") or {}).get("name")
        raise PluginError(f'{client.RESOURCE} "{name}" has no current revision yet: nothing to promote')
    return target


def run(args: argparse.Namespace, target: client.Target) -> int:
    dj = client.get_daemonjob(target, args.name)
    value = promote_target(dj)
    if ((dj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PROMOTE) == value:
        print(f"{client.KIND_RESOURCE}/{args.name} {value} already promoted")
        return 0
    target.kube.patch(path_for(API_VERSION, client.PLURAL, target.namespace, args.name), promote_patch(value))
    print(f"{client.KIND_RESOURCE}/{args.name} promoted ({ANNOTATION_PROMOTE}={value})")
    return 0
