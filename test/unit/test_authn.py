"""The /metrics filter: TokenReviews of unknown tokens are rate-limited and cached apart."""

from __future__ import annotations

from typing import Any

from daemonjob.machinery.process.clock import FakeClock
from daemonjob.machinery.queue.ratelimit import TokenBucket
from daemonjob.machinery.server.authn import SUBJECTACCESSREVIEWS, TOKENREVIEWS, TokenReviewAuth


class FakeKube:
    """The API server's answers: only `good` is a token; its user may get /metrics."""

    def __init__(self) -> None:
        self.reviews = 0

    def create(self, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        if path == TOKENREVIEWS:
            self.reviews += 1
            ok = body["spec"]["token"] == "good"
            return {"status": {"authenticated": ok, "user": {"username": "scraper"} if ok else {}}}
        assert path == SUBJECTACCESSREVIEWS
        return {"status": {"allowed": True}}


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_flood_of_unknown_tokens_asks_the_api_server_at_the_review_rate_and_keeps_the_scraper_in() -> None:
    kube, clock = FakeKube(), FakeClock()
    auth = TokenReviewAuth(kube, max_entries=8, bucket=TokenBucket(1.0, 5, clock=clock))  # type: ignore[arg-type]
    assert auth("GET", "/metrics", _auth("good")) is None
    answers = [auth("GET", "/metrics", _auth(f"made-up-{i}")) for i in range(1000)]
    assert kube.reviews == 1 + 4  # the burst left after the scraper's own review, then none
    codes = [a[0] for a in answers if a is not None]
    assert codes.count(401) == 4 and codes.count(429) == 996
    # more refused tokens than the cache holds: the accepted one stays cached, asked nothing
    assert auth("GET", "/metrics", _auth("good")) is None and kube.reviews == 5
    clock.step(2.0)  # the rate refills: a new token is reviewed again
    assert auth("GET", "/metrics", _auth("made-up-x")) == (
        401,
        "text/plain",
        b"Unauthorized: the token was not accepted\n",
    )
    assert kube.reviews == 6
    assert auth("GET", "/metrics", _auth("made-up-x"))[0] == 401 and kube.reviews == 6  # type: ignore[index]
