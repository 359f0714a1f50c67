"""The global-state registry, its groups (fast checkers for several states, [Note:
Global-state groups]) and the lazy integration loaders it triggers."""

from __future__ import annotations

import dataclasses
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jitguard import (
    GlobalState,
    GlobalStateGroup,
    GlobalStateSource,
    GuardBuilder,
    JitGuardError,
    compile_guards,
    global_states,
    register_global_state,
)
from jitguard._src import integrations
from jitguard._src.global_state import GlobalStateRegistry


def test_register_and_get() -> None:
    """A registered state is found by name with its read, write and flags."""
    reg = GlobalStateRegistry()
    box = {"v": 1}
    state = reg.register("v", lambda: box["v"], write=lambda v: box.update(v=v), guarded=False)
    assert isinstance(state, GlobalState)
    assert reg.get("v") is state
    assert state.name == "v" and state.read() == 1 and state.guarded is False
    assert state.write is not None
    state.write(5)
    assert box["v"] == 5
    assert "v" in reg and "w" not in reg


def test_global_state_defaults_and_frozen() -> None:
    """GlobalState defaults: no writer, guarded, described with repr; it is immutable."""
    s = GlobalState("n", lambda: 0)
    assert s.write is None and s.guarded is True and s.describe(["a"]) == "['a']"
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.name = "m"  # type: ignore[misc]


def test_states_in_registration_order() -> None:
    """states() lists states in the order they were registered."""
    reg = GlobalStateRegistry()
    for name in ("c", "a", "b"):
        reg.register(name, lambda: 0)
    assert [s.name for s in reg.states()] == ["c", "a", "b"]


def test_guarded_and_restorable_filters() -> None:
    """guarded() keeps guarded states; restorable() keeps states with a writer."""
    reg = GlobalStateRegistry()
    reg.register("both", lambda: 0, write=lambda v: None)
    reg.register("unguarded", lambda: 0, write=lambda v: None, guarded=False)
    reg.register("readonly", lambda: 0)
    assert [s.name for s in reg.guarded()] == ["both", "readonly"]
    assert [s.name for s in reg.restorable()] == ["both", "unguarded"]


def test_duplicate_registration_is_an_error() -> None:
    """Registering a name twice fails unless replace=True, which redefines it in place."""
    reg = GlobalStateRegistry()
    reg.register("a", lambda: 1)
    reg.register("b", lambda: 2)
    with pytest.raises(JitGuardError, match="already registered"):
        reg.register("a", lambda: 3)
    assert reg.get("a").read() == 1
    reg.register("a", lambda: 4, replace=True)
    assert reg.get("a").read() == 4
    assert [s.name for s in reg.states()] == ["a", "b"]


def test_read_must_be_callable() -> None:
    """A non-callable read is a TypeError and registers nothing."""
    reg = GlobalStateRegistry()
    with pytest.raises(TypeError, match="read must be callable"):
        reg.register("x", 5)  # type: ignore[arg-type]
    assert "x" not in reg


def test_unregister() -> None:
    """unregister removes a state; an unknown name is a KeyError."""
    reg = GlobalStateRegistry()
    reg.register("a", lambda: 1)
    reg.unregister("a")
    assert "a" not in reg and reg.states() == ()
    with pytest.raises(KeyError, match="no global state named 'a'"):
        reg.unregister("a")


def test_get_unknown_names_the_registered_states() -> None:
    """get() of an unknown name is a KeyError listing what is registered."""
    reg = GlobalStateRegistry()
    reg.register("known", lambda: 1)
    with pytest.raises(KeyError, match=r"registered: \['known'\]"):
        reg.get("unknown")


def test_public_registry_is_the_module_registry() -> None:
    """jitguard.register_global_state registers into jitguard.global_states."""
    register_global_state("test_global_state_public", lambda: 7)
    try:
        assert global_states.get("test_global_state_public").read() == 7
    finally:
        global_states.unregister("test_global_state_public")
    assert "test_global_state_public" not in global_states


