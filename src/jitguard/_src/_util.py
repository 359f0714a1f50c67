"""Small shared helpers with no jitguard dependencies.

May import: nothing from jitguard.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableSet
from typing import Any, Generic, Optional, TypeVar

__all__ = ["SCALAR_TYPES", "OrderedSet", "is_scalar_type"]

T = TypeVar("T")

# The builtin scalar types, decided once for all of jitguard: the immutable builtin values
# compared by value, whose ``repr`` is (for finite numbers) a literal. Every test is of the
# exact type (``bool`` is listed apart from ``int``; a subclass is not a scalar). A place
# that needs a subset says which and why beside it.
SCALAR_TYPES: tuple[type, ...] = (int, float, complex, str, bytes, bool, type(None))
_SCALAR_TYPE_IDS = frozenset(id(t) for t in SCALAR_TYPES)


def is_scalar_type(tp: Any) -> bool:
    """``tp`` is one of ``SCALAR_TYPES``, by identity: no metaclass ``__eq__`` or
    ``__hash__`` of ``tp`` runs."""
    return id(tp) in _SCALAR_TYPE_IDS


class OrderedSet(MutableSet[T], Generic[T]):
    """A set that iterates in insertion order (a dict underneath), so that guard sets,
    their checkpoints and everything compiled from them are deterministic run to run."""

    __slots__ = ("_d",)

    def __init__(self, items: Optional[Iterable[T]] = None) -> None:
        self._d: dict[T, None] = dict.fromkeys(items) if items is not None else {}

    def __contains__(self, item: object) -> bool:
        return item in self._d

    def __iter__(self) -> Iterator[T]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def add(self, value: T) -> None:
        self._d[value] = None

    def discard(self, value: T) -> None:
        self._d.pop(value, None)

    def difference(self, *others: Iterable[Any]) -> OrderedSet[T]:
        drop: set[Any] = set()
        for other in others:
            drop.update(other)
        return OrderedSet(x for x in self._d if x not in drop)

    def union(self, *others: Iterable[T]) -> OrderedSet[T]:
        out = OrderedSet(self._d)
        for other in others:
            out |= other  # type: ignore[arg-type]
        return out

    def copy(self) -> OrderedSet[T]:
        return OrderedSet(self._d)

    def __sub__(self, other: Iterable[Any]) -> OrderedSet[T]:
        return self.difference(other)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (set, frozenset, OrderedSet)):
            return len(self) == len(other) and all(x in other for x in self._d)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OrderedSet({list(self._d)!r})"
