"""Weak maps keyed by object identity.

May import: nothing from jitguard.

``weakref.WeakKeyDictionary`` compares keys with ``__eq__``/``__hash__``, which is wrong for
values whose ``==`` is elementwise (tensors, arrays). ``WeakIdKeyDictionary`` keys on ``id``
and drops an entry when its key dies, so a reused ``id`` never finds a stale value.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, MutableMapping
from typing import Any, Generic, TypeVar

__all__ = ["WeakIdKeyDictionary"]

K = TypeVar("K")
V = TypeVar("V")


class WeakIdKeyDictionary(MutableMapping[K, V], Generic[K, V]):
    """A mapping from live objects (by identity) to values, holding the keys weakly."""

    def __init__(self) -> None:
        self._data: dict[int, tuple[weakref.ref[Any], V]] = {}

    def _drop(self, key_id: int, ref: weakref.ref[Any]) -> None:
        entry = self._data.get(key_id)
        if entry is not None and entry[0] is ref:
            del self._data[key_id]

    def __setitem__(self, key: K, value: V) -> None:
        key_id = id(key)
        entry = self._data.get(key_id)
        if entry is not None and entry[0]() is key:
            self._data[key_id] = (entry[0], value)
            return

        def on_death(r: weakref.ref[Any], key_id: int = key_id) -> None:
            self._drop(key_id, r)

        ref = weakref.ref(key, on_death)
        self._data[key_id] = (ref, value)

    def __getitem__(self, key: K) -> V:
        entry = self._data.get(id(key))
        if entry is None or entry[0]() is not key:
            raise KeyError(key)
        return entry[1]

    def __delitem__(self, key: K) -> None:
        entry = self._data.get(id(key))
        if entry is None or entry[0]() is not key:
            raise KeyError(key)
        del self._data[id(key)]

    def __iter__(self) -> Iterator[K]:
        for ref, _ in list(self._data.values()):
            obj = ref()
            if obj is not None:
                yield obj

    def __len__(self) -> int:
        return sum(1 for ref, _ in list(self._data.values()) if ref() is not None)

    def __contains__(self, key: object) -> bool:
        entry = self._data.get(id(key))
        return entry is not None and entry[0]() is key
