"""Checkpoint states, ModuleContext and GlobalContext."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jitguard import (
    Checkpointable,
    GlobalContext,
    GlobalContextCheckpointState,
    Guard,
    GuardsCheckpointState,
    LocalSource,
    ModuleContext,
    ModuleContextCheckpointState,
    global_states,
    register_global_state,
)
from jitguard._src._util import OrderedSet


def EQUALS_MATCH(builder: Any, guard: Any) -> None:
    pass


def guard(name: str) -> Guard:
    return Guard(LocalSource(name), EQUALS_MATCH)


# ---- GuardsCheckpointState -------------------------------------------------------------


def test_guards_state_diff() -> None:
    """diff is the guards this state has and the other lacks, or None."""
    a = GuardsCheckpointState({guard("x"), guard("y")})
    b = GuardsCheckpointState({guard("x")})
    assert a.diff(b) == {guard("y")}
    assert b.diff(a) is None
    assert a.diff(GuardsCheckpointState({guard("x"), guard("y")})) is None


def test_guards_state_eq_is_symmetric() -> None:
    """A subset is not equal to its superset in either direction (spec bug fixed)."""
    small = GuardsCheckpointState({guard("x")})
    big = GuardsCheckpointState({guard("x"), guard("y")})
    assert small != big and big != small
    same = GuardsCheckpointState(OrderedSet([guard("y"), guard("x")]))
    assert big == same and same == big


def test_guards_state_accepts_any_iterable() -> None:
    """The guards may be a set, an OrderedSet or a list; identically built guards match."""
    a = GuardsCheckpointState([guard("x")])
    b = GuardsCheckpointState(OrderedSet([guard("x")]))
    assert a == b
    assert GuardsCheckpointState([guard("x"), guard("z")]).diff(a) == {guard("z")}


def test_checkpoint_states_are_unhashable() -> None:
    """The mutable checkpoint states refuse to be hashed."""
    for state in (
        GuardsCheckpointState(set()),
        ModuleContextCheckpointState({}),
        GlobalContextCheckpointState({}),
    ):
        with pytest.raises(TypeError):
            hash(state)


def test_checkpoint_states_not_equal_across_types() -> None:
    """States of different kinds, or non-states, are never equal."""
    assert ModuleContextCheckpointState({}) != GlobalContextCheckpointState({})
    assert GuardsCheckpointState(set()) != set()
    assert ModuleContextCheckpointState({}) != {}


def test_checkpoint_states_share_no_default() -> None:
    """Each state owns its container: there is no class-level mutable default."""
    for cls in (GuardsCheckpointState, ModuleContextCheckpointState, GlobalContextCheckpointState):
        assert not any(isinstance(v, (set, dict, list)) for v in vars(cls).values()), cls


# ---- ModuleContext ---------------------------------------------------------------------


def test_module_state_diff_and_eq() -> None:
    """Module states diff by name and compare symmetrically."""
    a = ModuleContextCheckpointState({"m": object(), "n": object()})
    b = ModuleContextCheckpointState({"m": object()})
    assert a.diff(b) == {"n"} and b.diff(a) is None
    assert a != b and b != a
    assert b == ModuleContextCheckpointState({"m": 1})


def test_module_context_round_trip() -> None:
    """copy_graphstate snapshots the modules; restore_graphstate brings them back."""
    ctx = ModuleContext()
    assert isinstance(ctx, Checkpointable)
    m1, m2 = object(), object()
    ctx.nn_modules["a"] = m1
    snap = ctx.copy_graphstate()
    ctx.nn_modules["b"] = m2
    assert snap.nn_modules == {"a": m1}, "a snapshot must not see later additions"
    assert ctx.copy_graphstate() != snap
    ctx.restore_graphstate(snap)
    assert ctx.nn_modules == {"a": m1}
    assert ctx.copy_graphstate() == snap


def test_module_context_restore_wrong_type() -> None:
    """Restoring something that is not a module state is an AssertionError."""
    with pytest.raises(AssertionError, match="ModuleContextCheckpointState"):
        ModuleContext().restore_graphstate(GlobalContextCheckpointState({}))  # type: ignore[arg-type]


# ---- GlobalContext ---------------------------------------------------------------------


class Knob:
    def __init__(self, value: Any) -> None:
        self.value = value
        self.writes: list[Any] = []

    def read(self) -> Any:
        return self.value

    def write(self, value: Any) -> None:
        self.writes.append(value)
        self.value = value


@pytest.fixture
def knob() -> Iterator[Knob]:
    k = Knob("initial")
    register_global_state("test_checkpoints_knob", k.read, write=k.write)
    register_global_state("test_checkpoints_readonly", lambda: 1)
    try:
        yield k
    finally:
        global_states.unregister("test_checkpoints_knob")
        global_states.unregister("test_checkpoints_readonly")


def test_global_state_diff_and_eq() -> None:
    """Global states diff by name and compare symmetrically."""
    a = GlobalContextCheckpointState({"g": (print, 1), "h": (print, 2)})
    b = GlobalContextCheckpointState({"g": (print, 1)})
    assert a.diff(b) == {"h"} and b.diff(a) is None
    assert a != b and b != a


def test_supported_states_are_the_registry_restorable_states(knob: Knob) -> None:
    """_supported_global_states lists exactly the registered states that have a writer."""
    supported = GlobalContext._supported_global_states
    assert "test_checkpoints_knob" in supported
    assert "test_checkpoints_readonly" not in supported
    assert supported == {s.name for s in global_states.restorable()}


def test_supported_states_follow_unregistration() -> None:
    """A state unregistered from the registry is no longer supported."""
    register_global_state("test_checkpoints_temp", lambda: 0, write=lambda v: None)
    assert "test_checkpoints_temp" in GlobalContext._supported_global_states
    global_states.unregister("test_checkpoints_temp")
    assert "test_checkpoints_temp" not in GlobalContext._supported_global_states


def test_restore_accepts_the_specification_six(knob: Knob) -> None:
    """A snapshot of exactly the specification's six states is restored, without torch and
    whatever else the registry holds; five of them, or six plus an unknown name, are refused."""
    from jitguard._src.checkpoints import SPEC_GLOBAL_STATES

    called: list[str] = []
    six = {k: (lambda v, k=k: called.append(k), True) for k in SPEC_GLOBAL_STATES}
    GlobalContext().restore_graphstate(GlobalContextCheckpointState(six))
    assert sorted(called) == sorted(SPEC_GLOBAL_STATES)
    for bad in (dict(list(six.items())[1:]), {**six, "nonsense": (print, 0)}):
        with pytest.raises(AssertionError, match="Global state mismatch"):
            GlobalContext().restore_graphstate(GlobalContextCheckpointState(bad))


def test_save_reads_restorable_states(knob: Knob) -> None:
    """save() records each restorable state's setter and current value."""
    ctx = GlobalContext()
    ctx.save()
    assert ctx.global_state["test_checkpoints_knob"] == (knob.write, "initial")
    assert "test_checkpoints_readonly" not in ctx.global_state
    assert set(ctx.global_state) == GlobalContext._supported_global_states


