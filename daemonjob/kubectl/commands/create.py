"""`create NAME --image IMAGE -- COMMAND...`: an ad-hoc DaemonJob in one line.

The manifest is built here and checked with the controller's own rule book (the one its
admission webhook applies), so `--dry-run=client` fails on what the webhook would refuse,
every problem at once, and warns of what it would warn of; `--dry-run=server` sends it
through the webhook itself.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from daemonjob.domain.shared.apinames import API_VERSION, KIND
from daemonjob.domain.spec.labelrules import InvalidSelector
from daemonjob.domain.spec.selectortext import parse_selector_text
from daemonjob.domain.spec.validate import problems_of
from daemonjob.domain.spec.warnings import no_effect
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.cluster.client import PluginError
from daemonjob.kubectl.formats import output
from daemonjob.machinery.client.kube import path_for

_PERCENT = re.compile(r"^(100|[1-9]?[0-9])%$")


def parse_selector(text: str) -> dict[str, Any]:
    """A kubectl `-l` string (`a=b,c!=d,e in (x,y),f,!g`) as a metav1.LabelSelector."""
    try:
        return parse_selector_text(text)
    except InvalidSelector as exc:
        raise PluginError(str(exc), client.EXIT_USAGE) from None


def parse_int_or_percent(text: str, flag: str, minimum: int) -> int | str:
    if _PERCENT.match(text):
        return text
    try:
        value = int(text)
    except ValueError:
        raise PluginError(
            f"invalid {flag} {text!r}: an integer or a percentage such as 25%", client.EXIT_USAGE
        ) from None
    if value < minimum:
        raise PluginError(f"invalid {flag} {text!r}: must be at least {minimum}", client.EXIT_USAGE)
    return value


def parse_pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PluginError(f"invalid {flag} {item!r}: expected KEY=VALUE", client.EXIT_USAGE)
        out[key] = value
    return out


def build_manifest(args: argparse.Namespace, namespace: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": args.container_name or args.name, "image": args.image}
    if args.command_line:
        container["command"] = list(args.command_line)
    pod_meta: dict[str, Any] = {}
    annotations = parse_pairs(args.pod_annotation, "--pod-annotation")
    if annotations:
        pod_meta["annotations"] = annotations
    pod_template: dict[str, Any] = {"spec": {"restartPolicy": args.restart, "containers": [container]}}
    if pod_meta:
        pod_template = {"metadata": pod_meta, **pod_template}
    job_spec: dict[str, Any] = {"backoffLimit": args.backoff_limit, "template": pod_template}
    spec: dict[str, Any] = {"jobTemplate": {"spec": job_spec}}
    if args.node_selector:
        spec["nodeSelector"] = parse_selector(args.node_selector)
    if args.max_parallel is not None:
        spec["maxParallel"] = parse_int_or_percent(args.max_parallel, "--max-parallel", 1)
    if args.max_failed_nodes is not None:
        spec["maxFailedNodes"] = parse_int_or_percent(args.max_failed_nodes, "--max-failed-nodes", 0)
    if args.schedule:
        spec["schedule"] = args.schedule
        if args.time_zone:
            spec["timeZone"] = args.time_zone
        if args.concurrency_policy:
            spec["concurrencyPolicy"] = args.concurrency_policy
    elif args.time_zone or args.concurrency_policy:
        raise PluginError("--time-zone and --concurrency-policy need --schedule", client.EXIT_USAGE)
    if args.cordon or args.drain:  # the webhook checks the requester may cordon (and drain) nodes
        spec["nodeMaintenance"] = {"cordon": True, **({"drain": {}} if args.drain else {})}
    manifest = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": args.name, "namespace": namespace},
        "spec": spec,
    }
    problems = problems_of(manifest)
    if problems:
        raise PluginError(f"invalid DaemonJob: {'; '.join(p.message for p in problems)}")
    return manifest


def run(args: argparse.Namespace, target: client.Target) -> int:
    if not args.image:
        raise PluginError("required flag --image not set", client.EXIT_USAGE)
    manifest = build_manifest(args, target.namespace)
    output.print_warnings(no_effect(manifest))
    name = f"{client.KIND_RESOURCE}/{args.name}"
    if args.dry_run == "client":
        if not output.emit(args.output, document=lambda: manifest, names=lambda: [name]):
            print(f"{name} created (dry run)")
        return 0
    params: dict[str, Any] = {"dryRun": "All"} if args.dry_run == "server" else {}
    created = target.kube.create(path_for(API_VERSION, client.PLURAL, target.namespace), manifest, **params)
    if not output.emit(args.output, document=lambda: created, names=lambda: [name]):
        print(f"{name} created" + (" (server dry run)" if params else ""))
    return 0
