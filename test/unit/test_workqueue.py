import threading
import time
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry

from daemonjob.machinery.process.clock import FakeClock
from daemonjob.machinery.queue.queuemetrics import PrometheusMetricsProvider
from daemonjob.machinery.queue.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)
from daemonjob.machinery.queue.workqueue import DelayingQueue, Queue, RateLimitingQueue

# Upper bound for anything expected to happen; only reached when a test fails.
TIMEOUT = 5.0
# How long a negative check ("this worker stays blocked") watches.
SHORT = 0.02


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queues() -> Iterator[list[Queue]]:
    made: list[Queue] = []
    yield made
    for q in made:
        q.shutdown()


@pytest.fixture
def make(queues: list[Queue]) -> Callable[..., Queue]:
    def _make(cls: type[Queue] = Queue, *args, **kwargs) -> Queue:
        q = cls(*args, **kwargs)
        queues.append(q)
        return q

    return _make


class Getter:
    """Runs queue.get() on a thread so a test can see whether it is still blocked."""

    def __init__(self, q: Queue) -> None:
        self.result: tuple | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(q,), daemon=True)
        self.thread.start()

    def _run(self, q: Queue) -> None:
        self.result = q.get()
        self.done.set()

    def wait(self) -> tuple:
        assert self.done.wait(TIMEOUT), "get() did not return"
        assert self.result is not None
        return self.result


def wait_for(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


PROBE = "probe"


def assert_nothing_due_within(q: DelayingQueue, clock: FakeClock, seconds: float) -> None:
    """No delayed key fires in the next `seconds`: a probe due at their end comes out first.

    The waiting thread moves due keys in deadline order, so anything still waiting
    with an earlier deadline would reach the queue before the probe.
    """
    q.add_after(PROBE, seconds)
    clock.step(seconds)
    assert Getter(q).wait() == (PROBE, False)
    q.done(PROBE)


# --- Queue ---


def test_fifo_and_duplicates_collapse(make):
    q = make()
    for key in ["a", "b", "a", "c", "b"]:
        q.add(key)
    assert len(q) == 3
    assert [q.get()[0] for _ in range(3)] == ["a", "b", "c"]
    assert len(q) == 0


def test_key_in_processing_goes_to_no_other_worker_and_requeues_once(make):
    q = make()
    q.add("a")
    assert q.get() == ("a", False)
    q.add("a")
    q.add("a")
    assert len(q) == 0
    second = Getter(q)
    assert not second.done.wait(SHORT)
    q.done("a")
    assert second.wait() == ("a", False)
    q.done("a")
    assert len(q) == 0
    q.add("b")
    assert q.get() == ("b", False)


def test_done_without_re_add_does_not_requeue(make):
    q = make()
    q.add("a")
    q.get()
    q.done("a")
    assert len(q) == 0


def test_other_keys_flow_while_one_is_processing(make):
    q = make()
    q.add("a")
    q.add("b")
    assert q.get()[0] == "a"
    q.add("a")
    assert q.get()[0] == "b"
    assert len(q) == 0


def test_shutdown_wakes_every_blocked_getter(make):
    q = make()
    getters = [Getter(q) for _ in range(5)]
    time.sleep(SHORT)
    assert not any(g.done.is_set() for g in getters)
    q.shutdown()
    assert [g.wait() for g in getters] == [(None, True)] * 5
    q.add("late")
    assert q.get() == (None, True)


def test_shutdown_hands_out_remaining_keys_then_stops_and_ignores_adds(make):
    q = make()
    q.add("a")
    q.shutdown()
    q.add("b")
    assert q.get() == ("a", False)
    assert q.get() == (None, True)


def test_a_key_re_added_while_processing_survives_shutdown(make):
    q = make()
    q.add("a")
    q.get()
    q.add("a")  # accepted before shutdown: must still be handed out once
    q.shutdown()
    q.done("a")
    assert q.get() == ("a", False)
    q.done("a")
    assert q.get() == (None, True)


def test_many_workers_never_process_a_key_concurrently(make):
    q = make()
    active: set[str] = set()
    overlaps: list[str] = []
    processed: list[str] = []
    lock = threading.Lock()

    def worker():
        while True:
            key, stop = q.get()
            if stop:
                return
            with lock:
                if key in active:
                    overlaps.append(key)
                active.add(key)
            time.sleep(0.0005)
            with lock:
                active.discard(key)
                processed.append(key)
            q.done(key)

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(4)]
    for w in workers:
        w.start()
    for i in range(300):
        q.add(f"k{i % 5}")
    wait_for(lambda: len(q) == 0 and not active)
    q.shutdown()
    for w in workers:
        w.join(TIMEOUT)
    assert overlaps == []
    assert set(processed) == {f"k{i}" for i in range(5)}


