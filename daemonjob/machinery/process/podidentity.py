"""Which pod this process is, so that it can leave itself alone (a drain never evicts it).

The downward API's POD_NAMESPACE and POD_NAME (the manifests and the chart set both) come
first; in a cluster without them, the pod's hostname (its name, unless the pod spec sets
another) and the service account's namespace file. Outside a cluster: None.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["own_namespace", "own_pod"]

NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def own_pod(environ: Mapping[str, str] = os.environ, namespace_file: str = NAMESPACE_FILE) -> tuple[str, str] | None:
    """(namespace, name) of this process's pod, or None."""
    name = environ.get("POD_NAME")
    namespace = environ.get("POD_NAMESPACE")
    if not environ.get("KUBERNETES_SERVICE_HOST") and not (name and namespace):
        return None
    name = name or environ.get("HOSTNAME")
    if not namespace:
        try:
            with open(namespace_file) as f:
                namespace = f.read().strip()
        except OSError:
            namespace = None
    return (namespace, name) if name and namespace else None


def own_namespace(flag: str | None) -> str:
    """The namespace a flag names, else this pod's (POD_NAMESPACE, the service account's file), else "default"."""
    if flag:
        return flag
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(NAMESPACE_FILE) as f:
            return f.read().strip()
    except OSError:
        return "default"
