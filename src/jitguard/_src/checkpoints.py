"""Checkpointable tracing state: the checkpoint-state classes, ``ModuleContext`` and
``GlobalContext``.

May import: _util, guards, global_state.

Deliberate differences from the specification, for all three checkpoint-state classes:
``==`` is symmetric (the specification's ``a == b`` only asks whether ``a`` has something
``b`` lacks, so ``a == b`` and ``b == a`` could disagree), the states are explicitly
unhashable (they are mutable), and no class-level mutable default is shared between
instances.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable
from typing import Any, Generic, Optional, TypeVar

from ._util import OrderedSet
from .global_state import global_states
from .guards import Guard

__all__ = [
    "Checkpointable",
    "GlobalContext",
    "GlobalContextCheckpointState",
    "GuardsCheckpointState",
    "ModuleContext",
    "ModuleContextCheckpointState",
]

T = TypeVar("T")


class Checkpointable(Generic[T]):
    """Something that can snapshot its state (``copy_graphstate``) and go back to a
    snapshot (``restore_graphstate``)."""

    @abstractmethod
    def copy_graphstate(self) -> T: ...

    @abstractmethod
    def restore_graphstate(self, state: T) -> None: ...


class _KeyedState:
    """Shared ``==`` of checkpoint states: equal when neither has what the other lacks."""

    def diff(self, other: Any) -> Optional[set[Any]]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        return self.diff(other) is None and other.diff(self) is None

    __hash__ = None  # type: ignore[assignment]


class GuardsCheckpointState(_KeyedState):
    """A snapshot of the guards installed so far (the T of ``GuardsContext``)."""

    def __init__(self, dynamo_guards: Iterable[Guard]) -> None:
        self.dynamo_guards = dynamo_guards

    def diff(self, other: GuardsCheckpointState) -> Optional[set[Guard]]:
        """The guards this snapshot has and ``other`` lacks, or None if there are none."""
        theirs = _as_container(other.dynamo_guards)
        r = {g for g in self.dynamo_guards if g not in theirs}
        return r or None


def _as_container(items: Iterable[Any]) -> Any:
    return items if isinstance(items, (set, frozenset, OrderedSet)) else set(items)


class ModuleContextCheckpointState(_KeyedState):
    """A snapshot of the modules registered while tracing, by name."""

    def __init__(self, nn_modules: dict[str, Any]) -> None:
        self.nn_modules = nn_modules

    def diff(self, other: ModuleContextCheckpointState) -> Optional[set[str]]:
        """Module names this snapshot has and ``other`` lacks, or None if there are none."""
        r = set(self.nn_modules) - set(other.nn_modules)
        return r or None


class ModuleContext(Checkpointable[ModuleContextCheckpointState]):
    """The modules a trace refers to, by name."""

    def __init__(self) -> None:
        self.nn_modules: dict[str, Any] = {}

    def copy_graphstate(self) -> ModuleContextCheckpointState:
        return ModuleContextCheckpointState(dict(self.nn_modules))

    def restore_graphstate(self, state: ModuleContextCheckpointState) -> None:
        if not isinstance(state, ModuleContextCheckpointState):
            raise AssertionError(f"expected a ModuleContextCheckpointState, got {state!r}")
        self.nn_modules = state.nn_modules


class GlobalContextCheckpointState(_KeyedState):
    """A snapshot of ambient state: name -> (setter, value)."""

    def __init__(self, global_states: dict[str, tuple[Callable[..., Any], Any]]) -> None:
        self.global_state = global_states

    def diff(self, other: GlobalContextCheckpointState) -> Optional[set[str]]:
        """State names this snapshot has and ``other`` lacks, or None if there are none."""
        r = set(self.global_state) - set(other.global_state)
        return r or None


# The specification's own list of restorable states. A snapshot holding exactly these is
# restored as the specification restores it, even where jitguard's registry knows more.
SPEC_GLOBAL_STATES = frozenset({
    "grad_enabled", "autocast_enabled", "autocast_cpu_enabled", "autocast_gpu_dtype",
    "autocast_cpu_dtype", "autocast_cache_enabled",
})


class _SupportedStates:
    """``GlobalContext._supported_global_states``: the names of the restorable states in the
    global-state registry, read when asked (torch's join once torch is imported)."""

    def __get__(self, obj: object, owner: type) -> frozenset[str]:
        return frozenset(s.name for s in global_states.restorable())


class GlobalContext(Checkpointable[GlobalContextCheckpointState]):
    """The ambient state a trace ran under, so it can be restored.

    The states it knows are the restorable ones of the global-state registry
    (``jitguard.register_global_state(..., write=...)``); the torch integration registers
    ``grad_enabled``, ``autocast_enabled``, ``autocast_cpu_enabled``, ``autocast_gpu_dtype``,
    ``autocast_cpu_dtype`` and ``autocast_cache_enabled`` as the specification lists.

    Differs from the specification: ``copy_graphstate`` returns a copy of the dict, not the
    live one, so a later change cannot alter a taken snapshot.
    """

    _supported_global_states = _SupportedStates()

    def __init__(self) -> None:
        self.global_state: dict[str, tuple[Callable[..., Any], Any]] = {}

    def save(self) -> None:
        """Fill ``global_state`` with every restorable state's setter and current value."""
        self.global_state = {s.name: (s.write, s.read()) for s in global_states.restorable()}  # type: ignore[misc]

    def copy_graphstate(self) -> GlobalContextCheckpointState:
        return GlobalContextCheckpointState(dict(self.global_state))

    def restore_graphstate(self, state: GlobalContextCheckpointState) -> None:
        """Adopt ``state`` and call each setter with its value. The snapshot must hold
        exactly the supported states, or exactly the specification's six
        (``SPEC_GLOBAL_STATES``: a snapshot made as the specification makes one)."""
        if not isinstance(state, GlobalContextCheckpointState):
            raise AssertionError(f"expected a GlobalContextCheckpointState, got {state!r}")
        self.global_state = state.global_state
        supported = self._supported_global_states
        names = set(self.global_state)
        if names != supported and names != SPEC_GLOBAL_STATES:
            raise AssertionError(
                f"Global state mismatch: the snapshot holds {sorted(self.global_state)}, the "
                f"registry's restorable states are {sorted(supported)} (or the specification's "
                f"{sorted(SPEC_GLOBAL_STATES)})"
            )
        for func, args in self.global_state.values():
            func(args)
