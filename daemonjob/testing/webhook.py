"""A validating admission webhook on loopback, registered with a real API server.

For tests of what the controller does when admission refuses some of its writes (a policy
engine such as Gatekeeper or Kyverno refusing one node's Job, say). The server answers
AdmissionReview v1 over HTTPS with a self-signed certificate given to the API server as
the caBundle; the ValidatingWebhookConfiguration points at it by URL. Usable as a context
manager: on exit the configuration is deleted and the server's thread stopped.

Configurations are cluster-wide: give each one an `object_selector` (and a `review` that
looks at the namespace) so that tests sharing the cluster are not affected.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from daemonjob.machinery.client.kube import ApiError, Kube, path_for
from daemonjob.testing.tls import self_signed

__all__ = ["Review", "ValidatingWebhook", "JOB_CREATE"]

API = "admissionregistration.k8s.io/v1"
JOB_CREATE: dict[str, Any] = {
    "apiGroups": ["batch"],
    "apiVersions": ["v1"],
    "operations": ["CREATE"],
    "resources": ["jobs"],
    "scope": "Namespaced",
}

# The AdmissionReview's request -> None to allow, else the message of the denial.
Decide = Callable[[Mapping[str, Any]], str | None]


@dataclass(frozen=True)
class Review:
    """One request the webhook answered."""

    namespace: str
    name: str
    operation: str
    obj: Mapping[str, Any]
    denied: str | None  # the message, when denied


class ValidatingWebhook:
    """`ValidatingWebhook(kube, "deny-x", decide, object_selector=...)`; `with` it, or start()/stop().

    Denials carry HTTP code 403, as policy engines answer. `failure_policy` defaults to
    Ignore, so a test that dies with its server never blocks anyone's writes.
    """

    def __init__(
        self,
        kube: Kube,
        name: str,
        decide: Decide,
        *,
        object_selector: Mapping[str, Any] | None = None,
        namespace_selector: Mapping[str, Any] | None = None,
        rules: Sequence[Mapping[str, Any]] = (JOB_CREATE,),
        failure_policy: str = "Ignore",
        timeout_seconds: int = 5,
    ) -> None:
        self.kube = kube
        self.name = name
        self.decide = decide
        self.object_selector = dict(object_selector or {})
        self.namespace_selector = dict(namespace_selector or {})
        self.rules = [dict(r) for r in rules]
        self.failure_policy = failure_policy
        self.timeout_seconds = timeout_seconds
        self.reviews: list[Review] = []
        self._lock = threading.Lock()
        tls = self_signed(f"{name}-webhook")
        self._ca_bundle = base64.b64encode(tls.cert_pem).decode()
        handler = type("Handler", (_Handler,), {"webhook": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.socket = tls.context.wrap_socket(self._httpd.socket, server_side=True)
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=f"webhook-{name}", daemon=True)
        self._registered = False

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> Self:
        self._thread.start()
        try:
            self.kube.create(path_for(API, "validatingwebhookconfigurations"), self.configuration())
            self._registered = True
        except BaseException:
            self._shutdown()
            raise
        return self

    def stop(self) -> None:
        try:
            self.unregister()
        finally:
            self._shutdown()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def unregister(self) -> None:
        """Delete the configuration (the API server stops calling within moments); the server keeps answering."""
        if not self._registered:
            return
        try:
            self.kube.delete(path_for(API, "validatingwebhookconfigurations", name=self.name))
        except ApiError as exc:
            if not exc.not_found:
                raise
        self._registered = False

    def _shutdown(self) -> None:
        if self._thread.is_alive():
            self._httpd.shutdown()
            self._thread.join(5)
        self._httpd.server_close()

    # -- what it is and what it saw ------------------------------------------------------------
    def configuration(self) -> dict[str, Any]:
        hook: dict[str, Any] = {
            "name": f"{self.name}.webhook.daemonjob.io",
            "clientConfig": {"url": f"https://127.0.0.1:{self.port}/validate", "caBundle": self._ca_bundle},
            "rules": self.rules,
            "failurePolicy": self.failure_policy,
            "sideEffects": "None",  # so server-side dry runs are reviewed too (see wait_denies)
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": self.timeout_seconds,
        }
        if self.object_selector:
            hook["objectSelector"] = self.object_selector
        if self.namespace_selector:
            hook["namespaceSelector"] = self.namespace_selector
        return {
            "apiVersion": API,
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": self.name},
            "webhooks": [hook],
        }

    def denied(self) -> list[Review]:
        with self._lock:
            return [r for r in self.reviews if r.denied is not None]

    def wait_denies(self, path: str, body: Mapping[str, Any], timeout: float = 30.0) -> str:
        """Dry-run create `body` until the API server calls the webhook and it denies; returns the
        API server's message. The API server picks a new configuration up from a watch, so
        writes made right after start() may not be reviewed yet."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.kube.create(path, dict(body), dryRun="All")
            except ApiError as exc:
                if exc.status == 403 and "denied the request" in exc.message:
                    return exc.message
                raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"webhook {self.name}: a dry-run create of {path} still allowed after {timeout}s")
            time.sleep(0.2)

    def _review(self, review: Mapping[str, Any]) -> dict[str, Any]:
        request = review.get("request") or {}
        try:
            denial = self.decide(request)
        except Exception as exc:
            denial = f"webhook {self.name} failed: {exc!r}"
        obj = request.get("object") or {}
        with self._lock:
            self.reviews.append(
                Review(
                    request.get("namespace") or "",
                    (obj.get("metadata") or {}).get("name") or request.get("name") or "",
                    request.get("operation") or "",
                    obj,
                    denial,
                )
            )
        response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": denial is None}
        if denial is not None:
            response["status"] = {"code": 403, "reason": "Forbidden", "message": denial}
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class _Handler(BaseHTTPRequestHandler):
    webhook: ValidatingWebhook
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            review = json.loads(self.rfile.read(length) or b"{}")
            body = json.dumps(self.webhook._review(review)).encode()
            code = 200
        except ValueError as exc:
            body, code = str(exc).encode(), 400
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
