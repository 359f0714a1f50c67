"""The kinds of compiler.python_kinds: what passes, what fails, the exact failure text, and
the generated check agreeing with the reference evaluator."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from _helpers import accepts as agree
from _helpers import check_of
from jitguard import GuardBuilder, GuardKindError


class Mod:
    def forward(self) -> int:
        return 1




class LyingSet(set):  # type: ignore[type-arg]
    def __contains__(self, item: Any) -> bool:
        return True


def test_set_contains_sets_and_frozensets() -> None:
    """SET_CONTAINS reads a set's own lookup, for sets and frozensets; invert=True negates."""
    check = check_of(functools.partial(GuardBuilder.SET_CONTAINS, key=3), {1, 3})
    assert agree(check, {3}) and agree(check, frozenset({3}))
    assert not agree(check, {1}) and not agree(check, LyingSet())
    assert not agree(check, [3])
    assert [f.reason for f in check.explain({1})] == ["set.__contains__(L['x'], 3) failed"]
    inv = check_of(functools.partial(GuardBuilder.SET_CONTAINS, key=3, invert=True), {1})
    assert agree(inv, {1}) and not agree(inv, {3})


@pytest.mark.parametrize(
    ("kind", "value", "text"),
    [
        ("MODULE_MATCH", functools, "L['x'] is <module 'functools'>"),
        ("BUILTIN_MATCH", len, "L['x'] is <function len>"),
        ("CLASS_MATCH", Mod, "L['x'] is Mod"),
    ],
)
def test_named_id_matches(kind: str, value: Any, text: str) -> None:
    """MODULE_MATCH, BUILTIN_MATCH, CLASS_MATCH: ID_MATCH under Dynamo's names."""
    check = check_of(getattr(GuardBuilder, kind), value)
    assert agree(check, value)
    assert not agree(check, object())
    (failure,) = check.explain(3)
    assert failure.kind == kind
    assert failure.reason == f"{text} failed: got 3 at {hex(id(3))}"


class IntSub(int):
    def __eq__(self, other: object) -> bool:
        raise AssertionError("the subclass's __eq__ must not run")

    __hash__ = int.__hash__


def test_constant_subclass_match() -> None:
    """CONSTANT_SUBCLASS_MATCH compares the builtin value, never running the subclass's __eq__."""
    check = check_of(functools.partial(GuardBuilder.CONSTANT_SUBCLASS_MATCH, base_type=int), IntSub(3))
    assert agree(check, IntSub(3)) and agree(check, 3)
    assert not agree(check, IntSub(4))
    assert [f.reason for f in check.explain(IntSub(4))] == ["int(L['x']) == 3 failed: got 4"]
    with pytest.raises(GuardKindError, match="base_type="):
        check_of(functools.partial(GuardBuilder.CONSTANT_SUBCLASS_MATCH, base_type=str), IntSub(3))


def test_mapping_keys_check() -> None:
    """MAPPING_KEYS_CHECK: the str keys of a mapping proxy, in order."""
    class C:
        a = 1

    check = check_of(GuardBuilder.MAPPING_KEYS_CHECK, C.__dict__)
    assert agree(check, C.__dict__)
    C.b = 2  # type: ignore[attr-defined]
    assert not agree(check, C.__dict__)
    assert check.explain(C.__dict__)[0].reason.endswith("failed: added 'b'")
    with pytest.raises(GuardKindError, match="str keys"):
        check_of(GuardBuilder.MAPPING_KEYS_CHECK, {1: 2})


def test_container_equals_match() -> None:
    """CONTAINER_EQUALS_MATCH: exact type and == to a copy taken at build time."""
    xs = [1, "a"]
    check = check_of(GuardBuilder.CONTAINER_EQUALS_MATCH, xs)
    xs.append(2)
    assert agree(check, [1, "a"]) and not agree(check, xs)
    assert not agree(check, (1, "a"))
    assert [f.reason for f in check.explain([1])] == ["L['x'] == [1, 'a'] failed: got [1]"]
    with pytest.raises(GuardKindError, match="list or set of constants"):
        check_of(GuardBuilder.CONTAINER_EQUALS_MATCH, [object()])
