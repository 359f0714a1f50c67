"""The global-state registry: ambient process state (grad mode, autocast, ...) declares itself
once here, and both the GLOBAL_STATE guard kind and ``GlobalContext`` read it.

May import: errors, integrations.

# [Note: Global-state groups]
# GLOBAL_STATE means one thing: every guarded state still reads (``==``) the value it had
# when the guard was built. Checking that with one Python read and compare per state costs
# ~0.1-0.3 us a state: microseconds with torch's states, on every hit. A *group* is a fast checker
# for several states at once: ``register_group(name, members, snapshot)``, where
# ``snapshot()`` (called when a guard is built) returns a checker, and calling the checker
# later returns True iff every member still has the value it had at snapshot time. The
# torch integration's group is torch's C++ ``GlobalStateGuard`` plus a few reads.
#
# The contract that keeps one meaning: a group's checker is *exactly* the conjunction of its
# members' ``read() == value`` (no looser, no stricter), so a state that a checker covers
# must be registered as an individual state too, and ``holds``/``reason`` (which read the
# states one by one) agree with the generated check: whenever a checker fails, some member
# reads differently, and the failure reason names it. A group is used only while each of
# its members is still the registered state of that name (``register(..., replace=True)`` of
# a member, or ``unregister``, retires the group: its checker knew the old read) and guarded;
# ``covering(states)`` picks the usable groups, and every guarded state no usable group
# covers is read individually. So a state registered later is never skipped: it is checked
# on its own until a group that names it is registered.
#
# A checker may also carry ``terms``: a tuple of ``(read, expected)`` pairs, ``read`` a
# no-argument callable, whose conjunction (``read() is expected`` for None, True and False,
# else ``read() == expected``), in order, is exactly what calling the checker returns.
# Generated checks then call the reads in line, with no Python frame of the checker's own
# between them (the torch group's common case: three C calls, ~60 ns less a hit).
# ``terms_checker(terms)`` makes such a checker from its terms alone, so the two cannot
# say different things.
#
# [Note: Global states in play]
# A state belongs to an owner (``owner="torch"`` for the torch integration's; None for one
# the application registers). A ``specialize``d function with ``global_state=None`` (the
# default) guards the application's states always, and an owner's only where that owner is
# in play: an argument of a type it registered (``register_owner``: torch registers
# ``torch.Tensor`` and ``torch.nn.Module``), at the top or inside a list, tuple or dict, or
# a compiler that says it reads them (``reads_global_states``: True for every owner, or the
# owners' names). So a pure-Python function on ints does not recompile under
# ``torch.no_grad()`` just because torch is imported. ``global_state=True`` guards every
# state, ``False`` none. jitguard.torch.compile guards torch's states through torch's own
# guards, not this.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Optional

from .errors import JitGuardError
from .integrations import ensure_loaded

__all__ = [
    "GlobalState",
    "GlobalStateGroup",
    "GlobalStateRegistry",
    "GlobalStateSnapshot",
    "global_states",
    "register_global_state",
    "terms_checker",
]


def terms_checker(terms: Sequence[tuple[Callable[[], Any], Any]]) -> Callable[[], bool]:
    """A group checker that is the conjunction of ``terms`` and carries them
    ([Note: Global-state groups]): each ``read() is expected`` for None, True and False,
    else ``read() == expected``, in order."""
    held = tuple(terms)

    def unchanged() -> bool:
        for read, expected in held:
            got = read()
            if expected is None or expected is True or expected is False:
                if got is not expected:
                    return False
            elif not got == expected:
                return False
        return True

    unchanged.terms = held  # type: ignore[attr-defined]
    return unchanged


@dataclasses.dataclass(frozen=True)
class GlobalState:
    """One piece of ambient state.

    ``read()`` returns its current value (compared with ``==``); ``write(value)`` restores a
    value (``GlobalContext.restore_graphstate`` needs it); ``guarded`` says whether the
    GLOBAL_STATE guard checks it; ``describe`` turns a value into text for failure reasons;
    ``owner`` names the library it belongs to ("torch"; None: the application's), see
    [Note: Global states in play].
    """

    name: str
    read: Callable[[], Any]
    write: Optional[Callable[[Any], Any]] = None
    guarded: bool = True
    describe: Callable[[Any], str] = repr
    owner: Optional[str] = None


@dataclasses.dataclass(frozen=True, eq=False)
class GlobalStateGroup:
    """A fast checker for several states (see [Note: Global-state groups]).

    ``members`` are the ``GlobalState`` objects it covers, as registered when the group was;
    ``snapshot()`` captures their current values and returns a zero-argument checker that
    returns True iff every member still has its captured value.
    """

    name: str
    members: tuple[GlobalState, ...]
    snapshot: Callable[[], Callable[[], Any]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.members)


class GlobalStateSnapshot(NamedTuple):
    """The guarded states' values at one moment, and how to check them fast.

    ``values``: every guarded state with its value (the reference meaning reads them one by
    one); ``checks``: each usable group with the checker its ``snapshot()`` returned;
    ``rest``: the ``values`` entries that no group in ``checks`` covers.
    """

    values: tuple[tuple[GlobalState, Any], ...]
    checks: tuple[tuple[GlobalStateGroup, Callable[[], Any]], ...]
    rest: tuple[tuple[GlobalState, Any], ...]


class GlobalStateRegistry:
    """Ordered, thread-safe registry of ``GlobalState``s, keyed by name, and of the
    ``GlobalStateGroup``s that check several of them at once."""

    def __init__(self) -> None:
        self._states: dict[str, GlobalState] = {}
        self._groups: dict[str, GlobalStateGroup] = {}
        # owner -> the argument types that put its states in play
        self._owner_types: dict[str, tuple[type, ...]] = {}
        self._lock = threading.Lock()

    # ---- [Note: Global states in play] -----------------------------------------------------

    def register_owner(self, owner: str, arg_types: Iterable[type]) -> None:
        """Say that an argument of one of ``arg_types`` (or inside a list, tuple or dict
        argument) puts the states of ``owner`` in play for a specialized function."""
        types_ = tuple(arg_types)
        if not isinstance(owner, str) or not all(isinstance(t, type) for t in types_):
            raise TypeError(f"register_owner takes a name and types, got {owner!r}, {types_!r}")
        with self._lock:
            self._owner_types[owner] = types_

    def owners_in_play(self, values: Iterable[Any]) -> frozenset[str]:
        """The owners one of whose argument types is among ``values`` (looking one and two
        levels into lists, tuples and dicts)."""
        found: set[str] = set()
        owners = list(self._owner_types.items())
        if not owners:
            return frozenset()

        def scan(value: Any, depth: int) -> None:
            # By the value's type, never isinstance: that reads ``value.__class__``, which a
            # proxy may make raise or lie. A type whose check raises puts every owner in play
            # (more guards, never fewer).
            tp = type(value)
            for owner, types_ in owners:
                if owner in found:
                    continue
                try:
                    hit = issubclass(tp, types_)
                except Exception:
                    hit = True
                if hit:
                    found.add(owner)
            # By identity: a metaclass's __eq__ may claim to equal list.
            if depth < 2 and (tp is list or tp is tuple or tp is dict):
                for item in (dict.values(value) if tp is dict else value):
                    scan(item, depth + 1)

        for value in values:
            scan(value, 0)
        return frozenset(found)

    def register(
        self,
        name: str,
        read: Callable[[], Any],
        *,
        write: Optional[Callable[[Any], Any]] = None,
        guarded: bool = True,
        describe: Callable[[Any], str] = repr,
        replace: bool = False,
        owner: Optional[str] = None,
    ) -> GlobalState:
        """Declare a state. A second registration of a name is an error unless ``replace``."""
        if not callable(read):
            raise TypeError(f"global state {name!r}: read must be callable, got {read!r}")
        if owner is not None and not isinstance(owner, str):
            raise TypeError(f"global state {name!r}: owner must be a str or None, got {owner!r}")
        state = GlobalState(name, read, write, guarded, describe, owner)
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

    # ---- groups ([Note: Global-state groups]) ----------------------------------------------

    def register_group(
        self,
        name: str,
        members: Iterable[str],
        snapshot: Callable[[], Callable[[], Any]],
        *,
        replace: bool = False,
    ) -> GlobalStateGroup:
        """Declare a fast checker for the registered states named by ``members``.

        ``snapshot()`` must return a checker whose result is exactly "every member still
        reads its snapshot-time value". Members must be registered first; registering one of
        them again later retires the group.
        """
        if not callable(snapshot):
            raise TypeError(f"global state group {name!r}: snapshot must be callable")
        names = tuple(dict.fromkeys(members))
        if not names:
            raise JitGuardError(f"global state group {name!r} has no members")
        with self._lock:
            missing = [n for n in names if n not in self._states]
            if missing:
                raise JitGuardError(
                    f"global state group {name!r}: {missing} are not registered states; "
                    f"register every member first"
                )
            if name in self._groups and not replace:
                raise JitGuardError(
                    f"global state group {name!r} is already registered; pass replace=True"
                )
            group = GlobalStateGroup(name, tuple(self._states[n] for n in names), snapshot)
            self._groups[name] = group
        return group

    def unregister_group(self, name: str) -> None:
        with self._lock:
            if self._groups.pop(name, None) is None:
                raise KeyError(f"no global state group named {name!r} is registered")

    def groups(self) -> tuple[GlobalStateGroup, ...]:
        """Every registered group, in registration order (loading lazy integrations first)."""
        ensure_loaded()
        return tuple(self._groups.values())

    def is_active(self, group: GlobalStateGroup) -> bool:
        """Whether every member of ``group`` is still the registered state of its name."""
        return all(self._states.get(s.name) is s for s in group.members)

    def covering(self, states: Iterable[GlobalState]) -> tuple[GlobalStateGroup, ...]:
        """The active groups whose members are all among ``states`` (e.g. ``guarded()``)."""
        present = {id(s) for s in states}
        return tuple(
            g for g in self.groups()
            if self.is_active(g) and all(id(s) in present for s in g.members)
        )

    def snapshot(self, names: Optional[Iterable[str]] = None) -> GlobalStateSnapshot:
        """Read every guarded state (or, with ``names``, exactly the states named, guarded
        or not) and take one snapshot per group that covers only those states (what a
        GLOBAL_STATE guard holds on to)."""
        chosen = self.guarded() if names is None else self.named(names)
        values = tuple((s, s.read()) for s in chosen)
        groups = self.covering(chosen)
        checks = tuple((g, g.snapshot()) for g in groups)
        covered = {id(s) for g in groups for s in g.members}
        rest = tuple((s, v) for s, v in values if id(s) not in covered)
        return GlobalStateSnapshot(values, checks, rest)

    def named(self, names: Iterable[str]) -> tuple[GlobalState, ...]:
        """The registered states of these names, in registration order; an unknown name is
        an error that lists the registered ones."""
        wanted = set(names)
        states = self.states()
        unknown = wanted - {s.name for s in states}
        if unknown:
            raise JitGuardError(
                f"no global state named {', '.join(map(repr, sorted(unknown)))}; registered: "
                f"{sorted(s.name for s in states)}"
            )
        return tuple(s for s in states if s.name in wanted)


global_states = GlobalStateRegistry()
register_global_state = global_states.register
