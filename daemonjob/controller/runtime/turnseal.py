"""Seals on what decides a node's release: a checked turn's boot ID and its verdict.

A node's turn (domain/nodework/nodecheck.py) is judged from two records on its Job: the node's boot ID
when the Job was created (a reboot is over once the node's boot ID differs) and the verdict
the controller writes at the turn's end. Job annotations are writable by anyone who may edit
Jobs in the namespace, who may hold no node powers: a forged `{"verdict": "Passed"}` would
uncordon a node still rebooting, a forged boot ID would fake a reboot, a forged Failed would
keep a node cordoned (keepFailedCordoned). So each record carries an HMAC-SHA256 under a key
only the controller reads (a Secret in its own namespace, shipped empty, filled on first
start), and the Job
cache keeps a record only when its seal verifies (`checked_annotations`, used by the Job
transform): everything downstream (the plan, retries, results, the order across DaemonJobs)
reads verified records or none.

- The boot ID is sealed over (namespace, Job name, owner uid, node, boot ID) when the Job is
  built, and kept in the pod template's annotations, which the API server refuses to change
  once the Job runs: removing it does not make the turn unchecked. A boot record that does not
  verify keeps the turn checked with its boot ID unknown: a reboot is then never seen, and the
  turn fails at rebootTimeout; the health check goes on as before.
- The verdict is sealed over (Job uid, node, verdict) when written (uid-guarded). A verdict
  that does not verify is absent: the turn is not over, the node stays held and is looked at
  again, and the next look writes a sealed verdict over the forged one.

No per-node state in the DaemonJob's status (10,000 nodes x 10 DaemonJobs would not fit an
etcd object), and the records survive restarts and leader changes: every replica reads the
same key. A record that does not verify is counted (daemonjob_turn_seals_broken_total) and
logged with the DaemonJob's namespace and name.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from daemonjob.domain.jobs.owners import daemonjob_ref
from daemonjob.domain.shared.apinames import ANNOTATION_BOOT_ID, ANNOTATION_NODE, ANNOTATION_NODE_CHECK
from daemonjob.machinery.client.kube import ApiError, Kube, path_for

__all__ = [
    "ANNOTATION_BOOT_ID_SEAL",
    "ANNOTATION_NODE_CHECK_SEAL",
    "BOOT_ID",
    "NODE_CHECK",
    "SECRET_KEY",
    "TurnSeal",
    "broken_reporter",
    "load_key",
]

ANNOTATION_BOOT_ID_SEAL = "daemonjob.io/boot-id-seal"  # on a Job's pod template, beside its boot ID
ANNOTATION_NODE_CHECK_SEAL = "daemonjob.io/node-check-seal"  # on a Job, beside its verdict
SECRET_KEY = "key"  # the Secret's data key holding the HMAC key
KEY_BYTES = 32
BOOT_ID = "boot-id"  # what a broken seal was on (the metric's label)
NODE_CHECK = "node-check"

log = structlog.get_logger("daemonjob.turnseal")
Obj = Mapping[str, Any]


def _text(mac: bytes) -> str:
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


class TurnSeal:
    """Seals and checks a checked turn's records with one key. `broken(kind, job)` is told of
    each record whose seal does not verify (the controller counts and logs it)."""

    def __init__(self, key: bytes, broken: Callable[[str, Obj], None] | None = None) -> None:
        if len(key) < 16:
            raise ValueError("a turn seal key needs at least 16 bytes")
        self._key = key
        self.broken = broken if broken is not None else (lambda _kind, _job: None)

    @classmethod
    def random(cls) -> TurnSeal:
        """A key of this process alone (tests, fakes): a restart cannot verify what it sealed."""
        return cls(os.urandom(KEY_BYTES))

    def _mac(self, *parts: str) -> str:
        message = "\0".join(parts).encode()
        return _text(hmac.new(self._key, message, hashlib.sha256).digest())

    def boot_seal(self, namespace: str, job: str, owner: str, node: str, boot: str) -> str:
        return self._mac(BOOT_ID, namespace, job, owner, node, boot)

    def verdict_seal(self, job_uid: str, node: str, verdict: str) -> str:
        return self._mac(NODE_CHECK, job_uid, node, verdict)

    def sealed(self, body: dict[str, Any]) -> dict[str, Any]:
        """A Job body to create, its boot ID (if it records one) sealed into its pod template."""
        meta = body.get("metadata") or {}
        boot = (meta.get("annotations") or {}).get(ANNOTATION_BOOT_ID)
        ref = daemonjob_ref(body)
        template = (body.get("spec") or {}).get("template")
        if not isinstance(boot, str) or ref is None or not isinstance(template, dict):
            return body
        node = (meta.get("annotations") or {}).get(ANNOTATION_NODE) or ""
        seal = self.boot_seal(meta.get("namespace") or "", meta.get("name") or "", ref.get("uid") or "", node, boot)
        pod_meta = template.setdefault("metadata", {})
        pod_meta["annotations"] = {
            **(pod_meta.get("annotations") or {}),
            ANNOTATION_BOOT_ID: boot,
            ANNOTATION_BOOT_ID_SEAL: seal,
        }
        return body

    def verdict_annotations(self, job_uid: str, node: str, verdict: str) -> dict[str, str]:
        """The annotations that write a turn's verdict on its Job."""
        return {ANNOTATION_NODE_CHECK: verdict, ANNOTATION_NODE_CHECK_SEAL: self.verdict_seal(job_uid, node, verdict)}

    def checked_annotations(self, job: Obj) -> dict[str, str]:
        """A Job's turn records as the cache keeps them: the boot ID (an empty one when the Job
        records one whose seal does not verify) and the verdict, each only where it verifies."""
        meta = job.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        pod_meta = ((job.get("spec") or {}).get("template") or {}).get("metadata") or {}
        pod_annotations = pod_meta.get("annotations") or {}
        node = annotations.get(ANNOTATION_NODE) or ""
        out: dict[str, str] = {}
        boot = pod_annotations.get(ANNOTATION_BOOT_ID)
        if boot is not None or ANNOTATION_BOOT_ID in annotations:
            ref = daemonjob_ref(job) or {}
            want = self.boot_seal(
                meta.get("namespace") or "", meta.get("name") or "", ref.get("uid") or "", node, str(boot)
            )
            good = isinstance(boot, str) and hmac.compare_digest(
                want, str(pod_annotations.get(ANNOTATION_BOOT_ID_SEAL))
            )
            if not good:
                self.broken(BOOT_ID, job)
            out[ANNOTATION_BOOT_ID] = str(boot) if good else ""
        verdict = annotations.get(ANNOTATION_NODE_CHECK)
        if verdict is not None:
            want = self.verdict_seal(meta.get("uid") or "", node, str(verdict))
            if hmac.compare_digest(want, str(annotations.get(ANNOTATION_NODE_CHECK_SEAL))):
                out[ANNOTATION_NODE_CHECK] = str(verdict)
            else:
                self.broken(NODE_CHECK, job)
        return out


