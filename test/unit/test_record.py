import copy
import pickle
import sys
import threading

import orjson
import pytest

from daemonjob.controller.runtime.transforms import CachedJob, CachedJobMeta, job_transform
from daemonjob.domain.jobs.jobview import JobView, job_view
from daemonjob.machinery.cache.frozen import FrozenDict, freeze, thaw
from daemonjob.machinery.cache.memo import ObjectMemo
from daemonjob.machinery.cache.store import Store, meta_namespace_key
from daemonjob.testing.doubles.builders import daemonjob, job

DJ = daemonjob()

PLAIN = {
    "metadata": {"name": "audit-n1", "namespace": "default", "uid": "u1", "labels": {"a": "b"}},
    "status": {"conditions": []},
}


def cached(**meta: object) -> CachedJob:
    values = {**PLAIN["metadata"], **meta}
    return CachedJob(metadata=CachedJobMeta(**freeze(values)), status=freeze(PLAIN["status"]))


def test_a_record_reads_as_the_mapping_it_was_made_from():
    record = cached()
    assert record == freeze(PLAIN) and freeze(PLAIN) == record  # lists frozen are tuples, as in a FrozenDict
    assert thaw(record) == PLAIN
    assert list(record) == ["metadata", "status"] and len(record) == 2
    assert "spec" not in record and record.get("spec") is None and record.get("spec", 1) == 1
    assert "deletionTimestamp" not in record["metadata"] and record["metadata"].get("deletionTimestamp") is None
    assert dict(record["metadata"].items())["labels"] == {"a": "b"}
    with pytest.raises(KeyError):
        record["spec"]
    with pytest.raises(KeyError):
        record["get"]  # a method's name is no key
    assert record.get("items") is None and "items" not in record


def test_a_record_cannot_be_changed():
    record = cached()
    with pytest.raises(TypeError):
        record["metadata"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        record.metadata = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        del record.status
    with pytest.raises(TypeError):
        CachedJob(kind="Job")
    assert not hasattr(record, "__dict__")


def test_a_key_set_to_none_is_absent_as_the_api_server_leaves_it_out():
    record = cached(deletionTimestamp=None)
    assert record == cached() and "deletionTimestamp" not in record["metadata"]


def test_equal_records_compare_and_hash_equal_and_copies_are_the_record():
    a, b = cached(), cached()
    assert a == b and hash(a) == hash(b)
    assert a != cached(uid="u2")
    assert copy.copy(a) is a and copy.deepcopy(a) is a and freeze(a) is a
    assert pickle.loads(pickle.dumps(a)) == a


def test_a_record_is_a_fraction_of_the_frozen_dicts_it_replaces():
    record = cached(creationTimestamp="2026-11-02T10:00:00Z", ownerReferences=(), annotations=FrozenDict())
    as_dicts = freeze(thaw(record))
    record_size = sys.getsizeof(record) + sys.getsizeof(record["metadata"])
    dict_size = sys.getsizeof(as_dicts) + sys.getsizeof(as_dicts["metadata"])
    assert record_size * 2 < dict_size, (record_size, dict_size)


def test_the_view_is_kept_in_its_own_slot_and_other_values_in_the_memo():
    memo = ObjectMemo()
    record = job_transform(job(DJ, "n1"))
    calls: list[str] = []

    def other(obj: object) -> str:
        calls.append("other")
        return "value"

    view = job_view(record, memo)
    assert isinstance(view, JobView) and view.node == "n1"
    assert job_view(record, memo) is view and record._memo is None  # the slot, not the memo
    assert memo(record, other) == memo(record, other) == "value" and calls == ["other"]
    assert job_view(record, memo) is view


def test_threads_reading_one_view_all_get_an_equal_one():
    memo = ObjectMemo()
    records = [job_transform(job(DJ, f"n{i}")) for i in range(200)]
    seen: list[list[JobView]] = [[] for _ in range(4)]

    def read(out: list[JobView]) -> None:
        out.extend(job_view(r, memo) for r in records)

    threads = [threading.Thread(target=read, args=(out,)) for out in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(out == seen[0] for out in seen)
    assert [v.node for v in seen[0]] == [f"n{i}" for i in range(200)]


def test_a_store_keeps_the_record_itself_and_indexes_it():
    store = Store(indexers={"node": lambda o: [o["metadata"]["annotations"]["daemonjob.io/node"]]})
    record = job_transform(job(DJ, "n1"))
    store.add(record)
    assert store.get(meta_namespace_key(record)) is record
    assert store.by_index("node", "n1") == [record]


def test_a_record_is_serialised_through_thaw():
    record = job_transform(job(DJ, "n1"))
    assert orjson.loads(orjson.dumps(thaw(record))) == thaw(record)


def test_truth_and_length_count_the_keys_set():
    assert len(cached()) == 2 and bool(cached()) and len(cached()["metadata"]) == 4
    assert not CachedJobMeta() and len(CachedJobMeta()) == 0
    assert (CachedJobMeta() or {"fallback": 1}) == {"fallback": 1}
