"""Small shared helpers with no jitguard dependencies.

May import: nothing from jitguard.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, MutableSet
from typing import Any, Generic, Optional, TypeVar

__all__ = ["JSON_INT_BITS", "SCALAR_TYPES", "OrderedSet", "all_subclasses", "constant_repr",
           "is_scalar_type", "wrapped_chain"]

T = TypeVar("T")

# The builtin scalar types, decided once for all of jitguard: the immutable builtin values
# compared by value, whose ``repr`` is (for finite numbers) a literal. Every test is of the
# exact type (``bool`` is listed apart from ``int``; a subclass is not a scalar). A place
# that needs a subset says which and why beside it.
SCALAR_TYPES: tuple[type, ...] = (int, float, complex, str, bytes, bool, type(None))
_SCALAR_TYPE_IDS = frozenset(id(t) for t in SCALAR_TYPES)

# The longest int (in bits) that jitguard writes as a JSON number: JSON text holds ints in
# decimal, which Python refuses to write or read past ``sys.get_int_max_str_digits()`` (640
# digits at the least, ~2126 bits). Past it, a store key writes the int in hex
# (store/keys.py) and a guard-set document has no portable form for it
# (compiler/schema_values.py).
JSON_INT_BITS = 2000


def is_scalar_type(tp: Any) -> bool:
    """``tp`` is one of ``SCALAR_TYPES``, by identity: no metaclass ``__eq__`` or
    ``__hash__`` of ``tp`` runs."""
    return id(tp) in _SCALAR_TYPE_IDS


def constant_repr(value: Any) -> str:
    """``repr(value)`` of a builtin constant (a scalar, or a tuple, list, frozenset, dict,
    slice or range of them), where an int too long for decimal text is a hex literal of
    the same value: past ``sys.get_int_max_str_digits()`` (4300 digits by default) ``repr``
    of an int raises ValueError, and a guard's text or a source's name must never fail on
    an argument that the plain function takes."""
    try:
        return repr(value)
    except ValueError:
        pass
    tp = type(value)
    if tp is int:
        return hex(value)
    if tp is tuple:
        items = [constant_repr(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if tp is list:
        return f"[{', '.join(constant_repr(v) for v in value)}]"
    if tp is frozenset:
        return f"frozenset({{{', '.join(constant_repr(v) for v in value)}}})"
    if tp is dict:
        return "{" + ", ".join(f"{constant_repr(k)}: {constant_repr(v)}"
                               for k, v in dict.items(value)) + "}"
    if tp is slice or tp is range:
        parts = ", ".join(constant_repr(v) for v in (value.start, value.stop, value.step))
        return f"{tp.__name__}({parts})"
    return f"<{tp.__qualname__} object>"


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


def all_subclasses(root: type) -> list[type]:
    """Every loaded subclass of ``root``, direct or not, each once (``root`` left out)."""
    out: list[type] = []
    todo: list[type] = [root]
    seen: set[type] = {root}
    while todo:
        subs: list[type] = type.__subclasses__(todo.pop())
        for sub in subs:
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
                out.append(sub)
    return out


def wrapped_chain(obj: Any) -> list[Any]:
    """``obj`` and every object its ``__wrapped__`` chain reaches (``functools.wraps``), in
    order: the objects ``inspect.unwrap`` walks, the last being what it returns. A cycle, or
    a chain longer than the recursion limit, raises ValueError as ``inspect.unwrap`` does."""
    chain = [obj]
    seen = {id(obj)}
    limit = sys.getrecursionlimit()
    while hasattr(obj, "__wrapped__"):
        obj = obj.__wrapped__
        if id(obj) in seen or len(chain) >= limit:
            raise ValueError(f"wrapper loop when unwrapping {chain[0]!r}")
        seen.add(id(obj))
        chain.append(obj)
    return chain