def broken_reporter(counter: Any) -> Callable[[str, Obj], None]:
    """`TurnSeal.broken` for the controller: counted in `counter` (labelled by record) and logged
    with the DaemonJob's namespace and name."""

    def broken(record: str, job: Obj) -> None:
        counter.labels(record).inc()
        meta = job.get("metadata") or {}
        log.warning(
            "a node turn's record does not verify: ignored",
            namespace=meta.get("namespace"),
            name=(daemonjob_ref(job) or {}).get("name"),
            job=meta.get("name"),
            record=record,
        )

    return broken


def load_key(kube: Kube, namespace: str, name: str, attempts: int = 3) -> bytes:
    """The seal key from Secret `namespace/name`, written on first need: the manifests ship the
    Secret without data, and the first replica to start fills it with a fresh random key (an
    update on its resourceVersion: a replica that loses the race reads the winner's key). A
    Secret not there at all is created (given the right to: a cluster-admin's kubeconfig)."""
    path = path_for("v1", "secrets", namespace, name)
    for _ in range(attempts):
        try:
            found: Obj | None = kube.get(path)
        except ApiError as exc:
            if not exc.not_found:
                raise
            found = None
        raw = ((found or {}).get("data") or {}).get(SECRET_KEY)
        if raw:
            key = base64.b64decode(raw)
            if len(key) < 16:
                raise ValueError(f"Secret {namespace}/{name}: its {SECRET_KEY!r} is shorter than 16 bytes")
            return key
        key = os.urandom(KEY_BYTES)
        data = {SECRET_KEY: base64.b64encode(key).decode()}
        try:
            if found is None:
                body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}
                kube.create(path_for("v1", "secrets", namespace), {**body, "type": "Opaque", "data": data})
            else:
                kube.put(path, {**found, "data": {**(found.get("data") or {}), **data}})
        except ApiError as exc:
            if exc.conflict:  # another replica wrote it first (AlreadyExists, or a newer resourceVersion)
                continue
            raise
        log.info("turn seal key written", secret=f"{namespace}/{name}")
        return key
    raise RuntimeError(f"Secret {namespace}/{name}: its key neither read nor written after {attempts} attempts")
