"""Adversarial tests of the guard compiler: the compiled check against ``check.reference`` and
against what each kind says it means, on confusable and hostile values. Every case passes:
none is marked xfail."""

from __future__ import annotations

import enum
import functools
import gc
import math
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _helpers import Hostile
from jitguard import (
    AttrSource,
    CheckFunction,
    GetItemSource,
    GuardBuilder,
    GuardKindError,
    LocalSource,
    compile_guards,
)

GB = GuardBuilder
X = LocalSource("x")


def check_on(create_fn: Any, value: Any, source: Any = X) -> CheckFunction:
    """A positional check of one guard on ``x``, built from ``x = value``."""
    return compile_guards([source.make_guard(create_fn)], f_locals={"x": value}, arg_names=["x"])


def agree(check: CheckFunction, *args: Any) -> bool:
    """The compiled answer, asserting that the reference evaluator gives the same."""
    got = check.fn(*args)
    assert got == check.reference(*args), f"compiled {got} but reference differs on {args!r}"
    return got


# ---- EQUALS_MATCH: values == cannot tell apart ----------------------------------------------


@pytest.mark.parametrize("built,other", [(0.0, -0.0), (-0.0, 0.0), (0j, complex(0, -0.0)),
                                         ((0.0,), (-0.0,)), (frozenset({0.0}), frozenset({-0.0}))])
def test_equals_match_signed_zero(built: Any, other: Any) -> None:
    """0.0 and -0.0 (alone, as a complex part, in a tuple or frozenset) are different constants."""
    assert not agree(check_on(GB.EQUALS_MATCH, built), other)


def test_equals_match_type_exact() -> None:
    """1, 1.0, True and 1+0j never match each other; NaN matches NaN."""
    values = [1, 1.0, True, 1 + 0j, (1,), (1.0,), (True,), frozenset({1}), frozenset({1.0})]
    for a in values:
        check = check_on(GB.CONSTANT_MATCH, a)
        for b in values:
            assert agree(check, b) == (a is b or (type(a) is type(b) and repr(a) == repr(b)))
    assert agree(check_on(GB.EQUALS_MATCH, float("nan")), float("nan"))
    assert agree(check_on(GB.EQUALS_MATCH, (float("nan"), 1)), (float("nan"), 1))


@pytest.mark.parametrize("built,other", [(range(0, 4, 2), range(0, 3, 2)), (range(0), range(5, 5)),
                                         (range(1, 2), range(1, 2, 7))])
def test_equals_match_range(built: range, other: range) -> None:
    """Ranges with the same items but other start/stop/step are different constants."""
    assert not agree(check_on(GB.EQUALS_MATCH, built), other)


def test_equals_match_frozenset_of_nans() -> None:
    """frozenset({nan, 1.0}) does not accept frozenset({nan, nan'}) (two NaN objects)."""
    check = check_on(GB.EQUALS_MATCH, frozenset({float("nan"), 1.0}))
    assert not agree(check, frozenset({float("nan"), float("nan")}))


class FloatEnum(float, enum.Enum):
    NAN = float("nan")
    ONE = 1.0


def test_equals_match_nan_enum_member() -> None:
    """EQUALS_MATCH on a NaN-valued enum member accepts its own frame."""
    check = check_on(GB.EQUALS_MATCH, FloatEnum.NAN)
    assert agree(check, FloatEnum.NAN) and not agree(check, FloatEnum.ONE)


class Loose(enum.Enum):
    A = 1
    B = 2

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = enum.Enum.__hash__


def test_equals_match_enum_with_custom_eq() -> None:
    """Loose.A's guard does not accept Loose.B because Loose.__eq__ says everything is equal."""
    assert not agree(check_on(GB.EQUALS_MATCH, Loose.A), Loose.B)


class EqualToEverything(type):
    def __eq__(cls, other: object) -> bool:
        return True

    def __hash__(cls) -> int:
        return hash(int)


class Impostor(metaclass=EqualToEverything):
    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    def __iter__(self) -> Any:
        return iter(())


def test_equals_match_refuses_a_metaclass_impostor() -> None:
    """A class whose metaclass claims equality with int is not a constant type."""
    with pytest.raises(GuardKindError, match="not a constant"):
        check_on(GB.EQUALS_MATCH, Impostor())


# ---- DICT_KEYS_MATCH -------------------------------------------------------------------------