def test_concurrent_registration_keeps_every_state() -> None:
    """Registration from many threads at once loses nothing."""
    reg = GlobalStateRegistry()

    def work(i: int) -> None:
        for j in range(50):
            reg.register(f"s{i}_{j}", lambda: 0)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(reg.states()) == 400


# ---- groups -------------------------------------------------------------------------------


class Knobs:
    """Plain dict-backed states and a fake group over some of them: its snapshot copies the
    values, its checker compares them all in one call (and counts the calls)."""

    def __init__(self, **values: Any) -> None:
        self.values = dict(values)
        self.snapshots = 0
        self.checks = 0

    def reader(self, name: str) -> Callable[[], Any]:
        return lambda: self.values[name]

    def snapshot(self, names: tuple[str, ...]) -> Callable[[], Callable[[], bool]]:
        def take() -> Callable[[], bool]:
            self.snapshots += 1
            saved = {n: self.values[n] for n in names}

            def unchanged() -> bool:
                self.checks += 1
                return all(self.values[n] == v for n, v in saved.items())

            return unchanged

        return take


def knob_registry(**values: Any) -> tuple[GlobalStateRegistry, Knobs]:
    knobs = Knobs(**values)
    reg = GlobalStateRegistry()
    for name in values:
        reg.register(name, knobs.reader(name))
    return reg, knobs


def test_register_group_and_snapshot() -> None:
    """A group names registered states; snapshot() reads every guarded state and takes one
    snapshot per covering group; the states no group covers are left to read one by one."""
    reg, knobs = knob_registry(a=1, b=2, c=3)
    group = reg.register_group("ab", ["a", "b"], knobs.snapshot(("a", "b")))
    assert isinstance(group, GlobalStateGroup)
    assert group.names == ("a", "b") and group.members == (reg.get("a"), reg.get("b"))
    assert reg.groups() == (group,) and reg.is_active(group)
    snap = reg.snapshot()
    assert [(s.name, v) for s, v in snap.values] == [("a", 1), ("b", 2), ("c", 3)]
    assert [g for g, _ in snap.checks] == [group] and knobs.snapshots == 1
    assert [(s.name, v) for s, v in snap.rest] == [("c", 3)]
    (_, check), = snap.checks
    assert check()
    knobs.values["b"] = 5
    assert not check()


def test_register_group_validation() -> None:
    """Members must be registered states; a group needs members, a callable snapshot and,
    to be registered again, replace=True; unregister_group of an unknown name is a KeyError."""
    reg, knobs = knob_registry(a=1)
    with pytest.raises(JitGuardError, match=r"\['zz'\] are not registered"):
        reg.register_group("g", ["a", "zz"], knobs.snapshot(("a",)))
    with pytest.raises(JitGuardError, match="has no members"):
        reg.register_group("g", [], knobs.snapshot(()))
    with pytest.raises(TypeError, match="snapshot must be callable"):
        reg.register_group("g", ["a"], None)  # type: ignore[arg-type]
    reg.register_group("g", ["a", "a"], knobs.snapshot(("a",)))
    assert reg.groups()[0].names == ("a",)
    with pytest.raises(JitGuardError, match="already registered"):
        reg.register_group("g", ["a"], knobs.snapshot(("a",)))
    reg.register_group("g", ["a"], knobs.snapshot(("a",)), replace=True)
    reg.unregister_group("g")
    assert reg.groups() == ()
    with pytest.raises(KeyError, match="no global state group named 'g'"):
        reg.unregister_group("g")


def test_group_needs_every_member_guarded() -> None:
    """A group with an unguarded member covers nothing: every guarded state is read alone."""
    reg, knobs = knob_registry(a=1)
    reg.register("b", knobs.reader("a"), guarded=False)
    reg.register_group("ab", ["a", "b"], knobs.snapshot(("a",)))
    snap = reg.snapshot()
    assert snap.checks == () and [s.name for s, _ in snap.rest] == ["a"]
    assert knobs.snapshots == 0


