"""Tests for jitguard._src.dispatch.entry: facts, specificity, slots and invalidation."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest

from jitguard import (
    CompileId,
    GetItemSource,
    GuardBuilder,
    LocalSource,
    compile_guards,
    register_specificity,
)
from jitguard._src.dispatch.entry import CacheEntry, Dim, never, specificity

GB = GuardBuilder


def make_entry(
    guards: list[tuple[Any, Callable[..., Any]]], frame: dict[str, Any], seq: int = 0,
    **kw: Any,
) -> CacheEntry:
    params = tuple(frame)
    check = compile_guards(
        [s.make_guard(fn) for s, fn in guards], f_locals=frame, arg_names=params
    )
    return CacheEntry(
        compile_id=CompileId(frame_id=0, frame_compile_id=seq), artifact=lambda *a: seq,
        check=check, params=params, seq=seq, **kw,
    )


L = LocalSource


def test_builtin_facts_on_parameters() -> None:
    """Value, type, id, length facts of parameters are read from the leaves."""
    obj = object()
    e = make_entry(
        [(L("n"), GB.EQUALS_MATCH), (L("t"), GB.SEQUENCE_LENGTH), (L("o"), GB.ID_MATCH),
         (L("c"), GB.TYPE_MATCH)],
        {"n": 7, "t": (1, 2), "o": obj, "c": 1.5},
    )
    assert e.facts[Dim(0, "n", "value")] == (int, 7)
    assert e.facts[Dim(1, "t", "type_len")] == (id(tuple), 2)
    assert e.facts[Dim(2, "o", "id")] == (id(obj),)
    assert e.facts[Dim(3, "c", "type")] == (id(float),)


def test_deeper_sources_give_no_facts() -> None:
    """Facts are only read on parameters themselves, never on sources under them."""
    e = make_entry([(GetItemSource(L("t"), 0), GB.EQUALS_MATCH)], {"t": (1,)})
    assert e.facts == {}


def test_nan_and_tuples_have_no_value_fact() -> None:
    """EQUALS_MATCH on NaN or a tuple pins no hashable fact."""
    e = make_entry([(L("x"), GB.EQUALS_MATCH), (L("y"), GB.EQUALS_MATCH)],
                   {"x": float("nan"), "y": (1, 2)})
    assert e.facts == {}


def test_conflicting_facts_drop_the_dim() -> None:
    """Two different expectations for one dim leave the entry without that dim."""
    from jitguard import CheckFunction, Leaf
    from jitguard._src.compiler.builtin_kinds import EQUALS_MATCH

    leaves = [Leaf(EQUALS_MATCH, (L("x"),), 1), Leaf(EQUALS_MATCH, (L("x"),), 2)]
    check = CheckFunction(leaves, [], name="contradiction", arg_names=("x",), f_globals=None)
    e = CacheEntry(compile_id=CompileId(frame_id=0, frame_compile_id=0), artifact=print,
                   check=check, params=("x",))
    assert e.facts == {}
    assert not check.fn(1) and not check.fn(2)


def test_specificity_weights() -> None:
    """A value guard outweighs a type guard; GLOBAL_STATE weighs nothing."""
    value = make_entry([(L("n"), GB.EQUALS_MATCH)], {"n": 1})
    typed = make_entry([(L("n"), GB.TYPE_MATCH)], {"n": 1})
    assert value.specificity == 8 and typed.specificity == 2
    assert value.rank < typed.rank


def test_register_specificity_number_and_function() -> None:
    """register_specificity takes a number or a function of the params."""
    e = make_entry([(L("n"), GB.LENGTH_CHECK)], {"n": [1, 2, 3]})
    try:
        register_specificity("LENGTH_CHECK", lambda n: 100 + n)
        assert specificity(e.check.leaves) == 103
        register_specificity("LENGTH_CHECK", 0)
        assert specificity(e.check.leaves) == 0
    finally:
        register_specificity("LENGTH_CHECK", 4)
    with pytest.raises(TypeError):
        register_specificity("LENGTH_CHECK", "heavy")  # type: ignore[arg-type]


def test_rank_orders_by_specificity_then_age() -> None:
    """Equal specificity: the older entry ranks first."""
    a = make_entry([(L("n"), GB.TYPE_MATCH)], {"n": 1}, seq=5)
    b = make_entry([(L("n"), GB.TYPE_MATCH)], {"n": 1}, seq=2)
    assert sorted([a, b], key=lambda e: e.rank) == [b, a]


def test_exact_entry_has_no_residual() -> None:
    """When the key proves every guard, the slot's residual is None."""
    e = make_entry([(L("a"), GB.EQUALS_MATCH), (L("b"), GB.EQUALS_MATCH)], {"a": 1, "b": "x"})
    dims = tuple(sorted(e.facts, key=Dim.sort_key))
    assert e.exact_under(dims)
    assert e.slot(frozenset(dims)).residual is None
    assert e.slot(frozenset()).residual is e.check.fn