class S(str):
    pass


@pytest.mark.parametrize("built,other", [({1: 0}, {True: 0}), ({1: 0}, {1.0: 0}),
                                         ({"a": 0}, {S("a"): 0}), ({(1, 2): 0}, {(1.0, 2): 0}),
                                         ({0.0: 0}, {-0.0: 0})])
def test_dict_keys_match_key_types(built: dict[Any, Any], other: dict[Any, Any]) -> None:
    """Keys equal under == but of another type (or sign) are other keys."""
    assert not agree(check_on(GB.DICT_KEYS_MATCH, built), other)


class Chameleon:
    """A key equal to every string, with the hash of 'a', that mutates a list when compared."""

    def __init__(self, victim: list[Any]) -> None:
        self.victim = victim

    def __eq__(self, other: object) -> bool:
        self.victim.append("mutated")
        return True

    def __hash__(self) -> int:
        return hash("a")


def test_dict_keys_match_runs_no_user_eq() -> None:
    """A check never runs a key's ``__eq__``: a chameleon key is rejected, untouched."""
    victim: list[Any] = []
    check = check_on(GB.DICT_KEYS_MATCH, {"a": 1})
    assert not check.fn({Chameleon(victim): 1})
    assert victim == []


# ---- hostile objects at build time -------------------------------------------------------


class RaisingClass:
    """A lazy proxy outside its context: reading ``__class__`` raises."""

    @property  # type: ignore[misc]
    def __class__(self) -> Any:
        raise RuntimeError("working outside of context")


def test_id_match_on_object_whose_class_raises() -> None:
    """ID_MATCH builds and works on an object whose ``__class__`` property raises."""
    a, b = RaisingClass(), RaisingClass()
    check = check_on(GB.ID_MATCH, a)
    assert agree(check, a) and not agree(check, b)


def test_type_match_on_object_whose_class_raises() -> None:
    """TYPE_MATCH reads the real type only."""
    check = check_on(GB.TYPE_MATCH, RaisingClass())
    assert agree(check, RaisingClass()) and not agree(check, object())


class NoQualname(type):
    def __getattribute__(cls, name: str) -> Any:
        if name in ("__qualname__", "__module__"):
            raise RuntimeError(f"no {name}")
        return super().__getattribute__(name)


class Opaque(metaclass=NoQualname):
    pass


def test_type_match_metaclass_with_raising_qualname() -> None:
    """TYPE_MATCH on an instance of a class whose metaclass raises on ``__qualname__``."""
    check = check_on(GB.TYPE_MATCH, Opaque())
    assert agree(check, Opaque()) and not agree(check, 1)


# ---- identity ------------------------------------------------------------------------------


class Obj:
    pass


def _reused(old_id: int) -> Any:
    keep = []
    for _ in range(10000):
        o = Obj()
        if id(o) == old_id:
            return o, keep
        keep.append(o)
    pytest.skip("the allocator did not reuse the id")


def test_reused_id_never_hits_the_dead_objects_check() -> None:
    """ID_MATCH and TYPE_MATCH (a local class) fail for a new object at a dead one's id."""
    o = Obj()
    check = check_on(GB.ID_MATCH, o)
    old = id(o)
    del o
    n, _keep = _reused(old)
    assert not agree(check, n) and not check.valid

    def make() -> type:
        class Local:
            pass
        return Local

    cls = make()
    tcheck = check_on(GB.TYPE_MATCH, cls())
    gc.collect()
    assert not tcheck.valid or not agree(tcheck, Obj())


def test_check_built_from_dead_leaves_never_hits() -> None:
    """A check rebuilt from the leaves of a dead object's check rejects a new object at its id."""
    o = Obj()
    check = check_on(GB.ID_MATCH, o)
    old = id(o)
    del o
    n, _keep = _reused(old)
    again = CheckFunction(check.leaves, check.guards, name="again", arg_names=("x",),
                          f_globals=None)
    assert not again.fn(n)