def test_replacing_or_unregistering_a_member_retires_the_group() -> None:
    """The checker knew the members' old reads: a member registered again (replace=True) or
    unregistered makes the group inactive, and its states are read one by one."""
    reg, knobs = knob_registry(a=1, b=2)
    group = reg.register_group("ab", ["a", "b"], knobs.snapshot(("a", "b")))
    reg.register("a", lambda: 10, replace=True)
    assert not reg.is_active(group) and reg.covering(reg.guarded()) == ()
    snap = reg.snapshot()
    assert snap.checks == () and [(s.name, v) for s, v in snap.rest] == [("a", 10), ("b", 2)]
    reg.register_group("ab", ["a", "b"], knobs.snapshot(("a", "b")), replace=True)
    assert len(reg.snapshot().checks) == 1
    reg.unregister("b")
    assert reg.snapshot().checks == ()


@pytest.fixture
def knob_group() -> Iterator[Knobs]:
    """Two states covered by a group and one that no group covers, in the public registry."""
    knobs = Knobs(test_gs_a=1, test_gs_b="x", test_gs_lone=0.5)
    for name in knobs.values:
        register_global_state(name, knobs.reader(name))
    global_states.register_group(
        "test_gs_group", ["test_gs_a", "test_gs_b"], knobs.snapshot(("test_gs_a", "test_gs_b"))
    )
    try:
        yield knobs
    finally:
        global_states.unregister_group("test_gs_group")
        for name in knobs.values:
            global_states.unregister(name)


def state_check() -> Any:
    return compile_guards([GlobalStateSource().make_guard(GuardBuilder.GLOBAL_STATE)], f_locals={})


def failure(check: Any) -> str:
    assert check.fn({}) is False and check.reference({}) is False
    (f,) = check.explain({})
    assert f.kind == "GLOBAL_STATE"
    return str(f.reason)


def test_global_state_calls_the_group_checker(knob_group: Knobs) -> None:
    """GLOBAL_STATE calls the group's checker instead of reading its members, and still reads
    the state no group covers; the code lists every state."""
    check = state_check()
    assert knob_group.snapshots == 1
    assert "___check_test_gs_group_" in check.source
    assert "___read_test_gs_a_" not in check.source and "___read_test_gs_b_" not in check.source
    assert "___read_test_gs_lone_" in check.source
    assert "test_gs_a, test_gs_b, test_gs_lone" in check.leaves[0].guard.code_list[0]
    before = knob_group.checks
    assert check.fn({}) is True and check.reference({}) is True
    assert knob_group.checks == before + 1  # the reference read the states, not the group


def test_terms_checker_is_the_conjunction_of_its_terms() -> None:
    """``terms_checker`` holds while every read gives its value (``is`` for None, True and
    False, ``==`` otherwise: an equal int that is another object holds) and carries them."""
    from jitguard._src.global_state import terms_checker

    box: dict[str, Any] = {"flag": None, "n": 10 ** 20}
    terms = [(lambda: box["flag"], None), (lambda: box["n"], 10 ** 20)]
    check = terms_checker(terms)
    assert check() is True and list(check.terms) == terms  # type: ignore[attr-defined]
    box["n"] = int("1" + "0" * 20)
    assert check() is True
    box["flag"] = 0
    assert check() is False
    box["flag"], box["n"] = None, 5
    assert check() is False


