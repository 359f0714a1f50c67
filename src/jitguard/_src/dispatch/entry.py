"""``CacheEntry``: one compiled specialization, the facts its guards pin, and how
specialized it is.

May import: _util, guards, ids, sources, compiler.*, dispatch.signature, dispatch.facts.

The facts an entry is keyed by are made in ``dispatch.facts`` ([Note: Facts of an entry]).

# [Note: Specificity]
# When several entries accept a call, the most specialized wins. An entry's specificity is
# the sum of its leaves' weights, which each kind declares ([Note: Kinds own their cache
# data]): 8 for a leaf that pins one value or object (EQUALS_MATCH, BOOL_MATCH, NONE_MATCH,
# ID_MATCH, FUNCTION_MATCH), 4 for structure (SEQUENCE_LENGTH, LENGTH_CHECK,
# DICT_KEYS_MATCH), 2 for TYPE_MATCH, 1 for anything that says nothing (aliasing, shape
# guards, user kinds), 0 for GLOBAL_STATE (every entry has the same). So ``n == 7`` (8)
# beats ``type(n) is int`` (2), whichever was compiled first. Ties go to the older entry,
# which makes the choice independent of hit history, and adding an entry never takes calls
# from an equally specific one. ``register_specificity`` overrides a kind's weight by name
# (a number, or a function of the leaf's params: a tensor guard with static sizes outweighs
# one with dynamic sizes).
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any, Optional, Union

from ..compiler.builder import Leaf
from ..compiler.check import CheckFunction
from ..compiler.codecache import forget
from ..guards import Guard, Source
from ..ids import CompileId
from .facts import UNION, Dim, leaf_fact, typed_pin

__all__ = [
    "MISS_SLOT",
    "UNION",
    "CacheEntry",
    "Dim",
    "Slot",
    "never",
    "register_specificity",
    "specificity",
    "typed_pin",
]


def never(*values: Any) -> bool:
    """The residual of a slot that must not hit (a dead entry, or no entry at all)."""
    return False


# ---- specificity -------------------------------------------------------------------------

Weight = Union[int, Callable[[Any], int]]
_weights: dict[str, Weight] = {}  # overrides by kind name: register_specificity
_weights_lock = threading.Lock()


def register_specificity(kind_name: str, weight: Weight) -> None:
    """Say how much a leaf of the guard kind ``kind_name`` specializes an entry, in place of
    what the kind declares (``GuardKind.weight``): a number, or a function of the leaf's
    params returning one. See [Note: Specificity]."""
    if not (callable(weight) or isinstance(weight, int)):
        raise TypeError(f"weight must be an int or a function of params, got {weight!r}")
    with _weights_lock:
        _weights[kind_name] = weight


def _leaf_weight(leaf: Leaf) -> int:
    weight = _weights.get(leaf.kind.name)
    if weight is None:
        return int(leaf.kind.weight(leaf.params))
    return int(weight(leaf.params)) if callable(weight) else weight


def specificity(leaves: list[Leaf]) -> int:
    """The specificity of an entry with these leaves ([Note: Specificity])."""
    return sum(_leaf_weight(leaf) for leaf in leaves)


# ---- entries -----------------------------------------------------------------------------


class Slot:
    """What the dispatcher finds in the fact index: an entry's artifact with the residual
    check that is left once the key matched (None: nothing is left). Immutable but for
    ``hits``, except that a dying entry sets ``residual`` to ``never`` and ``artifact`` to
    the entry's redirect (the careful path), so that no dispatcher variant can hit it.
    Always truthy (no ``__bool__``/``__len__``): the dispatcher reads
    ``I.get(key) or I[LINEAR]``."""

    __slots__ = ("artifact", "entry", "hits", "last", "residual")

    def __init__(
        self, entry: Optional[CacheEntry], artifact: Any, residual: Optional[Callable[..., bool]]
    ) -> None:
        self.entry = entry
        self.artifact = artifact
        self.residual = residual
        self.hits = 0
        self.last = 0  # the tick of the last hit, in a cache with ``maxsize``

    def kill(self, redirect: Callable[..., Any]) -> None:
        """Make this slot miss in every dispatcher variant: the residual fails, and the
        exact variant (which reads no residual and has counted a hit) is sent to
        ``redirect`` with that hit taken back."""
        self.residual = never

        def dead(*args: Any, **kwargs: Any) -> Any:
            self.hits -= 1
            return redirect(*args, **kwargs)

        self.artifact = dead


MISS_SLOT = Slot(None, None, never)  # what an index holds where no entry is


class CacheEntry:
    """One compiled specialization of a function: its artifact, its guards (``check``, built
    by ``compile_guards`` in positional mode), and what the dispatcher knows about it.

    Public: ``compile_id``, ``artifact``, ``check`` (a ``CheckFunction``), ``guards``,
    ``code`` (one line per check), ``dynamic`` (the sources compiled as dynamic),
    ``specificity``, ``hits``, ``valid`` and ``invalid_reason``, ``failure_counts`` (how often
    each of its guards failed, in the recompiles the function keeps, see [Note: Recompile
    reasons]). ``seq`` orders entries by creation.
    """

    # Slots, no instance dict: a function may hold thousands of entries.
    __slots__ = ("__weakref__", "_history", "_implied", "_on_invalid", "_redirect", "_slots",
                 "artifact", "check", "compile_id", "dynamic", "facts", "invalid_reason",
                 "last", "params", "pins", "seq", "slow_hits", "specificity", "valid")

    def __init__(
        self,
        *,
        compile_id: CompileId,
        artifact: Callable[..., Any],
        check: CheckFunction,
        params: tuple[str, ...],
        dynamic: frozenset[Source] = frozenset(),
        seq: int = 0,
        on_invalid: Optional[Callable[[CacheEntry], None]] = None,
        redirect: Optional[Callable[..., Any]] = None,
        history: Any = None,
    ) -> None:
        self.compile_id = compile_id
        self.artifact = artifact
        self.check = check
        self.params = params
        self.dynamic = dynamic or _NO_SOURCES
        self.seq = seq
        self.specificity = specificity(check.leaves)
        self.valid = True
        self.invalid_reason: Optional[str] = None
        self.slow_hits = 0
        self.last = 0  # the tick of its creation or last careful-path hit ([Note: maxsize])
        self._history = history
        self._slots: dict[frozenset[Dim], Slot] = {}
        self._on_invalid = on_invalid
        # What a dead slot's artifact becomes: by default a call that raises, so that a
        # missing redirect can never turn into a silent hit.
        self._redirect = redirect or _dead_call
        positions = {name: i for i, name in enumerate(params)}
        self.facts: dict[Dim, tuple[Any, ...]] = {}
        self._implied: dict[Dim, list[int]] = {}
        # The id of the exact type the entry pins at a source below a derived dim's source
        # (see [Note: Facts of an entry]); empty (shared) when there are no derived dims.
        self.pins: dict[Source, int] = _NO_PINS
        conflicted: set[Dim] = set()
        pins: dict[Source, Optional[int]] = {}
        derived = False
        for i, leaf in enumerate(check.leaves):
            found = leaf_fact(leaf, positions)
            if found is None:
                continue
            dim, components, exact, pin = found
            if dim in self.facts and self.facts[dim] != components:
                conflicted.add(dim)
            self.facts[dim] = components
            if exact:
                self._implied.setdefault(dim, []).append(i)
            if pin is not None:
                source = leaf.sources[0]
                pins[source] = pin if pins.get(source, pin) == pin else None
            derived = derived or dim.source is not None
        if derived:
            for dim in list(self.facts):
                if dim.source is None:
                    continue
                below = dim.source.chain()[1:]
                if any(pins.get(s) is None for s in below):
                    conflicted.add(dim)
            kept = {s: t for s, t in pins.items() if t is not None}
            needed = {b for d in self.facts if d.source is not None and d not in conflicted
                      for b in d.source.chain()[1:]}
            if needed:
                self.pins = {s: kept[s] for s in needed}
        for dim in conflicted:
            self.facts.pop(dim, None)
            self._implied.pop(dim, None)
        self_ref = weakref.ref(self)
        check.on_invalidate(lambda c: _entry_died(self_ref, c.invalid_reason))

    @property
    def rank(self) -> tuple[int, int]:
        """Dispatch order: most specific first, then oldest first."""
        return (-self.specificity, self.seq)

    @property
    def guards(self) -> tuple[Guard, ...]:
        return tuple(self.check.guards)

    @property
    def code(self) -> list[str]:
        return [leaf.code() for leaf in self.check.leaves]

    @property
    def hits(self) -> int:
        return self.slow_hits + sum(s.hits for s in list(self._slots.values()))

    @property
    def failure_counts(self) -> Counter[str]:
        """Per guard (``"<kind> <sources>"``): in how many of the recompiles the function
        keeps this entry rejected the call with that guard failing."""
        history = self._history
        return history.counts_for(self.compile_id) if history is not None else Counter()

    def recency(self) -> int:
        """The tick of this entry's last use (its creation, or its latest hit)."""
        last = self.last
        for slot in list(self._slots.values()):
            if slot.last > last:
                last = slot.last
        return last

    def concrete(self, dim: Dim) -> Optional[Dim]:
        """The plain dim that stands for ``dim`` in this entry: itself, or for a union dim
        the dim of the fact chosen for this entry's type there (None: it has none)."""
        if dim.union is None:
            return dim
        for d, comps in self.facts.items():
            if d.position == dim.position and d.source == dim.source:
                tid = typed_pin(d, comps)
                if tid is not None:
                    for t, fact in dim.union:
                        if t == tid:
                            return dim.of_fact(fact)
                    return None
        return None

    def union_part(self, dim: Dim) -> Optional[Hashable]:
        """This entry's key part under a union dim, ``(id(type), *rest)`` (the id alone when
        the fact is the type), or None."""
        concrete = self.concrete(dim)
        comps = self.facts.get(concrete) if concrete is not None else None
        if concrete is None or comps is None:
            return None
        tid = typed_pin(concrete, comps)
        return (tid, *comps[1:]) if len(comps) > 1 else tid

    def key_parts(self, dims: tuple[Dim, ...]) -> Optional[list[tuple[Hashable, ...]]]:
        """This entry's components under each of ``dims`` (a union dim's is its one part), or
        None if it lacks one of them. The one place an entry's key is computed: ``key`` joins
        these, and a layout's ``entry_key`` (dispatch.dispatcher) rewrites them as its
        generated code computes them."""
        out: list[tuple[Hashable, ...]] = []
        for dim in dims:
            if dim.union is not None:
                part = self.union_part(dim)
                if part is None:
                    return None
                out.append((part,))
                continue
            components = self.facts.get(dim)
            if components is None:
                return None
            out.append(components)
        return out

    def key(self, dims: tuple[Dim, ...]) -> Optional[tuple[Hashable, ...]]:
        """The index key of this entry under ``dims``, or None if it lacks one of them."""
        parts = self.key_parts(dims)
        return None if parts is None else tuple(c for comps in parts for c in comps)

    def _implied_by(self, dims: Any) -> set[int]:
        out: set[int] = set()
        for d in dims:
            concrete = self.concrete(d) if d.union is not None else d
            if concrete is not None:
                out.update(self._implied.get(concrete, ()))
        return out

    def exact_under(self, dims: tuple[Dim, ...]) -> bool:
        """True if a key match under ``dims`` alone proves every guard of this entry."""
        return len(self._implied_by(dims)) == len(self.check.leaves)

    def slot(self, implied_dims: frozenset[Dim]) -> Slot:
        """The slot for a snapshot in which a key match proves the facts of ``implied_dims``
        (empty for an entry reached without a key match). Built once per set, then shared."""
        slot = self._slots.get(implied_dims)
        if slot is not None:
            return slot
        with _slots_lock:
            slot = self._slots.get(implied_dims)
            if slot is None:
                slot = Slot(self, self.artifact, self._residual(implied_dims))
                self._slots[implied_dims] = slot
                # A death between building and publishing the slot must still reach it.
                if not self.valid:
                    slot.kill(self._redirect)
        return slot

    def _residual(self, implied_dims: frozenset[Dim]) -> Optional[Callable[..., bool]]:
        implied = self._implied_by(implied_dims)
        if not implied:
            return self.check.fn
        leaves = [leaf for i, leaf in enumerate(self.check.leaves) if i not in implied]
        if not leaves:
            return None
        residual = CheckFunction(
            leaves,
            self.check.guards,
            name=f"{self.check.name} residual",
            arg_names=self.check.arg_names,
            f_globals=self.check.f_globals,
        )
        return residual.fn

    def evict(self, reason: str) -> None:
        """Make this entry miss from now on and let its generated code go: the cache evicted
        it ([Note: maxsize]). Its slots are killed first (a racing call goes to the careful
        path), then forgotten, with the source text of its checks in ``linecache``."""
        if self.valid:
            self.valid = False
            self.invalid_reason = reason
            for slot in list(self._slots.values()):
                slot.kill(self._redirect)
        slots, self._slots = self._slots, {}
        for slot in slots.values():
            slot.entry = None
            if slot.residual is not None and slot.residual is not never:
                slot.residual = never
        forget(*getattr(self.check, "filenames", ()))

    def invalidate(self, reason: str) -> None:
        """Make this entry miss from now on (an object it guarded by identity died)."""
        # Lock-free: this runs from weakref callbacks, possibly while this very thread is in
        # ``slot()``. ``valid`` drops first and ``slot()`` re-reads it after publishing, so a
        # slot built concurrently is reached by one side or the other.
        if not self.valid:
            return
        self.valid = False
        self.invalid_reason = reason
        for slot in list(self._slots.values()):
            slot.kill(self._redirect)
        if self._on_invalid is not None:
            self._on_invalid(self)

    def __repr__(self) -> str:
        state = "" if self.valid else f", invalid: {self.invalid_reason}"
        return (
            f"<CacheEntry {self.compile_id}: {len(self.check.leaves)} checks, "
            f"specificity {self.specificity}, {self.hits} hits{state}>"
        )


_NO_SOURCES: frozenset[Any] = frozenset()
_NO_PINS: dict[Source, int] = {}
_slots_lock = threading.RLock()  # building a slot (rare: once per entry and snapshot shape)


def _dead_call(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("jitguard: a dead cache entry was called (no redirect was set)")


def _entry_died(ref: weakref.ReferenceType[CacheEntry], reason: Optional[str]) -> None:
    entry = ref()
    if entry is not None:
        entry.invalidate(reason or "an object it guarded by identity died")
