"""CPU per Job watch event: a rollout's events through the informer loop and the controller's handlers.

`make bench NODES=5000` shows the Job informer's thread as the largest share of the
controller's CPU until 5000 Jobs, but a whole run moves by a third with the machine's speed.
This replays the events of a rollout over N nodes (each Job ADDED as the API server sends
it, managedFields and pod template included, then MODIFIED when its pod starts) through the
real `Informer` loop into a Controller on fake caches (the act layer's test bed, with the
result recorder), in this process, and prints the CPU per event with the generic decode
and with the Job watch's own, measured in turns so that both see the same machine.
"""

from __future__ import annotations

import argparse
import copy
import gc
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from daemonjob.controller.runtime.informers import JOB_INDEXERS
from daemonjob.controller.runtime.jobdecode import decode_job_event
from daemonjob.controller.runtime.transforms import job_transform
from daemonjob.machinery.cache.informer import Informer
from daemonjob.testing.doubles.actbed import ActBed
from daemonjob.testing.doubles.builders import daemonjob
from daemonjob.testing.doubles.nodefakes import NullResultStore
from daemonjob.testing.sim.simjobs import CREATED, as_served


def rollout_events(nodes: int) -> tuple[ActBed, list[bytes]]:
    """A bed whose DaemonJob created a Job on each node, and the watch lines of those Jobs."""
    bed = ActBed.start(result_store=NullResultStore())
    bed.add_nodes(nodes)
    bed.add_dj(daemonjob())
    while len(bed.control.of("create")) < nodes:
        bed.ctl.reconcile(bed.key)
        bed.control.deliver()
    jobs = list(bed.control.objects.values())
    lines = []
    for i, (kind, status) in enumerate(
        [("ADDED", {})] * len(jobs) + [("MODIFIED", {"startTime": CREATED, "active": 1})] * len(jobs)
    ):
        job = copy.deepcopy(jobs[i % len(jobs)])
        as_served(job, 1000 + i, job["metadata"].get("uid") or str(uuid.uuid4()))
        job["status"] = status
        lines.append(orjson.dumps({"type": kind, "object": job}))
    return bed, lines


def replay(bed: ActBed, lines: list[bytes], decode: Callable[[bytes], Any]) -> float:
    """CPU seconds of the informer loop over `lines`, into an empty cache."""
    for key in bed.jobs.store.keys():
        bed.jobs.store.delete(key)

    class Kube:
        def watch(self, path: str, params: Any, read_timeout: float, decode: Any = None) -> Iterator[Any]:
            return (decode_line(line) for line in lines)

    decode_line = decode
    informer = Informer(Kube(), "batch/v1", "jobs", transform=job_transform, indexers=JOB_INDEXERS)  # type: ignore[arg-type]
    informer.store = bed.jobs.store
    informer.handlers = bed.jobs.handlers
    gc.collect()
    start = time.process_time()
    informer._watch()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--turns", type=int, default=5, help="turns of each decode; the best of each is printed")
    args = parser.parse_args()
    bed, lines = rollout_events(args.nodes)
    try:
        print(f"{len(lines)} events, {sum(map(len, lines)) // len(lines)} bytes each on average")
        best = {"generic": float("inf"), "typed": float("inf")}
        for _ in range(args.turns):
            best["generic"] = min(best["generic"], replay(bed, lines, orjson.loads))
            best["typed"] = min(best["typed"], replay(bed, lines, decode_job_event))
        for name, seconds in best.items():
            print(f"{name}_us_per_event={seconds / len(lines) * 1e6:.1f}")
        print(f"typed/generic={best['typed'] / best['generic']:.2f}")
    finally:
        bed.stop()


if __name__ == "__main__":
    main()