def test_group_checker_terms_are_called_in_line() -> None:
    """A checker that carries ``terms`` ([Note: Global-state groups]) is not called: its
    reads are, in line, ``is`` for None/True/False and ``==`` otherwise; each changed read
    fails the check, and the reason names the state."""
    knobs = Knobs(test_gs_flag=True, test_gs_level=3)
    for name in knobs.values:
        register_global_state(name, knobs.reader(name))

    def flag() -> Any:
        return knobs.values["test_gs_flag"]

    def level() -> Any:
        return knobs.values["test_gs_level"]

    def take() -> Callable[[], bool]:
        was = (flag(), level())

        def unchanged() -> bool:
            raise AssertionError("the checker itself is not called")

        unchanged.terms = ((flag, was[0]), (level, was[1]))  # type: ignore[attr-defined]
        return unchanged

    global_states.register_group("test_gs_terms", ["test_gs_flag", "test_gs_level"], take)
    try:
        check = state_check()
        assert re.search(r"___test_gs_terms_flag_\d+\(\) is True and "
                         r"___test_gs_terms_level_\d+\(\) == ___test_gs_terms_level_was_\d+",
                         check.source), check.source
        assert check.fn({}) is True
        for name, value, text in (("test_gs_flag", False, "expected True, got False"),
                                  ("test_gs_level", 4, "expected 3, got 4")):
            old = knobs.values[name]
            knobs.values[name] = value
            assert failure(check) == f"GLOBAL_STATE changed: {name} ({text})"
            knobs.values[name] = old
        assert check.fn({}) is True
    finally:
        global_states.unregister_group("test_gs_terms")
        for name in knobs.values:
            global_states.unregister(name)


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("test_gs_a", 2, "test_gs_a (expected 1, got 2)"),
        ("test_gs_b", "y", "test_gs_b (expected 'x', got 'y')"),
        ("test_gs_lone", 0.25, "test_gs_lone (expected 0.5, got 0.25)"),
    ],
)
def test_group_and_reference_agree_on_each_state(
    knob_group: Knobs, name: str, value: Any, text: str
) -> None:
    """Changing any state fails the generated check (through the group or the lone read) and
    the reference, and the reason names that state; putting it back passes both again."""
    check = state_check()
    old = knob_group.values[name]
    knob_group.values[name] = value
    assert failure(check) == f"GLOBAL_STATE changed: {text}"
    knob_group.values[name] = old
    assert check.fn({}) is True and check.reference({}) is True


def test_state_registered_later_is_read_on_its_own(knob_group: Knobs) -> None:
    """A state registered after the group is not covered by it: it is read individually."""
    box = {"v": 1}
    register_global_state("test_gs_later", lambda: box["v"])
    try:
        check = state_check()
        assert "___check_test_gs_group_" in check.source and "___read_test_gs_later_" in check.source
        box["v"] = 2
        assert failure(check) == "GLOBAL_STATE changed: test_gs_later (expected 1, got 2)"
    finally:
        global_states.unregister("test_gs_later")


def test_replaced_member_falls_back_to_individual_reads(knob_group: Knobs) -> None:
    """After a member is redefined the group is retired and GLOBAL_STATE reads each state."""
    global_states.register("test_gs_a", lambda: 7, replace=True)
    check = state_check()
    assert "___check_test_gs_group_" not in check.source
    assert "___read_test_gs_a_" in check.source and "___read_test_gs_b_" in check.source
    knob_group.values["test_gs_b"] = "z"
    assert failure(check) == "GLOBAL_STATE changed: test_gs_b (expected 'x', got 'z')"


def test_a_checker_that_breaks_its_contract_is_named(knob_group: Knobs) -> None:
    """A checker that fails while every member reads the same: compile_guards refuses it (the
    check rejects its own frame); built anyway, the reference holds, and the kind's reason
    names the group."""
    global_states.register_group(
        "test_gs_group", ["test_gs_a", "test_gs_b"], lambda: (lambda: False), replace=True
    )
    guard = GlobalStateSource().make_guard(GuardBuilder.GLOBAL_STATE)
    with pytest.raises(JitGuardError, match="reject the frame they were built from"):
        compile_guards([guard], f_locals={})
    check = compile_guards([guard], f_locals={}, check_frame=False)
    assert check.fn({}) is False and check.reference({}) is True
    (leaf,) = check.leaves
    text = leaf.kind.reason("", None, leaf.params)
    assert text == "GLOBAL_STATE changed: group test_gs_group failed with every member unchanged"


# ---- lazy integrations -----------------------------------------------------------------


