"""AdmissionReviews that cost the webhook most per byte, by shape, and the memory one costs.

Anyone who can reach the webhook's port may post what the API server never sends: a review
of up to WEBHOOK_MAX_REQUEST_BYTES made of the smallest JSON values (`{}`: three bytes,
~25 times that once parsed), placed where the webhook does the most with them. Each shape
names what the webhook does with the review; `peak_memory` measures, in a fresh process,
the resident memory that handling one review adds (VmHWM after clear_refs), which the
webhook's handling budget must charge at least (defaults.WEBHOOK_MEMORY_PER_BYTE per byte).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from daemonjob.testing.doubles.builders import daemonjob

__all__ = ["SHAPES", "MAINTENANCE", "costly_review", "peak_memory"]

MAINTENANCE = {"cordon": True, "drain": {"timeout": "5m"}}
PAD = "@pad@"


def _dj(**spec: Any) -> dict[str, Any]:
    return daemonjob("costly", namespace="ops", nodeMaintenance=MAINTENANCE, **spec)


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


def _padded(where: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = _dj()
    where(obj)
    return obj


def _set(path: str) -> Callable[[dict[str, Any]], None]:
    def put(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = obj
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = [PAD]

    return put


# shape -> (operation, object, oldObject, kind): every DaemonJob shape asks for node maintenance,
# so the webhook reads the spec, checks the requester's node powers and compares the versions.
SHAPES: dict[str, tuple[str, dict[str, Any], dict[str, Any] | None, str]] = {
    "not a DaemonJob (parsed only)": ("CREATE", {"metadata": {"name": "x"}, "pad": [PAD]}, None, "ConfigMap"),
    "create, an unknown field": ("CREATE", _padded(_set("spec.pad")), None, "DaemonJob"),
    "update, both versions": ("UPDATE", _padded(_set("spec.pad")), _padded(_set("spec.pad")), "DaemonJob"),
    "update, only the old version": ("UPDATE", _dj(), _padded(_set("spec.pad")), "DaemonJob"),
    "spec.after items": ("CREATE", _padded(_set("spec.after")), None, "DaemonJob"),
    "spec.rollout.haltOnAlerts items": ("CREATE", _padded(_set("spec.rollout.haltOnAlerts")), None, "DaemonJob"),
    "spec.healthCheck.daemonSets items": ("CREATE", _padded(_set("spec.healthCheck.daemonSets")), None, "DaemonJob"),
    "node selector expressions": ("CREATE", _padded(_set("spec.nodeSelector.matchExpressions")), None, "DaemonJob"),
    "tolerations": ("CREATE", _padded(lambda o: _pod_spec(o).update(tolerations=[PAD])), None, "DaemonJob"),
    "container env": (
        "CREATE",
        _padded(lambda o: _pod_spec(o)["containers"][0].update(env=[PAD])),
        None,
        "DaemonJob",
    ),
}


def costly_review(shape: str, size: int, unit: bytes = b"{}") -> bytes:
    """An AdmissionReview of `shape`, `size` bytes long, its padding `unit`s (the empty object by
    default), shared between the object and the old object when both carry it."""
    operation, obj, old, kind = SHAPES[shape]
    group = "daemonjob.io" if kind == "DaemonJob" else ""
    request = {
        "uid": "costly",
        "operation": operation,
        "name": "costly",
        "namespace": "ops",
        "kind": {"group": group, "version": "v1alpha1" if group else "v1", "kind": kind},
        "object": obj,
        "oldObject": old,
        "userInfo": {"username": "jane", "groups": ["system:authenticated"]},
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    envelope = json.dumps(review).encode()
    marker = json.dumps(PAD).encode()
    places = envelope.count(marker)
    each = (size - len(envelope) + places * len(marker)) // places // (len(unit) + 1)
    body = envelope.replace(marker, b",".join([unit] * each))
    return body + b" " * (size - len(body))


_CHILD = """
import sys, structlog
structlog.configure(logger_factory=structlog.ReturnLoggerFactory())
from daemonjob.admission.review import Checks, handle
from daemonjob.admission.powers import powers_problems
from daemonjob.admission.nodereads import AllowedKeys, node_reads_problems

class Everyone:
    def may(self, user, permission):
        return True

def powers(request):
    return [*powers_problems(request, Everyone()), *node_reads_problems(request, Everyone(), AllowedKeys())]

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

warm = open(sys.argv[2], "rb").read()
handle(warm, Checks(frozenset({"ops"}), powers))  # imports and first-use allocations, not the review's
body = open(sys.argv[1], "rb").read()
open("/proc/self/clear_refs", "w").write("5")  # VmHWM from now on
before = status("VmRSS:")
answer = handle(body, Checks(frozenset({"ops"}), powers))
print(status("VmHWM:") - before, answer.code, len(answer.body))
"""


def peak_memory(body: bytes) -> tuple[int, int, int]:
    """(bytes of resident memory handling `body` added at its peak, the answer's HTTP code and
    size), measured in a fresh Python process as the webhook's handle() answers it."""
    small = costly_review("create, an unknown field", 4096)
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, name) for name in ("body", "warm")]
        for path, data in zip(paths, (body, small), strict=True):
            with open(path, "wb") as file:
                file.write(data)
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, *paths], capture_output=True, text=True, timeout=300, check=True
        )
    peak, code, size = out.stdout.split()
    return int(peak), int(code), int(size)
