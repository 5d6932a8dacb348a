"""Helpers shared by the benchmark scripts in this directory.

Kept out of the package: they measure the controller from outside (process stats,
watches that timestamp objects as they appear, Prometheus scrapes) and must not change
what they measure.
"""

from __future__ import annotations

import ctypes
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import orjson
import urllib3
import yaml
from prometheus_client.parser import text_string_to_metric_families

from daemonjob.machinery.client.kube import ApiError, Kube, path_for

ROOT = Path(__file__).resolve().parents[1]
CRD_PATH = ROOT / "manifests" / "crd.yaml"
REPORTS_CRD_PATH = ROOT / "manifests" / "reports-crd.yaml"  # per-node results, recorded by default
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")

T = TypeVar("T")


# -- process statistics -------------------------------------------------------------------
def proc_status_kb(field: str, pid: int | str = "self") -> int:
    """A `kB` field of /proc/PID/status (VmRSS, VmHWM, ...)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def rss_mb(pid: int | str = "self") -> float:
    return proc_status_kb("VmRSS", pid) / 1024


def hwm_mb(pid: int | str = "self") -> float:
    return proc_status_kb("VmHWM", pid) / 1024


def cpu_seconds(pid: int | str = "self") -> float:
    """utime + stime of a process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        # The command name may hold spaces: fields are counted from its closing parenthesis.
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wait_quiet(pids: Mapping[str, int], timeout: float, cores: float = 0.3, window: float = 2.0) -> float:
    """Until the named processes together use under `cores` over `window` seconds; returns
    the seconds waited. A phase that starts while the last one's work is still draining
    (a scheduler queue, the garbage collector) would be measured against that work."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        before = {name: _cpu_or_zero(pid) for name, pid in pids.items()}
        time.sleep(window)
        used = sum(_cpu_or_zero(pid) - before[name] for name, pid in pids.items()) / window
        if used < cores:
            return time.monotonic() - started
        if time.monotonic() > deadline:
            raise TimeoutError(f"the control plane still used {used:.2f} cores after {timeout:.0f}s")


class CpuShares:
    """CPU seconds each named process used since start: where a phase's time went."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self.pids = dict(pids)
        self.start = {name: _cpu_or_zero(pid) for name, pid in self.pids.items()}

    def used(self) -> dict[str, float]:
        return {name: _cpu_or_zero(pid) - self.start[name] for name, pid in self.pids.items()}

    @staticmethod
    def text(used: Mapping[str, float], seconds: float) -> str:
        """`name 1.2s (0.6 cores)` by decreasing share, and the total."""
        parts = [f"{name.removeprefix('kube-')} {v:.1f}s" for name, v in sorted(used.items(), key=lambda kv: -kv[1])]
        total = sum(used.values())
        return ", ".join(parts) + f"; total {total:.1f}s = {total / max(seconds, 1e-9):.2f} cores"


def limit_seconds(used: Mapping[str, float], seconds: float, without: str) -> float:
    """The time the phase would have taken had `without` used no CPU: the others' CPU seconds
    over the cores the whole phase kept busy (the machine is the limit, as when the cores are
    saturated; with idle cores left over this overstates what a cheaper process would gain)."""
    total = sum(used.values())
    cores = total / max(seconds, 1e-9)
    return (total - used.get(without, 0.0)) / max(cores, 1e-9)