DEADLOCK_SCRIPT = textwrap.dedent("""
    import gc, os, threading
    from jitguard import GuardBuilder as GB, LocalSource, compile_guards

    class O:
        pass

    names = ["x"] + [f"y{i}" for i in range(8)]
    for k in range(1, 60):
        gc.disable()
        holder = [O()]
        cyclic = [O() for _ in range(8)]
        for o in cyclic:
            o.self = o
        del o
        check = compile_guards([LocalSource(n).make_guard(GB.ID_MATCH) for n in names],
                               f_locals=dict(zip(names, [holder[0], *cyclic])), arg_names=names)
        gc.collect(0)
        cyclic.clear()  # garbage, collected by the next gen-1 collection

        def run():
            gc.set_threshold(1, k)  # a gen-1 collection after k allocations
            gc.enable()
            holder.clear()  # its death invalidates the check, allocating under its lock
            gc.disable()

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(2.0)
        if t.is_alive():
            print("DEADLOCK", k, flush=True)
            os._exit(1)
        gc.set_threshold(700, 10, 10)
        gc.enable()
        gc.collect()
    print("ok", flush=True)
""")


def test_invalidation_reentered_from_gc_does_not_deadlock() -> None:
    """Two guarded objects dying in one collection, one inside the other's invalidation."""
    out = subprocess.run([sys.executable, "-c", DEADLOCK_SCRIPT], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr


# ---- differential: compiled vs reference on adversarial values ----------------------------


class Weird:
    """== is always True, __len__ returns a bool, attributes exist."""

    a = 1

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__

    def __len__(self) -> int:
        return True  # type: ignore[return-value]

    def __getitem__(self, key: Any) -> Any:
        # An int key past 64 ends the old sequence protocol: ``"a" in Weird()`` and
        # ``list(Weird())`` stop instead of iterating forever (a guard that iterates it
        # once hung a hypothesis run past pytest-timeout's single alarm).
        if type(key) is int and key >= 64:
            raise IndexError(key)
        return key


class NT(tuple):  # type: ignore[type-arg]
    _fields = ("a",)


SHARED: list[Any] = [1]
POOL: list[Any] = [
    0, 1, -1, True, False, 0.0, -0.0, 1.0, float("nan"), float("inf"), 1j, complex(0, -0.0),
    "a", S("a"), b"a", None, (), (1,), (1.0,), (True,), (1, (2,)), [1], [1.0], SHARED, [SHARED],
    {}, {"a": 1}, {"a": True}, {1: 0}, {True: 0}, {"a": SHARED}, frozenset({1}),
    frozenset({True}), range(0, 4, 2), slice(0, 2), Hostile(), Weird(), Impostor(), Obj(),
    NT((1,)), FloatEnum.ONE, len, math, Obj, RaisingClass(), lambda: 0,
]
SOURCES = [X, GetItemSource(X, 0), GetItemSource(X, "a"), AttrSource(X, "a"),
           LocalSource("y")]
KINDS = [GB.TYPE_MATCH, GB.ID_MATCH, GB.CONSTANT_MATCH, GB.EQUALS_MATCH, GB.NOT_NONE,
         GB.LENGTH_CHECK, GB.SEQUENCE_LENGTH, GB.DICT_KEYS_MATCH, GB.HASATTR, GB.NOT_HASATTR,
         GB.FUNCTION_MATCH, functools.partial(GB.DICT_CONTAINS, key="a"),
         functools.partial(GB.DUPLICATE_INPUT, source_b=LocalSource("y")),
         functools.partial(GB.NO_ALIASING, others=(LocalSource("y"),))]
index = st.integers(0, len(POOL) - 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(SOURCES) - 1), st.integers(0, len(KINDS) - 1)),
                min_size=1, max_size=5), index, index, st.lists(st.tuples(index, index),
                                                                max_size=8))
def test_compiled_agrees_with_reference_on_hostile_values(
    spec: list[tuple[int, int]], bx: int, by: int, calls: list[tuple[int, int]]
) -> None:
    """Random guards built on hostile values: the compiled check never raises and always gives
    the reference evaluator's answer (a guard that cannot be built is skipped)."""
    frame = {"x": POOL[bx], "y": POOL[by]}
    guards = []
    for s, k in spec:
        guard = SOURCES[s].make_guard(KINDS[k])
        try:  # keep only the guards that can be built on this frame
            compile_guards([guard], f_locals=frame, arg_names=["x", "y"])
        except Exception:
            continue
        guards.append(SOURCES[s].make_guard(KINDS[k]))
    if not guards:
        return
    check = compile_guards(guards, f_locals=frame, arg_names=["x", "y"])
    assert agree(check, frame["x"], frame["y"])
    for cx, cy in calls:
        agree(check, POOL[cx], POOL[cy])
