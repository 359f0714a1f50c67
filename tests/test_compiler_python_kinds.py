"""The kinds of compiler.python_kinds: what passes, what fails, the exact failure text, and
the generated check agreeing with the reference evaluator."""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


FLOATS = (0.0, -0.0, 1.5, -1.5, 1e-300, -5e-324, float("inf"), -float("inf"), float("nan"))


def _float_facts_reference(built: float, value: float) -> bool:
    """The meaning of FLOAT_FACTS_MATCH, stated plainly: finite / infinite / NaN as built,
    and the same sign bit where either is a zero or an infinity."""
    def cls(v: float) -> str:
        return "nan" if math.isnan(v) else "inf" if math.isinf(v) else "finite"

    if cls(value) != cls(built):
        return False
    if cls(built) == "nan":
        return True
    same_sign = math.copysign(1.0, value) == math.copysign(1.0, built)
    return same_sign or (cls(built) == "finite" and value != 0 and built != 0)


@given(st.sampled_from(FLOATS) | st.floats(), st.sampled_from(FLOATS) | st.floats())
def test_float_facts_match_property(built: float, value: float) -> None:
    """FLOAT_FACTS_MATCH accepts exactly what its plain statement says, in the generated
    check and the reference evaluator alike."""
    check = check_of(GuardBuilder.FLOAT_FACTS_MATCH, built)
    assert agree(check, value) is _float_facts_reference(built, value)


def test_float_facts_match_texts_and_bad_input() -> None:
    """The failure text restates the check; a guard on a non-float is refused by name."""
    check = check_of(GuardBuilder.FLOAT_FACTS_MATCH, 0.0)
    assert agree(check, 0.0) and not agree(check, -0.0) and not agree(check, -1.0)
    assert [f.reason for f in check.explain(-0.0)] == [
        "math.isfinite(L['x']) and math.copysign(1.0, L['x']) == 1.0 failed: got -0.0"]
    pos = check_of(GuardBuilder.FLOAT_FACTS_MATCH, 2.0)
    assert agree(pos, 0.0) and agree(pos, -3.0) and not agree(pos, -0.0)
    assert not agree(pos, float("inf")) and not agree(pos, float("nan")) and not agree(pos, "a")
    with pytest.raises(GuardKindError, match="needs a float"):
        check_of(GuardBuilder.FLOAT_FACTS_MATCH, 3)
