"""A guard kind added from this file alone: it declares its specificity and the fact it
contributes to dispatch on its class, and the cache and the differential fuzz use them,
with nothing under src/ changed for it ([Note: Kinds own their cache data])."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from _helpers import Hostile, registry_candidates
from jitguard import (
    AttrSource,
    CompileId,
    GuardBuilder,
    LocalSource,
    cache_of,
    compile_guards,
    register_guard_kind,
    specialize,
)
from jitguard._src.compiler.kinds import DispatchFact, EmitContext, GuardKind
from jitguard._src.dispatch.dispatcher import Dispatcher, compute_layout
from jitguard._src.dispatch.entry import CacheEntry, Dim
from jitguard._src.dispatch.signature import Signature
from jitguard._src.dispatch.snapshot import build_snapshot, choose_dims

MOD3_FACT = DispatchFact("test_mod3", "{v} % 3", typed="id", gate="types", spread=True)


class Mod3Match(GuardKind):
    """``type(value) is int and value % 3 == r`` (r taken at build time)."""

    name = "TEST_MOD3_MATCH"
    specificity = 5
    dispatch_facts = (MOD3_FACT,)

    def expect(self, value: Any, guard: Any, **options: Any) -> int:
        super().expect(value, guard, **options)
        if type(value) is not int:
            raise TypeError(f"TEST_MOD3_MATCH needs an int, got {value!r}")
        return value % 3

    def holds(self, value: Any, params: int) -> bool:
        return type(value) is int and value % 3 == params

    def emit(self, var: str, params: int, ctx: EmitContext) -> str:
        return f"(type({var}) is {ctx.const(int, 'int')} and {var} % 3 == {ctx.const(params, 'r')})"

    def code(self, name: str, params: int) -> str:
        return f"{name} % 3 == {params}"

    def fact(self, params: int) -> Optional[tuple[str, Hashable]]:
        return ("test_mod3", (id(int), params))

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return (id(type(value)), value % 3)


MOD3 = register_guard_kind(Mod3Match(), replace=True)


def mod3_entry(value: int, seq: int, *, mod3: bool) -> CacheEntry:
    source = LocalSource("n")
    guards = [source.make_guard(GuardBuilder.TYPE_MATCH)]
    if mod3:
        guards.append(source.make_guard(MOD3))
    check = compile_guards(guards, f_locals={"n": value}, arg_names=("n",))
    return CacheEntry(compile_id=CompileId(frame_id=0, frame_compile_id=seq),
                      artifact=lambda n, _s=seq: _s, check=check, params=("n",), seq=seq)


def test_new_kind_dispatches_by_its_declared_specificity() -> None:
    """An entry with the new kind (2 + 5) outranks an older generic one (2) for the calls both
    accept; the key is the declared inline fact, exact, so the hit needs no residual."""
    generic = mod3_entry(3, 0, mod3=False)
    specific = mod3_entry(4, 1, mod3=True)
    assert (generic.specificity, specific.specificity) == (2, 7)
    ranked = sorted([generic, specific], key=lambda e: e.rank)
    assert ranked[0] is specific
    assert specific.facts[Dim(0, "n", "test_mod3")] == (id(int), 1)
    disp = Dispatcher(Signature(lambda n: n), "f", lambda *v: "miss")
    keycode = disp.keycode(compute_layout(ranked, choose_dims(ranked)))
    snap = build_snapshot(ranked, keycode)
    disp.install(keycode, snap.index)
    assert disp.function(7) == 1 and disp.function(4) == 1  # 7 % 3 == 1: the specific one
    assert disp.function(6) == 0 and disp.function(5) == 0
    assert disp.function("s") == "miss"
    assert Dim(0, "n", "test_mod3") in snap.dims


def test_new_kind_fact_is_an_exact_inline_key() -> None:
    """Entries that differ only in the new kind's fact are keyed on ``n % 3`` inline; the key
    match proves the guard (declared exact): the dispatcher calls no check at all."""
    entries = [mod3_entry(v, v, mod3=True) for v in (4, 5, 6)]
    ranked = sorted(entries, key=lambda e: e.rank)
    disp = Dispatcher(Signature(lambda n: n), "f", lambda *v: "miss")
    keycode = disp.keycode(compute_layout(ranked, choose_dims(ranked)))
    snap = build_snapshot(ranked, keycode)
    disp.install(keycode, snap.index)
    assert keycode.layout.exact and "[n % 3]" in disp.source
    assert [disp.function(v) for v in (7, 8, 9, "s", True)] == [4, 5, 6, "miss", "miss"]


def test_new_kind_through_specialize() -> None:
    """End to end: a compiler that guards with the new kind; the more specific entry serves
    its calls, the generic one the rest, and the dispatcher keys on ``n % 3``."""

    def compiler(request: Any) -> Any:
        n = request.values[0]
        if n % 3 == 1:
            request.add_guard("n", MOD3)
            return lambda n: "mod"
        return lambda n: "any"

    f = specialize(lambda n: n, compiler=compiler, dynamic=["n"])
    assert f(4) == "mod" and f(3) == "any"
    assert [f(v) for v in (7, 6, 10, 5)] == ["mod", "any", "mod", "any"]
    cache = cache_of(f)
    assert sorted(e.specificity for e in cache.entries()) == [2, 7]
    assert cache.stats().compiles == 2
    assert cache.stats().hits == 4


def test_new_kind_is_drawn_by_the_differential_fuzz() -> None:
    """The fuzz's candidates come from the registry: the new kind is one on an int, not on a
    str."""
    assert MOD3 in registry_candidates(LocalSource("x"), 5)
    assert MOD3 not in registry_candidates(LocalSource("x"), "5")


@settings(max_examples=60, deadline=None)
@given(st.integers(-50, 50), st.lists(st.one_of(st.integers(-50, 50), st.booleans(),
                                                st.text(max_size=2), st.floats()), max_size=8))
def test_new_kind_compiled_agrees_with_reference(build: int, others: list[Any]) -> None:
    """Guards drawn from the registry on an int (the new kind among them): the compiled check
    and the reference evaluator agree on other values, hostile ones included."""
    source = LocalSource("x")
    guards = [source.make_guard(fn) for fn in registry_candidates(source, build)]
    assert any(g.create_fn is MOD3 for g in guards)
    check = compile_guards(guards, f_locals={"x": build}, arg_names=("x",))
    for value in [build, *others, Hostile()]:
        assert check.fn(value) is check.reference(value), (check.source, value)


def test_fact_declarations_are_not_inherited_and_names_are_global() -> None:
    """A subclass that does not declare the fact again gets no inline (exact) fact: its
    leaves only narrow the candidates through fact_of; a second, different declaration
    under a registered fact name is refused."""
    import pytest

    from jitguard import GuardKindError

    class Mod3Loose(Mod3Match):
        name = "TEST_MOD3_LOOSE"

    loose = register_guard_kind(Mod3Loose(), replace=True)
    check = compile_guards([LocalSource("n").make_guard(loose)], f_locals={"n": 4},
                           arg_names=("n",))
    entry = CacheEntry(compile_id=CompileId(frame_id=0, frame_compile_id=0),
                       artifact=lambda n: n, check=check, params=("n",))
    (dim,) = entry.facts
    assert dim.kind is not None and dim.spec is None and not entry.exact_under((dim,))
    assert entry.specificity == 5  # the weight is inherited; only facts are not

    class Clash(Mod3Match):
        name = "TEST_MOD3_CLASH"
        dispatch_facts = (DispatchFact("test_mod3", "{v} % 4"),)

    with pytest.raises(GuardKindError, match="declares a dispatch fact 'test_mod3' unlike"):
        register_guard_kind(Clash())


class Cfg:
    def __init__(self, n: Any) -> None:
        self.n = n


def test_new_kind_fact_on_an_attribute_is_an_exact_key() -> None:
    """The new kind on ``L['cfg'].n`` (with ``type(L['cfg'])`` pinned): the dispatcher reads
    ``cfg.n`` for a Cfg only and keys on ``cfg.n % 3``; the key match proves both guards, so
    no check runs on a hit, and a value of another type is never read."""
    cfg = LocalSource("cfg")
    entries = []
    for seq, v in enumerate((4, 5, 6)):
        check = compile_guards(
            [cfg.make_guard(GuardBuilder.TYPE_MATCH), AttrSource(cfg, "n").make_guard(MOD3)],
            f_locals={"cfg": Cfg(v)}, arg_names=("cfg",))
        entries.append(CacheEntry(compile_id=CompileId(frame_id=0, frame_compile_id=seq),
                                  artifact=lambda c, _s=seq: _s, check=check,
                                  params=("cfg",), seq=seq))
    ranked = sorted(entries, key=lambda e: e.rank)
    disp = Dispatcher(Signature(lambda cfg: cfg), "f", lambda *v: "miss")
    keycode = disp.keycode(compute_layout(ranked, choose_dims(ranked)))
    snap = build_snapshot(ranked, keycode)
    disp.install(keycode, snap.index)
    assert keycode.layout.exact and "residual" not in disp.source
    assert Dim(0, "cfg", "test_mod3", None, AttrSource(cfg, "n")) in snap.dims
    assert [disp.function(Cfg(v)) for v in (7, 8, 9)] == [0, 1, 2]
    assert disp.function(Cfg("s")) == "miss" and disp.function(Hostile()) == "miss"
