"""The facts a cache entry is dispatched by: ``Dim`` (one fact of a parameter or of a
source below one, or a union of typed facts) and how a compiled leaf gives one.

May import: _util, guards, sources, compiler.*.

# [Note: Facts of an entry]
# A guard kind may say that its guard pins a hashable *fact* of its source's value
# (``kind.fact(params) -> (fact name, expected)``, see ``GuardKind.fact``). The cache reads
# the facts that a leaf pins on a *parameter* (a ``LocalSource`` naming one of ``fn``'s
# parameters) or on a source derived from one (``L['x'].dtype``, ``L['t'][0]``,
# ``L['cfg'].mode``: a chain of ``ChainedSource`` down to a parameter), and files each
# under a ``Dim``: the parameter, the source (None for the parameter itself) and how the
# fact is computed from its value. A fact the kind's class declares as a ``DispatchFact``
# ("value", "type", "id", "len", "type_len", "type_keys" for the built-in kinds; [Note:
# Kinds own their cache data]) is computed inline by the dispatcher ([Note: Key layout]),
# and when the declaration says ``exact`` the leaf is *implied* by an equal fact: the key
# lookup alone decides it, and it is left out of the entry's residual check for that
# snapshot (the built-in "value" fact is not exact for a float or complex zero,
# "type_keys" never is: a key match is dict equality, looser than those guards). A fact
# gated to "scalar" types whose type is not a builtin scalar type is not used. Other facts
# are computed by calling the kind's ``fact_of`` and only narrow the candidates; their
# leaves always stay in the check.
# A fact on a derived source is used only when the entry *pins the exact type* of every
# source below it (the parameter and each link between: a leaf with a typed inline fact,
# such as TYPE_MATCH, SEQUENCE_LENGTH, DICT_KEYS_MATCH, EQUALS_MATCH on a scalar): the
# dispatcher reads ``L['x'].dtype`` only for a value whose type is one a keyed entry pins
# for ``L['x']``, where that entry's own check reads it too, with the same code
# (``source.emit``) ([Note: Key layout]). ``pins`` keeps those types, by source.
# A fact computed by ``fact_of`` is used on a parameter only (no read to gate).
# An entry with two different expectations for one Dim can never hold; the Dim is dropped
# for it (so it is checked in full, and fails); so is a pin with two different types.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from .._util import is_scalar_type
from ..compiler.builder import Leaf
from ..compiler.kinds import DispatchFact, GuardKind, dispatch_fact
from ..guards import Source
from ..sources import LocalSource

__all__ = ["UNION", "Dim", "leaf_fact", "typed_pin"]


class Dim(NamedTuple):
    """One fact of one parameter, or of a source derived from it (``source``; None for the
    parameter itself): ``fact`` names a ``DispatchFact`` a kind declares (computed inline by
    the dispatcher, see ``spec``) or, with ``kind`` set, a fact computed by
    ``kind.fact_of``."""

    position: int
    param: str
    fact: str
    kind: Optional[GuardKind] = None
    source: Optional[Source] = None
    # A *union* dim ([Note: Union dims]): (id of a type, the typed fact of that type), sorted.
    union: Optional[tuple[tuple[int, str], ...]] = None

    def sort_key(self) -> tuple[Any, ...]:
        """A deterministic order (parameter, depth and name of the source, fact, inline
        first, kind name, union): a parameter's own facts before those of sources below."""
        src = self.source
        return (self.position, 0 if src is None else len(src.chain()),
                "" if src is None else src.name(), self.fact,
                0 if self.kind is None else 1, "" if self.kind is None else self.kind.name,
                self.union or ())

    @property
    def shown(self) -> str:
        """The parameter or source, as shown in comments (``x``, ``L['x'].dtype``)."""
        return self.param if self.source is None else self.source.name()

    @property
    def spec(self) -> Optional[DispatchFact]:
        """The declared fact an inline dim computes (None for a ``fact_of`` or union dim)."""
        return dispatch_fact(self.fact) if self.kind is None and self.union is None else None

    def of_fact(self, fact: str) -> Dim:
        """The plain inline dim of ``fact`` on this dim's parameter or source."""
        return Dim(self.position, self.param, fact, None, self.source)


UNION = "typed"  # the fact name of union dims


def typed_pin(dim: Dim, components: tuple[Any, ...]) -> Optional[int]:
    """The id of the exact type an inline typed fact pins (None for other facts)."""
    spec = dim.spec
    if spec is None or not spec.typed:
        return None
    first = components[0]
    if spec.typed == "type":
        return id(first)
    return first if type(first) is int else None


# [Note: Union dims]
# With entries of several types on one parameter (or source), each type's entries may pin a
# different typed fact: ``type(x) is int`` ("type") for scalars, ARRAY_MATCH ("array") for
# arrays. No plain dim keys them all (an entry without the dim's fact is linear), and a key
# on the type alone leaves every array of a dtype behind the first. A *union* dim
# (fact ``"typed"``, ``union``: type id -> fact name) keys each entry by the typed fact
# chosen for its type: its key part is ``(id(type), *the rest of that fact)`` (the id alone
# when the fact is the type: an int is never equal to a tuple), and the
# dispatcher computes, for the call's type, that type's fact (``(u, array_token(x)) if
# (u := id(type(x))) in A else u if u in T else NOKEY``). The type comes first in every
# part, so parts of two types never meet; a type with no fact chosen gives ``NOKEY``; each
# fact's code runs only for the types chosen for it (its gate: the types of entries that
# pin it, as for a plain dim). An entry keyed by a union dim is implied as far as its chosen
# fact's leaves are (``concrete``). ``choose_dims`` proposes one per source whose types
# pin different facts, choosing for each type the fact most of its entries have.


def _param_of(source: Source, positions: dict[str, int]) -> Optional[str]:
    """The parameter ``source`` is, or is derived from through chained sources the
    dispatcher can read (each with an ``emit``), else None."""
    root = source.chain()[-1]  # cached on the source
    if type(root) is not LocalSource or root.local_name not in positions:
        return None
    return root.local_name


def leaf_fact(
    leaf: Leaf, positions: dict[str, int]
) -> Optional[tuple[Dim, tuple[Any, ...], bool, Optional[int]]]:
    """(dim, key parts, exact, the id of the type it pins or None) of a leaf's fact."""
    if leaf.kind.relational or len(leaf.sources) != 1:
        return None
    source = leaf.sources[0]
    param = _param_of(source, positions)
    if param is None:
        return None
    try:
        fact = leaf.kind.fact(leaf.params)
    except Exception:
        return None
    if fact is None:
        return None
    name, expected = fact
    pos = positions[param]
    derived = None if type(source) is LocalSource else source
    declared = leaf.kind.inline_fact(name)
    pin: Optional[int] = None
    if declared is not None and dispatch_fact(name) == declared:
        components = declared.parts(expected)
        if declared.gate == "scalar" and not is_scalar_type(components[0]):
            return None  # the dispatcher hashes this part: builtin scalars only
        exact = declared.is_exact(components)
        dim = Dim(pos, param, name, None, derived)
        if declared.typed == "type":
            pin = id(components[0])
        elif declared.typed == "id" and type(components[0]) is int:
            pin = components[0]
    elif derived is None:
        components, exact = (expected,), False
        dim = Dim(pos, param, name, leaf.kind)
    else:
        return None  # fact_of runs on a parameter only: a derived value needs a gated read
    try:
        hash(components)
    except TypeError:
        return None
    return dim, components, exact, pin