def test_copy_graphstate_is_a_copy(knob: Knob) -> None:
    """A later change to global_state does not alter a taken snapshot (spec bug fixed)."""
    ctx = GlobalContext()
    ctx.save()
    snap = ctx.copy_graphstate()
    ctx.global_state["test_checkpoints_knob"] = (knob.write, "changed")
    ctx.global_state["extra"] = (knob.write, 0)
    assert snap.global_state["test_checkpoints_knob"] == (knob.write, "initial")
    assert "extra" not in snap.global_state


def test_global_context_round_trip(knob: Knob) -> None:
    """save, copy, change the state, restore: the setter puts the saved value back."""
    ctx = GlobalContext()
    ctx.save()
    snap = ctx.copy_graphstate()
    knob.value = "changed"
    ctx.restore_graphstate(snap)
    assert knob.value == "initial"
    assert knob.writes == ["initial"]
    assert ctx.global_state == snap.global_state


def test_restore_asserts_exact_key_set(knob: Knob) -> None:
    """A snapshot missing a supported state, or with an unknown one, is refused."""
    ctx = GlobalContext()
    ctx.save()
    missing = dict(ctx.global_state)
    del missing["test_checkpoints_knob"]
    with pytest.raises(AssertionError, match="Global state mismatch"):
        ctx.restore_graphstate(GlobalContextCheckpointState(missing))
    extra = {**ctx.copy_graphstate().global_state, "bogus": (knob.write, 1)}
    with pytest.raises(AssertionError, match="bogus"):
        ctx.restore_graphstate(GlobalContextCheckpointState(extra))
    assert knob.writes == []


def test_global_context_restore_wrong_type() -> None:
    """Restoring something that is not a global state is an AssertionError."""
    with pytest.raises(AssertionError, match="GlobalContextCheckpointState"):
        GlobalContext().restore_graphstate(ModuleContextCheckpointState({}))  # type: ignore[arg-type]
