"""``CheckFunction`` with its code deferred ([Note: Deferred check code]): the same verdicts
as a check built at once, no code until one is needed, the same invalidation, and no
exception out of a check whose code cannot be generated."""

from __future__ import annotations

import gc
import linecache
from typing import Any

import pytest

import jitguard as jg
from jitguard import GuardBuilder as GB
from jitguard import GuardCompileError
from jitguard._src.compiler.builder import Leaf
from jitguard._src.compiler.kinds import EmitContext, GuardKind, guard_kinds
from jitguard.sources import AttrSource, GlobalSource, LocalSource


class Thing:
    """An object held weakly by identity."""

    def __init__(self, n: int) -> None:
        self.n = n


def _leaves(x: Any, t: Thing) -> tuple[list[Leaf], Any]:
    guards = [LocalSource("x").make_guard(GB.TYPE_MATCH),
              LocalSource("x").make_guard(GB.EQUALS_MATCH),
              LocalSource("t").make_guard(GB.ID_MATCH),
              AttrSource(LocalSource("t"), "n").make_guard(GB.EQUALS_MATCH)]
    built = jg.compile_guards(guards, f_locals={"x": x, "t": t}, arg_names=("x", "t"))
    return built.leaves, built


def _deferred(leaves: list[Leaf], name: str = "deferred") -> jg.CheckFunction:
    return jg.CheckFunction(leaves, [], name=name, arg_names=("x", "t"), f_globals=None,
                            deferred=True)


def test_a_deferred_check_gives_the_built_checks_verdicts() -> None:
    """Passing and failing arguments get the same answer from a deferred check as from
    the check built at once, and the first call generates the code."""
    t = Thing(3)
    leaves, built = _leaves(5, t)
    check = _deferred(leaves)
    assert check.deferred
    cases = [(5, t), (6, t), (5.0, t), (5, Thing(3))]
    assert [check.fn(*c) for c in cases] == [built.fn(*c) for c in cases] == [
        True, False, False, False]
    assert not check.deferred


def test_accepts_answers_without_generating_code() -> None:
    """``accepts`` gives the verdict of a deferred check through the reference evaluator:
    nothing is generated, and it agrees with the built check on both outcomes."""
    t = Thing(3)
    leaves, built = _leaves(5, t)
    check = _deferred(leaves, "accepts only")
    assert check.accepts(5, t) is True and built.fn(5, t)
    assert check.accepts(7, t) is False and not built.fn(7, t)
    assert check.deferred
    assert not any("accepts only" in f for f in linecache.cache)


def test_the_source_of_a_deferred_check_is_generated_when_asked_for() -> None:
    """``source`` and ``filenames`` generate the code, registered in linecache like any
    check's."""
    t = Thing(1)
    check = _deferred(_leaves(2, t)[0], "shown later")
    text = check.source
    assert not check.deferred and "def check_shown_later" in text
    assert check.filenames[0] in linecache.cache


def test_a_dead_object_invalidates_a_deferred_check_at_once() -> None:
    """An object the check holds by identity dies before any code exists: the check is
    invalid at once, says which source held it, and fails from then on."""
    t = Thing(3)
    check = _deferred(_leaves(5, t)[0])
    other = Thing(3)
    del t
    gc.collect()
    assert not check.valid
    assert "L['t']" in str(check.invalid_reason)
    assert check.fn(5, other) is False
    assert check.accepts(5, other) is False


def test_an_invalid_deferred_check_keeps_failing_after_a_front_took_its_stub() -> None:
    """Whoever took the stub before the check became invalid gets False, never the
    generated code."""
    t = Thing(3)
    check = _deferred(_leaves(5, t)[0])
    stub = check.fn
    check.invalidate("for the test")
    assert stub(5, t) is False and check.fn(5, t) is False


def test_a_root_the_check_cannot_read_is_refused_when_the_check_is_made() -> None:
    """A local that is not an argument, or a global with no globals given, is refused
    when the deferred check is made, as when the code is generated at once."""
    leaf = Leaf(guard_kinds()["EQUALS_MATCH"], (LocalSource("zz"),), 1)
    with pytest.raises(GuardCompileError, match=r"L\['zz'\] is not among"):
        jg.CheckFunction([leaf], [], name="bad", arg_names=("x", "t"), f_globals=None,
                         deferred=True)
    with pytest.raises(GuardCompileError, match="no f_globals"):
        jg.CheckFunction([Leaf(leaf.kind, (GlobalSource("g"),), 1)], [], name="bad",
                         arg_names=("x", "t"), f_globals=None, deferred=True)


class _Unwritable(GuardKind):
    """A kind whose code cannot be generated."""

    name = "TEST_UNWRITABLE"

    def holds(self, value: Any, params: Any) -> bool:
        return True

    def emit(self, var: str, params: Any, ctx: EmitContext) -> str:
        raise ValueError("no code for this kind")

    def code(self, name: str, params: Any) -> str:
        return f"{name} (unwritable)"


def test_code_that_cannot_be_generated_invalidates_instead_of_raising() -> None:
    """The stub of a deferred check whose code cannot be generated returns False and
    makes the check invalid, naming the error; ``build`` itself raises it."""
    leaf = Leaf(_Unwritable(), (LocalSource("x"),), None)
    check = jg.CheckFunction([leaf], [], name="unwritable", arg_names=("x", "t"),
                             f_globals=None, deferred=True)
    assert check.accepts(1, 2) is True
    assert check.fn(1, 2) is False
    assert not check.valid and "no code for this kind" in str(check.invalid_reason)
    again = jg.CheckFunction([leaf], [], name="unwritable", arg_names=("x", "t"),
                             f_globals=None, deferred=True)
    with pytest.raises(ValueError, match="no code for this kind"):
        again.build()