def _cpu_or_zero(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except OSError:  # exited: it uses nothing
        return 0.0


def die_with_parent() -> None:
    """preexec_fn: a child killed with us, so an interrupted run leaves nothing behind."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def stop_process(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL after `timeout`."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class PySpy:
    """Optional sampling profile of a process (`py-spy record`) while a block runs."""

    def __init__(self, pid: int, out: Path | None, rate: int = 100, fmt: str = "speedscope"):
        self.pid, self.out, self.rate, self.fmt = pid, out, rate, fmt
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> PySpy:
        if self.out is None:
            return self
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        if not os.path.exists(exe):
            raise SystemExit("--py-spy needs py-spy: pip install py-spy")
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(self.pid),
                "--rate",
                str(self.rate),
                "--format",
                self.fmt,
                "--output",
                str(self.out),
                "--threads",
                "--nonblocking",
                *(["--gil"] if os.environ.get("PY_SPY_GIL") else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        time.sleep(0.5)  # attach before the measured work starts
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        print(f"profile written to {self.out}", file=sys.stderr)


# -- API helpers ---------------------------------------------------------------------------
def tear_down(*started: Any, workdir: Path, ok: bool) -> None:
    """Stop what a run started (None for what it did not get to), in this order; remove the
    work directory of a run that ended well, keep the logs of one that did not."""
    for thing in started:
        if thing is not None:
            thing.stop()
    if ok and not os.environ.get("BENCH_KEEP_LOGS"):
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"logs kept in {workdir}", file=sys.stderr)


def run_concurrently(fn: Callable[[T], Any], items: Iterable[T], threads: int) -> int:
    """Apply `fn` to every item from `threads` threads; the first error is raised."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return sum(1 for _ in pool.map(fn, items))


def create_namespace(kube: Kube, name: str) -> None:
    try:
        kube.create(path_for("v1", "namespaces"), {"metadata": {"name": name}})
    except ApiError as exc:
        if not exc.already_exists:
            raise


def apply_crd(kube: Kube, path: Path = CRD_PATH, timeout: float = 30.0) -> None:
    """Create the CRD and wait until it is Established (its REST endpoint is served)."""
    crd = yaml.safe_load(path.read_text())
    base = path_for("apiextensions.k8s.io/v1", "customresourcedefinitions")
    try:
        kube.create(base, crd)
    except ApiError as exc:
        if not exc.already_exists:
            raise
    name = crd["metadata"]["name"]
    wait_until(
        lambda: any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (kube.get(f"{base}/{name}").get("status") or {}).get("conditions") or ()
        ),
        timeout,
        f"CRD {name} Established",
    )
    group, version = crd["spec"]["group"], crd["spec"]["versions"][0]["name"]
    wait_until(lambda: _served(kube, f"/apis/{group}/{version}"), timeout, f"/apis/{group}/{version} served")
    if path == CRD_PATH:
        apply_crd(kube, REPORTS_CRD_PATH, timeout)


