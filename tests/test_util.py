"""Tests for jitguard._src._util: the builtin scalar types, decided once."""

from __future__ import annotations

from typing import Any

import pytest

from jitguard._src._util import SCALAR_TYPES, is_scalar_type


class LyingMeta(type):
    """A metaclass whose classes claim to equal (and hash like) int."""

    def __eq__(cls, other: object) -> bool:
        return True

    def __hash__(cls) -> int:
        return hash(int)


class PosingAsInt(metaclass=LyingMeta):
    pass


class MyInt(int):
    pass


def test_scalar_types_are_the_seven_builtin_scalars() -> None:
    """Exactly int, float, complex, str, bytes, bool and NoneType."""
    assert set(SCALAR_TYPES) == {int, float, complex, str, bytes, bool, type(None)}
    assert len(SCALAR_TYPES) == 7


def test_is_scalar_type_is_by_identity() -> None:
    """Only the exact builtin types count: no subclass, no metaclass that lies about ==."""
    values: list[Any] = [0, 0.5, 1j, "s", b"b", True, None]
    assert all(is_scalar_type(type(v)) for v in values)
    assert not is_scalar_type(MyInt) and not is_scalar_type(PosingAsInt)
    assert PosingAsInt == int  # noqa: E721  (the lie, which is_scalar_type never asks)
    assert not is_scalar_type(tuple) and not is_scalar_type(type)


def test_all_subclasses_walks_every_level_once() -> None:
    """all_subclasses finds indirect subclasses and a diamond's bottom once, never the root."""
    from jitguard._src._util import all_subclasses

    class Root:
        pass

    class A(Root):
        pass

    class B(Root):
        pass

    class D(A, B):
        pass

    assert sorted(c.__name__ for c in all_subclasses(Root)) == ["A", "B", "D"]
    assert all_subclasses(D) == []


def test_wrapped_chain_walks_what_unwrap_walks() -> None:
    """wrapped_chain lists the wrapper and each ``__wrapped__`` in turn, ending at what
    ``inspect.unwrap`` returns; a cycle raises ValueError as unwrap does."""
    import functools
    import inspect

    from jitguard._src._util import wrapped_chain

    def inner(x: int) -> int:
        return x

    middle = functools.wraps(inner)(lambda x: inner(x))
    outer = functools.wraps(middle)(lambda x: middle(x))
    assert wrapped_chain(outer) == [outer, middle, inner]
    assert wrapped_chain(outer)[-1] is inspect.unwrap(outer)
    assert wrapped_chain(inner) == [inner]
    a: Any = lambda: None  # noqa: E731
    b: Any = lambda: None  # noqa: E731
    a.__wrapped__, b.__wrapped__ = b, a
    with pytest.raises(ValueError, match="wrapper loop"):
        wrapped_chain(a)
