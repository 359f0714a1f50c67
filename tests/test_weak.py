"""WeakIdKeyDictionary: identity keys, held weakly."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from jitguard import WeakIdKeyDictionary


class Key:
    pass


class Elementwise:
    """Like a tensor: == is elementwise (not a bool) and hashing is refused."""

    def __eq__(self, other: object) -> Any:
        raise RuntimeError("elementwise == has no truth value")

    __hash__ = None  # type: ignore[assignment]


def test_set_get_contains_len() -> None:
    """Stored values are found by the very same key object."""
    d: WeakIdKeyDictionary[Key, int] = WeakIdKeyDictionary()
    a, b = Key(), Key()
    d[a] = 1
    d[b] = 2
    assert d[a] == 1 and d[b] == 2
    assert a in d and Key() not in d
    assert len(d) == 2
    assert set(d) == {a, b}


def test_keys_by_identity_not_equality() -> None:
    """Equal but distinct objects are different keys; keys need no __eq__ or __hash__."""
    d: WeakIdKeyDictionary[Any, str] = WeakIdKeyDictionary()
    e1, e2 = Elementwise(), Elementwise()
    d[e1] = "one"
    d[e2] = "two"
    assert d[e1] == "one" and d[e2] == "two"
    assert e1 in d


def test_overwrite_keeps_one_entry() -> None:
    """Setting an existing key replaces its value."""
    d: WeakIdKeyDictionary[Key, int] = WeakIdKeyDictionary()
    k = Key()
    d[k] = 1
    d[k] = 2
    assert d[k] == 2 and len(d) == 1


def test_missing_key_raises_key_error() -> None:
    """Getting or deleting an absent key raises KeyError."""
    d: WeakIdKeyDictionary[Key, int] = WeakIdKeyDictionary()
    with pytest.raises(KeyError):
        d[Key()]
    with pytest.raises(KeyError):
        del d[Key()]


def test_delete() -> None:
    """del removes the entry."""
    d: WeakIdKeyDictionary[Key, int] = WeakIdKeyDictionary()
    k = Key()
    d[k] = 1
    del d[k]
    assert k not in d and len(d) == 0
    assert d.get(k) is None


def test_entry_dropped_when_key_dies() -> None:
    """Keys are held weakly: a dead key's entry disappears, and its value is let go."""
    d: WeakIdKeyDictionary[Key, Key] = WeakIdKeyDictionary()
    k, v = Key(), Key()
    d[k] = v
    value_ref = weakref.ref(v)
    del k, v
    gc.collect()
    assert len(d) == 0 and list(d) == []
    assert value_ref() is None


def test_reused_id_does_not_find_stale_value() -> None:
    """A new object at a dead key's address does not see the old value."""
    d: WeakIdKeyDictionary[Key, int] = WeakIdKeyDictionary()
    k = Key()
    d[k] = 1
    old_id = id(k)
    del k
    gc.collect()
    for _ in range(1000):
        fresh = Key()
        if id(fresh) == old_id:
            break
    assert fresh not in d
    with pytest.raises(KeyError):
        d[fresh]


def test_stale_callback_does_not_drop_new_entry() -> None:
    """A dead key's callback never removes the entry of a newer key with the same id."""
    d: WeakIdKeyDictionary[Key, int] = WeakIdKeyDictionary()
    k = Key()
    d[k] = 1
    old_ref = d._data[id(k)][0]
    d._drop(id(k), object())  # type: ignore[arg-type]
    assert d[k] == 1
    d._drop(id(k), old_ref)
    assert k not in d


def test_non_weakrefable_key_raises_type_error() -> None:
    """Keys must be weak-referenceable."""
    d: WeakIdKeyDictionary[Any, int] = WeakIdKeyDictionary()
    with pytest.raises(TypeError):
        d[1] = 1


def test_mutable_mapping_helpers() -> None:
    """The MutableMapping mixins (get, pop, setdefault, items) work."""
    d: WeakIdKeyDictionary[Key, int] = WeakIdKeyDictionary()
    k = Key()
    assert d.setdefault(k, 5) == 5
    assert dict(d.items()) == {k: 5}
    assert d.pop(k) == 5 and len(d) == 0
