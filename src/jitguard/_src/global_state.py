"""The global-state registry: ambient process state (grad mode, autocast, ...) declares itself
once here, and both the GLOBAL_STATE guard kind and ``GlobalContext`` read it.

May import: errors, integrations.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any, Optional

from .errors import JitGuardError
from .integrations import ensure_loaded

__all__ = ["GlobalState", "GlobalStateRegistry", "global_states", "register_global_state"]


@dataclasses.dataclass(frozen=True)
class GlobalState:
    """One piece of ambient state.

    ``read()`` returns its current value (compared with ``==``); ``write(value)`` restores a
    value (``GlobalContext.restore_graphstate`` needs it); ``guarded`` says whether the
    GLOBAL_STATE guard checks it; ``describe`` turns a value into text for failure reasons.
    """

    name: str
    read: Callable[[], Any]
    write: Optional[Callable[[Any], Any]] = None
    guarded: bool = True
    describe: Callable[[Any], str] = repr


class GlobalStateRegistry:
    """Ordered, thread-safe registry of ``GlobalState``s, keyed by name."""

    def __init__(self) -> None:
        self._states: dict[str, GlobalState] = {}
        self._lock = threading.Lock()

    def register(
        self,
        name: str,
        read: Callable[[], Any],
        *,
        write: Optional[Callable[[Any], Any]] = None,
        guarded: bool = True,
        describe: Callable[[Any], str] = repr,
        replace: bool = False,
    ) -> GlobalState:
        """Declare a state. A second registration of a name is an error unless ``replace``."""
        if not callable(read):
            raise TypeError(f"global state {name!r}: read must be callable, got {read!r}")
        state = GlobalState(name, read, write, guarded, describe)
        with self._lock:
            if name in self._states and not replace:
                raise JitGuardError(
                    f"global state {name!r} is already registered; pass replace=True to "
                    f"redefine it or unregister({name!r}) first"
                )
            self._states[name] = state
        return state

    def unregister(self, name: str) -> None:
        with self._lock:
            if self._states.pop(name, None) is None:
                raise KeyError(f"no global state named {name!r} is registered")

    def states(self) -> tuple[GlobalState, ...]:
        """Every registered state, in registration order (loading lazy integrations first)."""
        ensure_loaded()
        return tuple(self._states.values())

    def guarded(self) -> tuple[GlobalState, ...]:
        return tuple(s for s in self.states() if s.guarded)

    def restorable(self) -> tuple[GlobalState, ...]:
        return tuple(s for s in self.states() if s.write is not None)

    def get(self, name: str) -> GlobalState:
        self.states()
        try:
            return self._states[name]
        except KeyError:
            raise KeyError(
                f"no global state named {name!r}; registered: {sorted(self._states)}"
            ) from None

    def __contains__(self, name: object) -> bool:
        self.states()
        return name in self._states


global_states = GlobalStateRegistry()
register_global_state = global_states.register