def test_residual_keeps_unproven_guards() -> None:
    """A partial residual checks what the key did not prove, and only that."""
    e = make_entry([(L("a"), GB.EQUALS_MATCH), (L("b"), GB.EQUALS_MATCH)], {"a": 1, "b": 2})
    residual = e.slot(frozenset({Dim(0, "a", "value")})).residual
    assert residual is not None and residual is not e.check.fn
    assert residual(999, 2)  # a is not its business any more
    assert not residual(1, 3)


def test_slots_are_shared_per_dim_set() -> None:
    """The same set of implied dims gives the same slot object."""
    e = make_entry([(L("a"), GB.EQUALS_MATCH)], {"a": 1})
    dims = frozenset(e.facts)
    assert e.slot(dims) is e.slot(dims)


def test_hits_sum_slots_and_slow_hits() -> None:
    """An entry's hits are its slots' hits plus its slow-path hits."""
    e = make_entry([(L("a"), GB.EQUALS_MATCH)], {"a": 1})
    e.slot(frozenset()).hits += 2
    e.slot(frozenset(e.facts)).hits += 1
    e.slow_hits += 4
    assert e.hits == 7


def test_death_of_identity_guarded_object_kills_slots() -> None:
    """When an ID_MATCH'd object dies the entry is invalid and its slots cannot hit."""
    class Obj:
        pass

    seen: list[CacheEntry] = []
    redirect_calls: list[Any] = []
    obj = Obj()
    e = make_entry([(L("o"), GB.ID_MATCH)], {"o": obj}, on_invalid=seen.append,
                   redirect=lambda *a: redirect_calls.append(a))
    slot = e.slot(frozenset(e.facts))
    assert slot.residual is None and e.valid
    del obj
    gc.collect()
    assert not e.valid and seen == [e]
    assert "deallocated" in (e.invalid_reason or "")
    assert slot.residual is never
    slot.hits += 1  # what the exact dispatcher does before calling the artifact
    slot.artifact("x")
    assert redirect_calls == [("x",)] and slot.hits == 0
    late = e.slot(frozenset())
    assert late.residual is never


def test_dead_slot_without_redirect_raises() -> None:
    """A dead slot with no redirect raises instead of silently calling the artifact."""
    class Obj:
        pass

    obj = Obj()
    e = make_entry([(L("o"), GB.ID_MATCH)], {"o": obj})
    slot = e.slot(frozenset())
    e.invalidate("test")
    with pytest.raises(RuntimeError, match="dead cache entry"):
        slot.artifact()
    del obj


def test_user_kind_facts_are_not_exact() -> None:
    """A fact from a non-built-in kind narrows candidates but stays in the residual."""
    from jitguard import GuardKind, register_guard_kind

    class Parity(GuardKind):
        name = "TEST_ENTRY_PARITY"

        def expect(self, value: Any, guard: Any, **options: Any) -> int:
            return value % 2

        def holds(self, value: Any, params: int) -> bool:
            return value % 2 == params

        def emit(self, var: str, params: int, ctx: Any) -> str:
            return f"{var} % 2 == {ctx.const(params)}"

        def code(self, name: str, params: int) -> str:
            return f"{name} % 2 == {params}"

        def fact(self, params: int) -> Any:
            return ("parity", params)

        def fact_of(self, fact: str, value: Any) -> Any:
            return value % 2

    fn = register_guard_kind(Parity(), replace=True)
    e = make_entry([(L("n"), fn)], {"n": 3})
    (dim,) = e.facts
    assert dim.kind is not None and dim.fact == "parity" and e.facts[dim] == (1,)
    assert not e.exact_under((dim,))
