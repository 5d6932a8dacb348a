"""`create NAME --image IMAGE -- COMMAND...`: an ad-hoc DaemonJob in one line.

The manifest is built here and checked with the controller's own rule book (the one its
admission webhook applies), so `--dry-run=client` fails on what the webhook would refuse,
every problem at once; `--dry-run=server` sends it through the webhook itself.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from daemonjob.domain.jobs import API_VERSION, KIND
from daemonjob.domain.validate import problems_of
from daemonjob.kubectl import client, output
from daemonjob.kubectl.client import PluginError
from daemonjob.machinery.kube import path_for

_PERCENT = re.compile(r"^(100|[1-9]?[0-9])%$")
_SET_OP = re.compile(r"^(?P<key>[^\s!=]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)$")


def _split_terms(text: str) -> list[str]:
    """Split at commas outside parentheses."""
    terms, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        terms.append(cur.strip())
    return terms


def parse_selector(text: str) -> dict[str, Any]:
    """A kubectl `-l` string (`a=b,c!=d,e in (x,y),f,!g`) as a metav1.LabelSelector."""
    match_labels: dict[str, str] = {}
    exprs: list[dict[str, Any]] = []
    for term in _split_terms(text):
        if not term:
            raise PluginError(f"invalid selector {text!r}: empty requirement")
        if m := _SET_OP.match(term):
            values = [v.strip() for v in m["values"].split(",") if v.strip()]
            exprs.append({"key": m["key"], "operator": "In" if m["op"] == "in" else "NotIn", "values": values})
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            exprs.append({"key": key, "operator": "NotIn", "values": [value]})
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            match_labels[key] = value
        elif term.startswith("!"):
            exprs.append({"key": term[1:].strip(), "operator": "DoesNotExist"})
        elif re.fullmatch(r"[^\s(),]+", term):
            exprs.append({"key": term, "operator": "Exists"})
        else:
            raise PluginError(f"invalid selector {text!r}: cannot parse {term!r}")
    selector: dict[str, Any] = {}
    if match_labels:
        selector["matchLabels"] = match_labels
    if exprs:
        selector["matchExpressions"] = exprs
    return selector


def parse_int_or_percent(text: str, flag: str, minimum: int) -> int | str:
    if _PERCENT.match(text):
        return text
    try:
        value = int(text)
    except ValueError:
        raise PluginError(f"invalid {flag} {text!r}: an integer or a percentage such as 25%") from None
    if value < minimum:
        raise PluginError(f"invalid {flag} {text!r}: must be at least {minimum}")
    return value


def parse_pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PluginError(f"invalid {flag} {item!r}: expected KEY=VALUE")
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
        raise PluginError("--time-zone and --concurrency-policy need --schedule")
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
        raise PluginError("required flag --image not set")
    manifest = build_manifest(args, target.namespace)
    if args.dry_run == "client":
        if args.output in ("json", "yaml"):
            output.dump(manifest, args.output)
        else:
            print(f"daemonjob.daemonjob.io/{args.name} created (dry run)")
        return 0
    params: dict[str, Any] = {"dryRun": "All"} if args.dry_run == "server" else {}
    created = target.kube.create(path_for(API_VERSION, client.PLURAL, target.namespace), manifest, **params)
    if args.output in ("json", "yaml"):
        output.dump(created, args.output)
    else:
        print(f"daemonjob.daemonjob.io/{args.name} created" + (" (server dry run)" if params else ""))
    return 0
