"""`pause NAME` / `resume NAME`: set or clear `spec.suspend`, as `kubectl rollout pause/resume` do.

Suspended, a DaemonJob starts no new node Job (running ones finish) and its scheduled ticks
are skipped. The words follow kubectl's: `daemonjob.daemonjob.io/NAME paused`, and an error
(exit 1) when it already is.
"""

from __future__ import annotations

import argparse

from daemonjob.domain.shared.apinames import API_VERSION
from daemonjob.domain.spec.validate import read_spec
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.cluster.client import PluginError
from daemonjob.machinery.client.conflicts import retry_on_conflict
from daemonjob.machinery.client.kube import path_for


def suspend_patch(suspend: bool, resource_version: str) -> dict:
    """A JSON merge patch carrying the resourceVersion read: an edit in between is a conflict
    (read again and retried), never a change made on a stale view."""
    return {"metadata": {"resourceVersion": resource_version}, "spec": {"suspend": suspend}}


def set_suspend(target: client.Target, name: str, suspend: bool) -> None:
    def attempt() -> None:
        dj = client.get_daemonjob(target, name)
        if read_spec(dj).settings.suspend == suspend:
            raise PluginError(f'{client.RESOURCE} "{name}" is {"already paused" if suspend else "not paused"}')
        target.kube.patch(
            path_for(API_VERSION, client.PLURAL, target.namespace, name),
            suspend_patch(suspend, dj["metadata"]["resourceVersion"]),
        )

    retry_on_conflict(attempt)


def pause(args: argparse.Namespace, target: client.Target) -> int:
    set_suspend(target, args.name, True)
    print(f"{client.KIND_RESOURCE}/{args.name} paused")
    return 0


def resume(args: argparse.Namespace, target: client.Target) -> int:
    set_suspend(target, args.name, False)
    print(f"{client.KIND_RESOURCE}/{args.name} resumed")
    return 0
