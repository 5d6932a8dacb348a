"""Who may read an endpoint: the bearer token checked by TokenReview, the access by SubjectAccessReview.

What controller-runtime's `filters.WithAuthenticationAndAuthorization` does for /metrics: a
request without a bearer token, or with one the API server does not recognise, gets 401; an
authenticated user without `get` on the non-resource URL gets 403. Answers are cached for
`ttl` seconds (by a hash of the token), so a scrape costs the API server nothing most of the
time; an API server that cannot be asked gives 500 and nothing is cached.

Tokens the API server refused are cached apart from accepted ones, so a stream of made-up
tokens cannot push a scraper's entry out, and TokenReviews for tokens in neither cache are
rate-limited (`review_qps`, `review_burst`): beyond, a 429 without asking, so anyone who
can reach the port cannot turn it into a flood of TokenReviews at the API server.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import structlog
from cachetools import TTLCache

from daemonjob import defaults
from daemonjob.machinery.client.kube import ApiError, Kube
from daemonjob.machinery.queue.ratelimit import TokenBucket
from daemonjob.machinery.server.requesthead import Headers

__all__ = ["TokenReviewAuth", "TOKENREVIEWS", "SUBJECTACCESSREVIEWS"]

log = structlog.get_logger("daemonjob.machinery.server.authn")

TOKENREVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECTACCESSREVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
Answer = tuple[int, str, bytes]
_THROTTLED: dict[str, Any] = {}  # no TokenReview asked: the review rate is spent


class TokenReviewAuth:
    """A `serving.Filter`: None lets the request through, else the 401/403/500 to send instead."""

    def __init__(
        self,
        kube: Kube,
        *,
        ttl: float = 60.0,
        max_entries: int = 1024,
        timeout: float = 10.0,
        review_qps: float = defaults.METRICS_AUTH_REVIEW_QPS,
        review_burst: int = defaults.METRICS_AUTH_REVIEW_BURST,
        bucket: TokenBucket | None = None,
    ):
        self.kube, self.timeout = kube, timeout
        self._users: TTLCache[str, dict[str, Any]] = TTLCache(max_entries, ttl)  # token hash -> user
        self._rejected: TTLCache[str, bool] = TTLCache(max_entries, ttl)  # token hashes not accepted
        self._reviews = bucket if bucket is not None else TokenBucket(review_qps, review_burst)
        self._allowed: TTLCache[tuple[str, str, str], bool] = TTLCache(max_entries, ttl)  # (hash, verb, path)
        self._lock = threading.Lock()

    def __call__(self, method: str, path: str, headers: Headers) -> Answer | None:
        scheme, _, token = (headers.get("Authorization") or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return 401, "text/plain", b"Unauthorized: a bearer token is required\n"
        key = hashlib.sha256(token.encode()).hexdigest()
        verb = "get" if method in ("GET", "HEAD") else method.lower()
        try:
            user = self._user(key, token)
            if user is _THROTTLED:
                return 429, "text/plain", b"Too Many Requests: too many unknown tokens to review, retry later\n"
            if user is None:
                return 401, "text/plain", b"Unauthorized: the token was not accepted\n"
            if not self._may(key, user, verb, path):
                name = user.get("username", "")
                return 403, "text/plain", f"Forbidden: {name} may not {verb} {path}\n".encode()
        except (ApiError, OSError, ValueError) as exc:
            log.warning("cannot review a request's credentials", path=path, error=str(exc))
            return 500, "text/plain", b"Internal Server Error: the credentials could not be reviewed\n"
        return None

    def _user(self, key: str, token: str) -> dict[str, Any] | None:
        with self._lock:
            if key in self._users:
                return self._users[key]
            if key in self._rejected:
                return None
        if not self._reviews.allow():
            return _THROTTLED
        review = self.kube.create(
            TOKENREVIEWS,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
            request_timeout=self.timeout,
        )
        status = review.get("status") or {}
        user = (status.get("user") or {}) if status.get("authenticated") else None
        with self._lock:
            if user is None:
                self._rejected[key] = True
            else:
                self._users[key] = user
        return user

    def _may(self, key: str, user: dict[str, Any], verb: str, path: str) -> bool:
        with self._lock:
            if (key, verb, path) in self._allowed:
                return self._allowed[(key, verb, path)]
        spec: dict[str, Any] = {
            "user": user.get("username", ""),
            "groups": user.get("groups") or [],
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        review = self.kube.create(
            SUBJECTACCESSREVIEWS,
            {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
            request_timeout=self.timeout,
        )
        allowed = bool((review.get("status") or {}).get("allowed"))
        with self._lock:
            self._allowed[(key, verb, path)] = allowed
        return allowed