@pytest.fixture
def pending(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An isolated table of pending loaders."""
    table: dict[str, Any] = {}
    monkeypatch.setattr(integrations, "_pending", table)
    return table


TRIGGER = "jitguard_test_trigger_module"


def test_loader_runs_once_when_trigger_is_imported(
    pending: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loader waits until its trigger module is imported, then runs exactly once."""
    calls: list[str] = []
    integrations.register_loader(TRIGGER, lambda: calls.append("loaded"))
    integrations.ensure_loaded()
    assert calls == []
    monkeypatch.setitem(sys.modules, TRIGGER, types.ModuleType(TRIGGER))
    integrations.ensure_loaded()
    integrations.ensure_loaded()
    assert calls == ["loaded"]
    assert pending == {}


def test_trigger_set_to_none_counts_as_absent(
    pending: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """sys.modules[name] = None (an unimportable module) does not trigger its loader."""
    calls: list[str] = []
    integrations.register_loader(TRIGGER, lambda: calls.append("loaded"))
    monkeypatch.setitem(sys.modules, TRIGGER, None)
    integrations.ensure_loaded()
    assert calls == [] and TRIGGER in pending


def test_registry_read_runs_pending_loaders(
    pending: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the registry loads integrations first, so their states are listed."""
    reg = GlobalStateRegistry()
    integrations.register_loader(TRIGGER, lambda: reg.register("from_loader", lambda: 1))
    assert "from_loader" not in reg
    monkeypatch.setitem(sys.modules, TRIGGER, types.ModuleType(TRIGGER))
    assert [s.name for s in reg.states()] == ["from_loader"]


def test_owners_in_play_look_into_containers() -> None:
    """An owner is in play when one of its argument types is an argument, or sits one or two
    levels down in a list, tuple or dict; not deeper, and not for other types."""

    class Marker:
        pass

    reg = GlobalStateRegistry()
    assert reg.owners_in_play([Marker()]) == frozenset()
    reg.register_owner("lib", (Marker,))
    assert reg.owners_in_play([1, "a"]) == frozenset()
    assert reg.owners_in_play([1, Marker()]) == {"lib"}
    assert reg.owners_in_play([[1, (Marker(),)]]) == {"lib"}
    assert reg.owners_in_play([{"k": Marker()}]) == {"lib"}
    assert reg.owners_in_play([[[[Marker()]]]]) == frozenset()
    with pytest.raises(TypeError, match="register_owner takes a name and types"):
        reg.register_owner("lib", ("not a type",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="owner must be a str or None"):
        reg.register("s", lambda: 1, owner=3)  # type: ignore[arg-type]


class _Flag:
    value = 0


class _Marker:
    pass


@pytest.fixture
def owned_state() -> Iterator[None]:
    """A state owned by "demo", put in play by a _Marker argument."""
    register_global_state("demo_flag", lambda: _Flag.value, owner="demo")
    global_states.register_owner("demo", (_Marker,))
    try:
        yield
    finally:
        global_states.unregister("demo_flag")
        global_states._owner_types.pop("demo", None)
        _Flag.value = 0


@pytest.mark.usefixtures("owned_state")
def test_specialize_guards_a_librarys_state_only_where_it_is_in_play(dispatch_mode: str) -> None:
    """global_state=None: ints only, the owned state changing is no recompile; a _Marker
    argument, a compiler saying it reads the state, or global_state=True: a recompile."""
    from jitguard import cache_of, specialize

    def plain(n: int) -> int:
        return n + 1

    def marked(n: int, m: Any) -> int:
        return n + 2

    class Reads:
        reads_global_states = ("demo",)

        def __call__(self, request: Any) -> Any:
            return request.fn

    fs = [specialize(plain), specialize(marked), specialize(plain, compiler=Reads()),
          specialize(plain, global_state=True), specialize(marked, global_state=False)]
    marker = _Marker()

    def call_all() -> None:
        for f in fs:
            if cache_of(f).fn is marked:
                f(1, marker)
            else:
                f(1)

    call_all()
    _Flag.value = 1
    call_all()
    compiles = [cache_of(f).stats().compiles for f in fs]
    assert compiles == [1, 2, 2, 2, 1]
    reason = cache_of(fs[1]).reasons()[0]
    assert "GLOBAL_STATE changed: demo_flag" in reason, reason