def _served(kube: Kube, path: str) -> bool:
    try:
        kube.get(path)
        return True
    except ApiError:
        return False


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> float:
    """Poll `predicate`; returns the monotonic time it first held."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def condition_true(obj: Mapping[str, Any], type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or ()
    )


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """A plain HTTP GET (the controller's metrics and probe endpoints)."""
    r = _HTTP.request("GET", url, timeout=timeout, retries=False)
    return r.status, r.data


_HTTP = urllib3.PoolManager()


# -- watching objects appear ---------------------------------------------------------------
class ObjectWatch:
    """Watches a collection from "now" and timestamps every object's first appearance.

    Events are timestamped by a thread of their own as they arrive, so waiting for "N
    objects exist" is exact to the watch's delivery latency instead of to a poll interval,
    and costs one request instead of a list per poll. `group` maps an object to a group key
    (e.g. its node) so that one watch can serve per-group waits.
    """

    def __init__(
        self,
        kube: Kube,
        path: str,
        *,
        label_selector: str | None = None,
        group: Callable[[Mapping[str, Any]], str | None] | None = None,
    ):
        self.kube, self.path, self.group = kube, path, group
        self.params: dict[str, Any] = {"labelSelector": label_selector} if label_selector else {}
        self.first_seen: dict[str, float] = {}  # name -> monotonic time
        self.live: set[str] = set()
        self.groups: dict[str, set[str]] = {}
        self.error: BaseException | None = None
        self._cond = threading.Condition()
        self._stopped = False
        self._stream: Any = None
        self._thread = threading.Thread(target=self._run, name=f"watch-{path}", daemon=True)

    def start(self, include_existing: bool = True) -> ObjectWatch:
        """Watch from now. Objects that already exist count as seen at start (so only later
        ones are timed), or, without `include_existing`, are not tracked at all (cheaper)."""
        page = self.kube.get(self.path, limit=500 if include_existing else 1, **self.params)
        now = time.monotonic()
        while include_existing:
            for obj in page.get("items") or ():
                self._record("ADDED", obj, now)
            cont = page["metadata"].get("continue")
            if not cont:
                break
            page = self.kube.get(self.path, limit=500, **{"continue": cont}, **self.params)
        self.rv = page["metadata"]["resourceVersion"]
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._stream is not None:
            self._stream.close()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stopped:
            try:
                params = {
                    **self.params,
                    "resourceVersion": self.rv,
                    "allowWatchBookmarks": True,
                    "timeoutSeconds": 1800,
                }
                self._stream = self.kube.watch(self.path, params, read_timeout=1830)
                if self._stopped:
                    self._stream.close()
                    return
                for event in self._stream:
                    now = time.monotonic()
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise ApiError(int(obj.get("code") or 500), obj.get("reason", ""), obj.get("message", ""))
                    self.rv = obj.get("metadata", {}).get("resourceVersion") or self.rv
                    if event.get("type") != "BOOKMARK":
                        self._record(event["type"], obj, now)
            except (urllib3.exceptions.HTTPError, OSError, ValueError):
                if self._stopped:
                    return
                time.sleep(0.2)  # dropped connection: re-watch from the last resourceVersion
            except Exception as exc:
                if not self._stopped:
                    with self._cond:
                        self.error = exc
                        self._cond.notify_all()
                return

    def _record(self, kind: str, obj: Mapping[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        key = self.group(obj) if self.group else None
        with self._cond:
            if kind == "DELETED":
                self.live.discard(name)
            else:
                self.first_seen.setdefault(name, now)
                self.live.add(name)
                if key is not None:
                    self.groups.setdefault(key, set()).add(name)
            self._cond.notify_all()

    def wait(self, predicate: Callable[[ObjectWatch], bool], timeout: float, what: str) -> float:
        """Block until `predicate(self)` holds; returns the monotonic time it first held."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                if self.error is not None:
                    raise RuntimeError(f"watch of {self.path} failed: {self.error}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
                self._cond.wait(min(left, 1.0))
            return time.monotonic()

    def time_of_nth(self, n: int, names: Iterable[str] | None = None) -> float:
        """When the n-th object (of `names`, default all) was first seen."""
        with self._cond:
            times = sorted(
                self.first_seen[x] for x in (names if names is not None else self.first_seen) if x in self.first_seen
            )
        return times[n - 1]


# -- Prometheus ----------------------------------------------------------------------------
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample of a /metrics page, keyed by (name, sorted labels)."""
    status, body = http_get(url)
    if status != 200:
        raise RuntimeError(f"GET {url}: HTTP {status}")
    return parse_samples(body.decode())


def api_requests(samples: Mapping[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[tuple[str, str], float]:
    """daemonjob_api_requests_total summed over codes: (verb, resource) -> count."""
    out: dict[tuple[str, str], float] = {}
    for (name, labels), value in samples.items():
        if name == "daemonjob_api_requests_total":
            d = dict(labels)
            k = (d.get("verb", ""), d.get("resource", ""))
            out[k] = out.get(k, 0.0) + value
    return out


def request_delta(
    before: Mapping[tuple[str, str], float], after: Mapping[tuple[str, str], float]
) -> dict[tuple[str, str], float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


def watch_churn(
    before: Mapping[tuple[str, tuple[tuple[str, str], ...]], float],
    after: Mapping[tuple[str, tuple[tuple[str, str], ...]], float],
) -> str:
    """The controller's watch restarts (by informer and cause) and relists between two scrapes."""
    parts = []
    for (name, labels), value in sorted(after.items()):
        delta = value - before.get((name, labels), 0.0)
        if delta > 0 and name in ("daemonjob_watch_restarts_total", "daemonjob_relists_total"):
            what = "relists" if name == "daemonjob_relists_total" else "watch restarts"
            parts.append(f"{what} {' '.join(v for _, v in labels)} {delta:.0f}")
    return ", ".join(parts) or "no watch restarts or relists"


def parse_samples(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def apiserver_time(samples: Samples) -> dict[tuple[str, str], tuple[float, float]]:
    """The API server's own apiserver_request_duration_seconds: (verb, resource) -> (requests,
    seconds), long-running watches left out (their duration is how long they stayed open)."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for (name, labels), value in samples.items():
        kind = name.removeprefix("apiserver_request_duration_seconds_")
        if kind not in ("count", "sum"):
            continue
        d = dict(labels)
        if d.get("verb") in ("WATCH", "CONNECT"):
            continue
        sub = f"/{d['subresource']}" if d.get("subresource") else ""
        k = (d.get("verb", "").lower(), d.get("resource", "") + sub)
        count, seconds = out.get(k, (0.0, 0.0))
        out[k] = (count + value, seconds) if kind == "count" else (count, seconds + value)
    return out


def apiserver_time_text(
    before: Mapping[tuple[str, str], tuple[float, float]],
    after: Mapping[tuple[str, str], tuple[float, float]],
    top: int = 8,
) -> str:
    """`verb resource: N in S s (M ms each)` for the requests that took the API server longest."""
    delta = {
        k: (c - before.get(k, (0.0, 0.0))[0], s - before.get(k, (0.0, 0.0))[1])
        for k, (c, s) in after.items()
        if c - before.get(k, (0.0, 0.0))[0] > 0
    }
    parts = [
        f"{verb} {resource}: {count:.0f} in {secs:.1f} s ({1000 * secs / count:.0f} ms each)"
        for (verb, resource), (count, secs) in sorted(delta.items(), key=lambda kv: -kv[1][1])[:top]
    ]
    return "; ".join(parts) or "none"


def sample_value(samples: Mapping[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


# -- statistics ----------------------------------------------------------------------------
def percentile(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100): with 20 samples p99 is the maximum."""
    xs = sorted(values)
    if not xs:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(xs)))
    return xs[rank - 1]


def dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()
