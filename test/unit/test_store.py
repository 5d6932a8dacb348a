import copy
import json
import pickle
import threading

import orjson
import pytest

from daemonjob.machinery.cache.frozen import FrozenDict, freeze, thaw
from daemonjob.machinery.cache.memo import MEMO_CAPACITY, object_memo
from daemonjob.machinery.cache.store import Store, Tagged, meta_namespace_key


def job(name: str, owner: str | None = None, ns: str = "ops", node: str = "n1") -> dict:
    meta: dict = {"name": name, "namespace": ns, "annotations": {"daemonjob.io/node": node}}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True}]
    return {"metadata": meta, "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}


def by_owner(obj) -> list[str]:
    return [r["uid"] for r in obj["metadata"].get("ownerReferences", ()) if r.get("controller")]


def by_node(obj) -> list[str]:
    return [obj["metadata"]["annotations"]["daemonjob.io/node"]]


def by_namespace(obj) -> list[str]:
    return [obj["metadata"].get("namespace") or ""]


def keys_of(objs) -> list[str]:
    return [meta_namespace_key(o) for o in objs]


@pytest.fixture
def store() -> Store:
    return Store({"owner": by_owner, "node": by_node, "namespace": by_namespace})


# --- keys ---


def test_keys():
    assert meta_namespace_key({"metadata": {"name": "j", "namespace": "ops"}}) == "ops/j"
    assert meta_namespace_key({"metadata": {"name": "node-1"}}) == "node-1"
    assert meta_namespace_key({"metadata": {"name": "node-1", "namespace": ""}}) == "node-1"
    with pytest.raises(ValueError):
        meta_namespace_key({"metadata": {}})


# --- freezing ---


def test_frozen_objects_reject_mutation():
    obj = freeze({"a": {"b": [1, {"c": 2}]}})
    assert isinstance(obj, dict) and isinstance(obj["a"], FrozenDict)
    assert obj["a"]["b"] == (1, {"c": 2})
    mutations = [
        lambda: obj.__setitem__("x", 1),
        lambda: obj.__delitem__("a"),
        lambda: obj.update(x=1),
        lambda: obj.setdefault("x", 1),
        lambda: obj.pop("a"),
        lambda: obj.popitem(),
        lambda: obj.clear(),
        lambda: obj["a"].__setitem__("b", None),
        lambda: obj["a"]["b"][1].__setitem__("c", 3),
    ]
    for mutate in mutations:
        with pytest.raises(TypeError):
            mutate()
    with pytest.raises(TypeError):
        obj["a"]["b"][0] = 5  # lists became tuples
    with pytest.raises(AttributeError):
        obj["a"]["b"].append(3)
    inner = obj["a"]
    with pytest.raises(TypeError):
        inner |= {"x": 1}
    obj.__init__({"x": 1})
    assert obj == freeze({"a": {"b": [1, {"c": 2}]}})


def test_freeze_is_deep_and_idempotent_and_leaves_the_input_alone():
    raw = {"a": [1, [2, {"b": [3]}]]}
    frozen = freeze(raw)
    assert frozen == {"a": (1, (2, {"b": (3,)}))}
    assert freeze(frozen) is frozen
    assert FrozenDict({"x": [1]})["x"] == (1,)
    raw["a"].append(9)
    assert len(frozen["a"]) == 2


def test_thaw_gives_an_independent_mutable_copy():
    frozen = freeze({"a": {"b": [1, {"c": 2}]}})
    plain = thaw(frozen)
    assert type(plain) is dict and type(plain["a"]) is dict and type(plain["a"]["b"]) is list
    assert type(plain["a"]["b"][1]) is dict
    plain["a"]["b"][1]["c"] = 99
    plain["new"] = 1
    assert frozen["a"]["b"][1]["c"] == 2 and "new" not in frozen
    assert plain == {"a": {"b": [1, {"c": 99}]}, "new": 1}


def test_orjson_and_json_serialize_frozen_objects():
    raw = {"metadata": {"name": "j", "labels": {"a": "b"}}, "items": [1, {"x": [True, None]}]}
    frozen = freeze(raw)
    assert orjson.dumps(frozen) == orjson.dumps(raw)
    assert orjson.loads(orjson.dumps(frozen)) == raw
    assert json.loads(json.dumps(frozen)) == raw


def test_copy_pickle_and_hash():
    frozen = freeze({"a": [1, {"b": 2}]})
    assert copy.copy(frozen) is frozen
    assert copy.deepcopy(frozen) is frozen
    assert copy.deepcopy({"wrap": frozen})["wrap"] == frozen
    restored = pickle.loads(pickle.dumps(frozen))
    assert restored == frozen and type(restored) is FrozenDict
    assert type(restored["a"][1]) is FrozenDict
    with pytest.raises(TypeError):
        restored["x"] = 1
    assert hash(frozen) == hash(freeze({"a": [1, {"b": 2}]}))
    assert len({frozen, freeze({"a": [1, {"b": 2}]})}) == 1
    assert FrozenDict.fromkeys(["a", "b"], [1]) == {"a": (1,), "b": (1,)}


def test_derived_values_are_computed_once_per_frozen_object():
    calls: list[str] = []

    def name_of(obj) -> str:
        calls.append(obj["metadata"]["name"])
        return obj["metadata"]["name"].upper()

    v1 = freeze(job("a"))
    assert object_memo(v1, name_of) == "A" and object_memo(v1, name_of) == "A"
    assert calls == ["a"]
    v2 = freeze(job("b"))  # a new version is a new object with its own values
    assert object_memo(v2, name_of) == "B" and calls == ["a", "b"]
    assert object_memo(v1, len) == 2 and object_memo(v1, name_of) == "A" and calls == ["a", "b"]
    plain = job("c")  # mutable: never cached
    assert object_memo(plain, name_of) == "C" and object_memo(plain, name_of) == "C"
    assert calls == ["a", "b", "c", "c"]
    assert object_memo(v1, name_of) == "A" and v1 == freeze(job("a"))  # the memo is not content
    assert pickle.loads(pickle.dumps(v1)) == v1


def test_derived_values_per_object_are_bounded():
    obj = freeze(job("a"))
    for i in range(MEMO_CAPACITY * 3):
        assert object_memo(obj, len, key=("k", i)) == 2
    assert len(obj._memo) <= MEMO_CAPACITY
    assert object_memo(obj, lambda o: "again", key=("k", 0)) == "again"  # recomputed after the reset


# --- store ---


def test_add_get_list_keys_len(store):
    assert store.add(job("a", "u1")) is None
    store.add(job("b", "u1", ns="other"))
    assert len(store) == 2
    assert set(store.keys()) == {"ops/a", "other/b"}
    assert {o["metadata"]["name"] for o in store.list()} == {"a", "b"}
    assert store.get("ops/a")["metadata"]["name"] == "a"
    assert store.get("ops/missing") is None
    assert "ops/a" in store


def test_reads_cannot_mutate_the_cache(store):
    raw = job("a", "u1")
    store.add(raw)
    raw["metadata"]["name"] = "changed"  # the caller's copy is not the cached one
    got = store.get("ops/a")
    assert got["metadata"]["name"] == "a"
    with pytest.raises(TypeError):
        got["metadata"]["name"] = "x"
    with pytest.raises(TypeError):
        store.list()[0]["spec"].clear()
    # Reads share one object instead of copying.
    assert store.get("ops/a") is got


def test_update_returns_old_object_and_moves_index_entries(store):
    store.add(job("a", "u1", node="n1"))
    store.add(job("b", "u1", node="n1"))
    old = store.update(job("a", "u2", node="n2"))
    assert old is not None and by_owner(old) == ["u1"]
    assert keys_of(store.by_index("owner", "u1")) == ["ops/b"]
    assert keys_of(store.by_index("owner", "u2")) == ["ops/a"]
    assert keys_of(store.by_index("node", "n1")) == ["ops/b"]
    assert keys_of(store.by_index("node", "n2")) == ["ops/a"]


def test_an_update_keeps_one_key_object_for_the_items_and_the_indexes(store):
    """Every event brings the key as a string of its own: an entry left in place keeps the
    first, so the cache holds one copy of each key however often an object changes."""
    store.add(job("a", "u1", node="n1"))
    for _ in range(3):
        store.update(job("a", "u1", node="n1"))
    store.update(job("a", "u2", node="n1"))  # its owner changed, its node did not
    (key,) = store._items
    for name in ("owner", "node", "namespace"):
        for entries in store._indices[name].values():
            (entry,) = entries
            if name != "owner":
                assert entry is key, name
    assert keys_of(store.by_index("owner", "u2")) == ["ops/a"] and store.by_index("owner", "u1") == []


def test_delete_by_object_or_key_cleans_indexes(store):
    store.add(job("a", "u1"))
    store.add(job("b", "u1"))
    removed = store.delete(job("a", "u1"))
    assert removed is not None and removed["metadata"]["name"] == "a"
    assert keys_of(store.by_index("owner", "u1")) == ["ops/b"]
    assert store.delete("ops/b") is not None
    assert store.by_index("owner", "u1") == []
    assert not store._indices["owner"]  # emptied values are dropped, not kept as empty sets
    assert store.delete("ops/b") is None
    assert len(store) == 0


def test_by_index_orders_by_key_and_unknown_index_raises(store):
    for name in ["c", "a", "b"]:
        store.add(job(name, "u1"))
    assert [o["metadata"]["name"] for o in store.by_index("owner", "u1")] == ["a", "b", "c"]
    assert store.by_index("owner", "nobody") == []
    with pytest.raises(KeyError):
        store.by_index("nope", "x")
    assert keys_of(store.by_index("namespace", "ops")) == ["ops/a", "ops/b", "ops/c"]


def test_multi_valued_index():
    s = Store({"label": lambda o: [f"{k}={v}" for k, v in o["metadata"]["labels"].items()]})
    s.add({"metadata": {"name": "n1", "labels": {"zone": "a", "gpu": "yes"}}})
    s.add({"metadata": {"name": "n2", "labels": {"zone": "a"}}})
    assert keys_of(s.by_index("label", "zone=a")) == ["n1", "n2"]
    assert keys_of(s.by_index("label", "gpu=yes")) == ["n1"]


def node_by_owner(obj) -> list[tuple[str, str]]:
    return [(by_node(obj)[0], (by_owner(obj) or [""])[0])]


def test_a_tagged_index_reads_one_tag_under_a_value_and_follows_updates_deletes_and_relists():
    s = Store({"node": Tagged(node_by_owner)})
    for name, owner, node in [
        ("c", "u1", "n1"),
        ("a", "u1", "n1"),
        ("b", "u2", "n1"),
        ("d", None, "n1"),
        ("e", "u1", "n2"),
    ]:
        s.add(job(name, owner, node=node))
    assert keys_of(s.by_index("node", "n1")) == ["ops/a", "ops/b", "ops/c", "ops/d"]  # untagged read: all
    assert keys_of(s.by_index("node", "n1", "u1")) == ["ops/a", "ops/c"]  # ordered by key
    assert keys_of(s.by_index("node", "n1", "")) == ["ops/d"]  # no owner: tagged ""
    assert s.by_index("node", "n1", "u9") == [] and s.by_index("node", "n9", "u1") == []
    assert s.count_index("node", "n1") == 4
    s.update(job("a", "u2", node="n1"))  # its owner changed: its tag moves
    assert keys_of(s.by_index("node", "n1", "u1")) == ["ops/c"]
    assert keys_of(s.by_index("node", "n1", "u2")) == ["ops/a", "ops/b"]
    s.update(job("c", "u1", node="n2"))  # its node changed: its entry moves
    assert keys_of(s.by_index("node", "n2", "u1")) == ["ops/c", "ops/e"]
    s.delete("ops/e")
    assert keys_of(s.by_index("node", "n2", "u1")) == ["ops/c"]
    s.replace([job("x", "u3", node="n1"), job("y", "u3", node="n1")])
    assert keys_of(s.by_index("node", "n1", "u3")) == ["ops/x", "ops/y"]
    assert s.by_index("node", "n1", "u2") == [] and s.by_index("node", "n2", "u1") == []
    s.replace([])
    assert not s._indices["node"]  # emptied values are dropped


def test_a_tagged_index_keeps_one_tag_string_for_all_its_entries_through_adds_updates_and_relists():
    """Each index call builds its tag anew (an owner id): every entry refers to one shared
    string instead of a copy of its own."""

    def fresh_tag(obj) -> list[tuple[str, str]]:
        return [(by_node(obj)[0], "".join(["ops/", by_owner(obj)[0]]))]  # a new string each call

    s = Store({"node": Tagged(fresh_tag)})
    s.add(job("a", "u1", node="n1"))
    s.add(job("b", "u1", node="n1"))
    s.add(job("c", "u1", node="n2"))
    s.update(job("b", "u1", node="n2"))

    def tags() -> list[str]:
        return [t for entries in s._indices["node"].values() for t in entries.values()]

    assert tags() == ["ops/u1"] * 3 and len({id(t) for t in tags()}) == 1
    s.replace([job("x", "u1", node="n1"), job("y", "u1", node="n3")])
    assert tags() == ["ops/u1"] * 2 and len({id(t) for t in tags()}) == 1
    assert keys_of(s.by_index("node", "n3", "ops/u1")) == ["ops/y"]


def test_replace_returns_vanished_and_rebuilds_indexes(store):
    store.add(job("a", "u1"))
    store.add(job("b", "u1"))
    store.add(job("c", "u2"))
    vanished = store.replace([job("b", "u3"), job("d", "u2")])
    assert set(vanished) == {"ops/a", "ops/c"}
    assert vanished["ops/c"]["metadata"]["name"] == "c"
    assert sorted(store.keys()) == ["ops/b", "ops/d"]
    assert keys_of(store.by_index("owner", "u1")) == []
    assert keys_of(store.by_index("owner", "u2")) == ["ops/d"]
    assert keys_of(store.by_index("owner", "u3")) == ["ops/b"]
    assert store.replace([]).keys() == {"ops/b", "ops/d"}
    assert len(store) == 0


def test_failing_index_function_leaves_the_store_unchanged():
    def picky(obj):
        if obj["metadata"]["name"] == "bad":
            raise RuntimeError("boom")
        return ["v"]

    s = Store({"picky": picky})
    s.add({"metadata": {"name": "ok"}})
    with pytest.raises(RuntimeError):
        s.add({"metadata": {"name": "bad"}})
    with pytest.raises(RuntimeError):
        s.replace([{"metadata": {"name": "bad"}}])
    assert s.keys() == ["ok"] and keys_of(s.by_index("picky", "v")) == ["ok"]


def test_concurrent_writers_keep_indexes_consistent(store):
    def writer(i: int) -> None:
        for n in range(200):
            store.update(job(f"j{n % 20}", owner=f"u{(n + i) % 3}"))
            if n % 7 == 0:
                store.delete(f"ops/j{(n + i) % 20}")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    indexed = [k for u in ("u0", "u1", "u2") for k in keys_of(store.by_index("owner", u))]
    assert sorted(indexed) == sorted(store.keys())
    for key in store.keys():
        assert keys_of(store.by_index("owner", by_owner(store.get(key))[0])).count(key) == 1
