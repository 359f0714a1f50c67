"""The global-state registry and the lazy integration loaders it triggers."""

from __future__ import annotations

import dataclasses
import sys
import threading
import types
from typing import Any

import pytest

from jitguard import GlobalState, JitGuardError, global_states, register_global_state
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