# --- DelayingQueue ---


def test_add_after_waits_for_the_clock_and_orders_by_deadline(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add_after("c", 3)
    q.add_after("a", 1)
    q.add_after("b", 2)
    clock.block_until_waiters(1)
    clock.step(0.5)
    assert len(q) == 0
    clock.step(0.5)
    assert q.get() == ("a", False)
    clock.step(2)
    assert q.get() == ("b", False)
    assert q.get() == ("c", False)
    assert_nothing_due_within(q, clock, 100)


def test_add_after_zero_adds_immediately(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert len(q) == 2


def test_earlier_deadline_wins_when_it_comes_second(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 10)
    q.add_after("a", 1)
    clock.step(1)
    assert q.get() == ("a", False)
    q.done("a")
    assert_nothing_due_within(q, clock, 20)  # the 10s entry was replaced, not kept


def test_earlier_deadline_wins_when_it_comes_first(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 1)
    q.add_after("a", 10)
    clock.block_until_waiters(1)
    clock.step(1)
    assert q.get() == ("a", False)
    q.done("a")
    assert_nothing_due_within(q, clock, 20)  # the 10s add was dropped


def test_a_new_earliest_deadline_wakes_the_waiting_thread(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add_after("late", 100)
    clock.block_until_waiters(1)
    q.add_after("soon", 1)
    clock.step(1)
    assert q.get() == ("soon", False)
    clock.step(99)
    assert q.get() == ("late", False)


def test_add_soon_joins_a_pass_queued_or_coming_within_its_delay(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add("queued")
    q.add_soon("queued", 1)  # queued: that pass starts after now
    q.add_after("coming", 0.25)
    q.add_soon("coming", 1)  # comes within the delay: that pass answers it
    clock.block_until_waiters(1)
    clock.step(0.25)
    assert {q.get()[0], q.get()[0]} == {"queued", "coming"}
    q.done("queued")
    q.done("coming")
    assert_nothing_due_within(q, clock, 20)  # one pass each, none more


def test_add_soon_waits_its_delay_or_brings_a_later_pass_forward(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add_soon("idle", 1)
    q.add_after("later", 10)
    q.add_soon("later", 1)
    clock.block_until_waiters(1)
    assert len(q) == 0
    clock.step(1)
    assert {q.get()[0], q.get()[0]} == {"idle", "later"}
    q.done("idle")
    q.done("later")
    assert_nothing_due_within(q, clock, 20)


def test_add_soon_while_processing_makes_a_pass_after_it(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add("a")
    assert q.get() == ("a", False)
    q.add_soon("a", 1)  # the pass under way may have read before the change
    clock.block_until_waiters(1)
    clock.step(1)
    wait_for(lambda: q.due_waiting() == 0)
    q.done("a")
    assert q.get() == ("a", False)


def test_due_waiting_counts_the_keys_come_due_until_the_waiting_thread_moves_them(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 1)
    q.add_after("b", 5)
    q.add_after("a", 0.5)  # an earlier deadline replaces the first: counted once
    assert q.due_waiting() == 0  # none due yet
    wait_for(lambda: q.due_waiting() == 0 and len(q) == 0)
    clock.step(1)
    wait_for(lambda: q.due_waiting() == 0)  # moved: in the queue now
    assert len(q) == 1 and q.get() == ("a", False)
    clock.step(4)
    wait_for(lambda: q.due_waiting() == 0)
    assert len(q) == 1


def test_due_waiting_counts_what_came_due_and_was_not_moved(make, clock):
    q = make(DelayingQueue, "stalled", clock=clock)
    q.add_after("a", 1)
    q.add_after("b", 5)
    q.add_after("a", 0.5)
    q.shutdown()  # its waiting thread ends: nothing is moved any more
    wait_for(lambda: not any(t.name == "workqueue-delay-stalled" for t in threading.enumerate()))
    assert q.due_waiting() == 0
    clock.step(1)
    assert q.due_waiting() == 1  # "a" once: its earlier deadline replaced the first
    clock.step(4)
    assert q.due_waiting() == 2


def test_delayed_key_while_processing_is_requeued_on_done(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add("a")
    q.get()
    q.add_after("a", 1)
    q.add_after(PROBE, 1)  # same deadline, added later: moved after "a"
    clock.step(1)
    assert q.get() == (PROBE, False)  # "a" was due first but is still being processed
    assert len(q) == 0
    q.done("a")
    assert q.get() == ("a", False)


def test_shutdown_stops_the_waiting_thread_and_delayed_adds(make, clock):
    q = make(DelayingQueue, clock=clock)
    q.add_after("a", 1)
    q.shutdown()
    q._waiting_thread.join(TIMEOUT)
    assert not q._waiting_thread.is_alive()
    q.add_after("b", 0)
    clock.step(5)
    assert q.get() == (None, True)


# --- rate limiters ---


def test_exponential_backoff_doubles_until_the_cap_and_forget_resets():
    rl = ItemExponentialFailureRateLimiter(base=0.005, cap=1000.0)
    assert [rl.when("a") for _ in range(5)] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert rl.num_requeues("a") == 5
    assert rl.when("b") == 0.005  # per key
    for _ in range(30):
        last = rl.when("a")
    assert last == 1000.0
    assert rl.num_requeues("a") == 35
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert rl.when("a") == 0.005


def test_exponential_backoff_never_overflows():
    rl = ItemExponentialFailureRateLimiter(base=1.0, cap=60.0)
    for _ in range(2000):
        delay = rl.when("a")
    assert delay == 60.0


def test_exponential_defaults():
    rl = ItemExponentialFailureRateLimiter()
    assert rl.when("a") == 0.005
    for _ in range(40):
        delay = rl.when("a")
    assert delay == 1000.0


def test_bucket_limiter_is_overall_and_keeps_no_per_key_state(clock):
    rl = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [rl.when(f"k{i}") for i in range(100)] == [0.0] * 100
    assert rl.when("x") == pytest.approx(0.1)
    assert rl.when("y") == pytest.approx(0.2)
    assert rl.num_requeues("x") == 0
    rl.forget("x")
    clock.step(10)
    assert rl.when("z") == 0.0


def test_max_of_takes_the_strictest_and_feeds_all(clock):
    exp = ItemExponentialFailureRateLimiter(base=1.0, cap=100.0)
    bucket = BucketRateLimiter(qps=1, burst=2, clock=clock)
    rl = MaxOfRateLimiter(exp, bucket)
    assert rl.when("a") == 1.0  # exp 1, bucket 0
    assert rl.when("a") == 2.0  # exp 2, bucket 0
    assert rl.when("b") == 1.0  # exp 1, bucket 1
    assert rl.when("c") == pytest.approx(2.0)  # exp 1, bucket 2
    assert rl.num_requeues("a") == 2
    rl.forget("a")
    assert exp.num_requeues("a") == 0
    with pytest.raises(ValueError):
        MaxOfRateLimiter()


def test_default_controller_rate_limiter(clock):
    rl = default_controller_rate_limiter(clock)
    assert [rl.when("a") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])
    for i in range(97):
        assert rl.when(f"k{i}") == 0.005
    # The bucket (burst 100, 10 qps) now dominates the per-key backoff.
    assert rl.when("fresh") == pytest.approx(0.1)


# --- RateLimitingQueue ---


def test_rate_limited_add_uses_the_limiter_delay(make, clock):
    q = make(RateLimitingQueue, ItemExponentialFailureRateLimiter(1.0, 100.0), clock=clock)
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 1
    clock.block_until_waiters(1)
    clock.step(0.999)
    assert len(q) == 0
    clock.step(0.001)
    assert q.get() == ("a", False)
    q.done("a")
    q.add_rate_limited("a")
    clock.step(1)
    assert len(q) == 0  # second failure waits 2s
    clock.step(1)
    assert q.get() == ("a", False)
    q.forget("a")
    assert q.num_requeues("a") == 0


def test_rate_limiting_queue_defaults(make, clock):
    q = make(RateLimitingQueue, clock=clock)
    q.add_rate_limited("a")
    clock.step(0.005)
    assert q.get() == ("a", False)


# --- metrics ---


def sample(registry: CollectorRegistry, metric: str, name: str) -> float | None:
    return registry.get_sample_value(metric, {"name": name})


def test_prometheus_metrics(make, clock):
    registry = CollectorRegistry()
    provider = PrometheusMetricsProvider(registry)
    q = make(DelayingQueue, "jobs", clock=clock, metrics_provider=provider)
    q.add("a")
    q.add("b")
    q.add("a")
    assert sample(registry, "workqueue_adds_total", "jobs") == 2
    assert sample(registry, "workqueue_depth", "jobs") == 2

    clock.step(2)
    assert q.get()[0] == "a"
    assert sample(registry, "workqueue_depth", "jobs") == 1
    assert sample(registry, "workqueue_queue_duration_seconds_count", "jobs") == 1
    assert sample(registry, "workqueue_queue_duration_seconds_sum", "jobs") == 2.0

    clock.step(3)
    wait_for(lambda: sample(registry, "workqueue_unfinished_work_seconds", "jobs") == 3.0)
    assert sample(registry, "workqueue_longest_running_processor_seconds", "jobs") == 3.0
    q.done("a")
    assert sample(registry, "workqueue_work_duration_seconds_count", "jobs") == 1
    assert sample(registry, "workqueue_work_duration_seconds_sum", "jobs") == 3.0
    clock.step(1)
    wait_for(lambda: sample(registry, "workqueue_unfinished_work_seconds", "jobs") == 0.0)

    q.add_after("c", 1)
    q.add_after("d", 0)
    assert sample(registry, "workqueue_retries_total", "jobs") == 2


def test_two_named_queues_share_a_registry(make, clock):
    registry = CollectorRegistry()
    a = make(Queue, "a", clock=clock, metrics_provider=PrometheusMetricsProvider(registry))
    b = make(Queue, "b", clock=clock, metrics_provider=PrometheusMetricsProvider(registry))
    a.add("x")
    b.add("x")
    b.add("y")
    assert sample(registry, "workqueue_adds_total", "a") == 1
    assert sample(registry, "workqueue_adds_total", "b") == 2


def test_unnamed_queue_records_nothing(make, clock):
    registry = CollectorRegistry()
    q = make(Queue, clock=clock, metrics_provider=PrometheusMetricsProvider(registry))
    q.add("x")
    assert registry.get_sample_value("workqueue_adds_total", {"name": ""}) is None


# -- urgent keys -----------------------------------------------------------------------------
def _drain(q: Queue) -> list[object]:
    out = []
    while len(q):
        key, _ = q.get()
        out.append(key)
        q.done(key)
    return out


def test_urgent_keys_are_handed_out_first_in_their_own_order(make: Callable[..., Queue]) -> None:
    q = make()
    for key in ("a", "b"):
        q.add(key)
    q.add("u1", urgent=True)
    q.add("c")
    q.add("u2", urgent=True)
    assert _drain(q) == ["u1", "u2", "a", "b", "c"]


def test_urgent_pending_says_whether_urgent_keys_wait_or_are_being_processed(make: Callable[..., Queue]) -> None:
    q = make()
    q.add("a")
    assert not q.urgent_pending()
    q.add("u", urgent=True)
    assert q.urgent_pending()
    key, _ = q.get()
    assert key == "u" and q.urgent_pending()  # handed out, its pass still running
    q.done("u")
    assert not q.urgent_pending()
    key, _ = q.get()
    assert key == "a" and not q.urgent_pending()  # a plain key being processed is no urgent work
    q.done("a")


def test_urgent_within_counts_a_burst_until_it_has_been_quiet_that_long(
    make: Callable[..., Queue], clock: FakeClock
) -> None:
    q = make(Queue, clock=clock)
    assert not q.urgent_within(1.0)  # none ever
    q.add("u", urgent=True)
    assert q.urgent_within(1.0)
    key, _ = q.get()
    q.done(key)
    assert q.urgent_within(1.0) and not q.urgent_pending()  # just ended: the burst may go on
    clock.step(0.6)
    q.add("a")  # plain work neither starts nor extends it
    key, _ = q.get()
    q.done(key)
    assert q.urgent_within(1.0)
    clock.step(0.5)
    assert not q.urgent_within(1.0)


def test_an_urgent_add_moves_a_waiting_key_ahead_once(make: Callable[..., Queue]) -> None:
    q = make()
    for key in ("a", "b", "c"):
        q.add(key)
    q.add("c", urgent=True)
    q.add("c", urgent=True)
    q.add("c")  # a plain add does not move it back
    assert len(q) == 3
    assert _drain(q) == ["c", "a", "b"]


def test_an_urgent_add_while_processing_requeues_it_ahead(make: Callable[..., Queue]) -> None:
    q = make()
    q.add("busy")
    key, _ = q.get()
    q.add("a")
    q.add("busy", urgent=True)
    assert len(q) == 1  # never handed to a second worker meanwhile
    q.done(key)
    assert _drain(q) == ["busy", "a"]


def test_a_key_urgent_once_is_plain_when_added_again(make: Callable[..., Queue]) -> None:
    q = make()
    q.add("k", urgent=True)
    assert _drain(q) == ["k"]
    q.add("a")
    q.add("k")
    assert _drain(q) == ["a", "k"]


def test_shutdown_hands_out_urgent_and_plain_keys_before_ending(make: Callable[..., Queue]) -> None:
    q = make()
    q.add("a")
    q.add("u", urgent=True)
    q.shutdown()
    assert [q.get()[0], q.get()[0]] == ["u", "a"]
    assert q.get() == (None, True)
