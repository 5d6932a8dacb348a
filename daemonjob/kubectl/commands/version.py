"""`version` (and `--version`): the plugin's version, and the controller's and the CRD's when a cluster answers.

The controller's version is read from its Deployments, found by the label
`app.kubernetes.io/name=daemonjob-controller` that the manifests and the chart put on them:
their image's tag (what runs, whatever the chart's values say), else, for an image pinned by
digest, their `app.kubernetes.io/version` label (the chart's), else the digest. The CRD's is
its served and storage versions, with its `app.kubernetes.io/version` label when it has one;
a user who may not read CRDs gets the served versions from API discovery. What cannot be read
(no cluster, no permission) is said on stderr; the exit status is 0 all the same, since the
plugin's own version is always known.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import urllib3

from daemonjob import __version__
from daemonjob.domain.shared.apinames import GROUP, PLURAL
from daemonjob.kubectl.cluster import client
from daemonjob.kubectl.formats import output
from daemonjob.machinery.client.kube import ApiError, Kube, path_for

CONTROLLER_SELECTOR = "app.kubernetes.io/name=daemonjob-controller"
VERSION_LABEL = "app.kubernetes.io/version"
CRD = f"{PLURAL}.{GROUP}"
TIMEOUT = 5.0  # seconds per request, unless --request-timeout says otherwise: a version is asked in passing


def image_tag(image: str) -> str | None:
    """The tag of an image reference (`reg:5000/x/y:1.2@sha256:...` -> 1.2), None without one."""
    last = image.partition("@")[0].rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else None


def controllers(kube: Kube) -> list[dict[str, Any]]:
    items = kube.get(path_for("apps/v1", "deployments"), labelSelector=CONTROLLER_SELECTOR)["items"]
    found = []
    for d in sorted(items, key=lambda d: (d["metadata"].get("namespace", ""), d["metadata"]["name"])):
        meta = d["metadata"]
        containers = (((d.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or [{}]
        image = containers[0].get("image") or ""
        digest = image.partition("@")[2]
        version = image_tag(image) or (meta.get("labels") or {}).get(VERSION_LABEL) or digest or "latest"
        found.append({"namespace": meta.get("namespace"), "name": meta["name"], "version": version, "image": image})
    return found


def crd(kube: Kube) -> dict[str, Any]:
    try:
        body = kube.get(path_for("apiextensions.k8s.io/v1", "customresourcedefinitions", name=CRD))
    except ApiError as exc:
        if exc.status != 403:
            raise
        discovery = kube.get(f"/apis/{GROUP}")  # anyone may read discovery
        versions = [{"name": v["version"], "served": True} for v in discovery.get("versions") or []]
        return {"name": CRD, "versions": versions, "version": None}
    versions = [
        {"name": v["name"], "served": bool(v.get("served")), "storage": bool(v.get("storage"))}
        for v in (body.get("spec") or {}).get("versions") or []
    ]
    return {"name": CRD, "versions": versions, "version": (body["metadata"].get("labels") or {}).get(VERSION_LABEL)}


def report(kube: Kube | None, problems: list[str]) -> dict[str, Any]:
    """What could be read, and in `problems` a line for each thing that could not."""
    doc: dict[str, Any] = {"pluginVersion": __version__}
    if kube is None:
        return doc
    for key, what, read in (("controllers", "the controller's", controllers), ("crd", "the CRD's", crd)):
        try:
            doc[key] = read(kube)
        except ApiError as exc:  # no permission, no CRD: the rest may still be read
            problems.append(f"{what} version unknown: {client.api_error_line(exc)}")
        except urllib3.exceptions.HTTPError as exc:  # no API server: nothing more to read
            problems.append(client.describe_connection_error(kube, exc))
            break
    return doc


def _crd_words(c: dict[str, Any]) -> str:
    versions = ", ".join(
        f"{v['name']} ({', '.join(k for k in ('served', 'storage') if v.get(k))})" for v in c["versions"]
    )
    return f"{versions or 'none served'} ({c['name']}" + (f", {VERSION_LABEL}={c['version']})" if c["version"] else ")")


def print_report(doc: dict[str, Any], fmt: output.OutputFormat | None) -> None:
    if output.emit(fmt, document=lambda: doc):
        return
    print(f"Plugin Version: {doc['pluginVersion']}")
    found = doc.get("controllers")
    if found == []:
        print(f"Controller Version: none found (no Deployment labelled {CONTROLLER_SELECTOR})")
    for c in found or ():
        print(f"Controller Version: {c['version']} (deployment {c['namespace']}/{c['name']}, image {c['image']})")
    if doc.get("crd"):
        print(f"CRD Version: {_crd_words(doc['crd'])}")


def run(args: argparse.Namespace, connect: Callable[[], client.Target]) -> int:
    problems: list[str] = []
    kube = None
    if not args.client:
        try:
            kube = connect().kube
            if not args.request_timeout:
                kube.timeout = TIMEOUT
        except client.PluginError as exc:
            problems.append(f"no cluster: {exc.message}")
    doc = report(kube, problems)
    print_report(doc, args.output)
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    return client.EXIT_OK
