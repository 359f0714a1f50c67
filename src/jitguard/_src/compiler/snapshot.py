"""Skipping structure guards while nothing they read has changed: a check whose guards are
mostly about an object graph's structure (a module tree) gets a front check that asks, in
C, whether every object, type and dict those guards read is as it was when they last all
held; if so only the other guards run.

May import: env, native, guards, sources, more_sources, compiler.* (snapshot_record: the
stable reads and the nodes that pin them; coverage: the rules for
the kinds it covers; check).

# [Note: Skipping structure guards by version tags]
# Most guards of a real model are about its structure: the type of each module, its empty
# hooks dicts, a name absent from its instance dict, the keys of its ``_modules``, a flag
# that is ``False``. Each is a function of values read through a chain of dict items and
# plain attributes from a root, and of those values' types and dicts. CPython stamps every
# dict with a version tag (``ma_version_tag``, 3.10-3.13) that takes a fresh value from a
# process-wide counter whenever the dict changes, and every type with a version tag
# (``tp_version_tag``) that is invalidated whenever the type or any of its bases changes
# (``PyType_Modified``) and is only ever reassigned from a counter.
#
# ``plan`` splits a check's leaves in two. A leaf is *covered* when every source it reads
# is *stable* and its kind's verdict is a function of what the snapshot pins (``_COVERED``):
#   * a stable source is a root that keeps its identity (an argument, weakly referenced
#     and compared by address; an item of the function's globals dict), or a read from a
#     stable value that depends on nothing but dicts, types and identities: a dict item
#     (``dict.__getitem__``, any dict subclass), a key by position, an exact tuple's item,
#     an exact list's item by an int index (the list's items pinned by address: its
#     length and each item compared, held by the snapshot),
#     ``type(v)``, a relabel, and ``v.attr`` where ``type(v)`` keeps object's (or a
#     module's) ``__getattribute__``, no class of its MRO has a data descriptor named
#     ``attr``, and ``attr`` is in ``v``'s instance dict, or else is a class attribute
#     that is no descriptor at all; and a slot of an exact function or cell
#     (``f.__code__``, ``__defaults__``, ``__kwdefaults__``, ``__closure__``, ``__name__``,
#     ``__qualname__``, ``cell.cell_contents``: *function slots*) or of an exact
#     ``functools.partial`` (``p.func``, ``p.args``, ``p.keywords``) or ``property``
#     (``fget``, ``fset``, ``fdel``): *member slots*, their C types' read-only members, at
#     the offsets their descriptors give), read by the type's own
#     descriptor from a field of the object, which the snapshot pins by identity; and a
#     class's ``__mro__`` (where no metaclass redefines it), name, qualname and namespace
#     (``dict(C.__dict__)``, resolved as the class's real dict, pinned by its tag like
#     any dict: every change to a class's namespace goes through it); ``v.__class__``
#     where object's own descriptor answers (the exact type); and ``C.attr`` on a class as
#     ``type.__getattribute__`` finds it: a plain value or a function in a namespace along
#     the MRO (each namespace up to it pinned), with no metaclass data descriptor of that
#     name;
#   * covered kinds: identity ones (TYPE_MATCH, ID_MATCH, NONE_MATCH, BOOL_MATCH,
#     CLASS/MODULE/BUILTIN_MATCH, DUPLICATE_INPUT), EQUALS_MATCH and CONSTANT_MATCH on a
#     value of an immutable exact type, and the dict ones on an exact dict or
#     OrderedDict (EMPTY_NN_MODULE_HOOKS_DICT, DICT_CONTAINS, LENGTH_CHECK; DICT_KEYS_MATCH
#     and SEQUENCE_LENGTH on an exact dict or tuple, SEQUENCE_LENGTH on an exact list whose
#     items are pinned), NOT_PRESENT_IN_GENERIC_DICT where the
#     type's ``__dict__`` is the standard one, CLASS_ATTRS_MATCH (a function of the type
#     and its MRO's namespaces: the type's tag), HASATTR and NOT_HASATTR where the
#     lookup is decided by dicts alone (object's ``__getattribute__``, found in the
#     instance dict or as a plain class attribute, or found as a property whose pinned
#     getter is ``return self.name`` with ``name`` found so ([Note: A property that reads
#     an attribute] in compiler/coverage.py); absent from both with no
#     ``__getattr__``, or with torch's ``nn.Module.__getattr__``: [Note: hasattr on a
#     module]), and a kind of another layer that registers its rule with
#     ``coverage.cover`` (the tensor's DIMENSION_DYNAMIC_MARKING: no marking attribute in
#     its instance dict or classes). ``compiler/coverage.py`` holds the rules. Everything
#     else (tensor metadata, lists,
#     functions' code and defaults, attributes behind properties or ``__getattribute__``,
#     global state) is *volatile* and runs on every call, in a check of its own.
# The snapshot records, in an order where each object comes after the container that
# holds it, every stable value: its address, its exact type and that type's version tag,
# and, where a read or a leaf depends on it, its instance dict (address and tag) or, for a
# dict, its own tag, and for a function, cell, partial or property whose slot is read, every pinnable slot's
# value (``slot_values``), compared by address and held strongly by the snapshot (so an
# address it compares is never that of a freed object reused). ``TagSnapshot`` (C) compares them all; the front check is
# ``snapshot(args) and volatile(*args)``, else the full check (after which, if it held, the
# snapshot is taken again, at most ``REARMS`` times per check; then the front check
# stays off and every call runs the full check).
#
# Why it is sound: the snapshot is taken only when the full check has just held (for a
# check whose code is deferred, when every covered leaf held on the values the snapshot
# then pins and the volatile check held: [Note: Deferred check code]). If every
# recorded tag is unchanged, each dict holds the same items it held then (any insertion,
# deletion or store takes a fresh tag, and a dict made since has a fresher one, so an
# address reused by another dict cannot match); each instance dict is the same object
# (``m.__dict__ = {...}`` changes the address); each object has the same type
# (``m.__class__ = X`` fails the type test) and its type the same namespace along its MRO
# (``setattr(type(m), ...)``, a base class changed, ``__bases__`` assigned: the type tag);
# each pinned function or cell holds the same objects in its slots (``f.__code__ = c``,
# ``f.__defaults__ = d``, ``cell.cell_contents = v`` store into the field, and so does
# ``p.__setstate__(...)`` and ``prop.__init__(...)``, the one way to change a partial's or
# a property's; the types are exact and
# immutable, so the field is what the read returns; a partial's keywords dict, an exact
# dict, is a node with its own tag); each pinned exact list holds
# the same items (its length and every item compared by address: any store, insertion or
# deletion changes one of them, and the items are held, so no address is reused).
# A root is the same object (its weak reference still leads to it, and the argument is
# it). So by induction along each chain every stable source reads the same object as
# then, and each covered leaf's verdict, a function of those objects' identities, types,
# immutable values and dict contents, is the same as then: true. The volatile leaves run.
# Hence the front check says True only when the full check would. Addresses are
# dereferenced only after the container that holds the object was found unchanged (the
# recorded order), so a dead object is never touched; except for the exact dicts and
# OrderedDicts with no pinned slots (a module's hook dicts, ``_modules``, ``_parameters``:
# most nodes of a deep model), which the snapshot holds strongly and compares first, by
# their tag alone (their types are static and immutable: no ``__class__`` assignment, no
# namespace change), so their addresses stay theirs whatever their containers did. ``object.__setattr__``,
# ``vars(m).update``, ``m.__dict__[k] = v`` all go through the instance dict and change
# its tag; on 3.10-3.11 an attribute set before ``__dict__`` was materialized lives
# outside any dict, which is why the snapshot materializes every instance dict it records
# (``instance_dict_id``), after which CPython stores there. Where a mechanism is missing
# (Python 3.12+, where inline values change without a dict, no C extension, a type with no
# version tag) there is no front check: every call runs the full check.
"""

from __future__ import annotations

import dataclasses
import sys
import weakref
from collections.abc import Callable
from typing import Any, Optional

from .. import env, native
from ..guards import Source
from ..more_sources import TypeDictSource
from ..sources import ConstDictKeySource, LocalSource
from . import coverage
from .builder import Leaf
from .coverage import UNSTABLE as _UNSTABLE
from .snapshot_record import Recorder

__all__ = ["MIN_COVERED", "REARMS", "Pins", "available", "enabled", "install", "pins", "plan"]

#: A check with fewer covered leaves than this keeps its one function.
MIN_COVERED = 64
#: How many times a check takes its snapshot again after the structure changed and the
#: full check still held; then the front check stays off.
REARMS = 4
ENV_VAR = "JITGUARD_STRUCTURE_SKIP"

enabled = env.flag(ENV_VAR, default=True)


def available() -> bool:
    """Whether this interpreter and build have what the front check needs."""
    return (sys.version_info < (3, 12) and native.module is not None
            and hasattr(native.module, "TagSnapshot"))


def _covered(leaf: Leaf, rec: Recorder) -> bool:
    rule = coverage.rule(leaf.kind)
    if rule is None or not leaf.sources:
        return False
    values = [rec.resolve(s) for s in leaf.sources]
    if any(v is _UNSTABLE for v in values):
        return False
    return rule(values[0], leaf.params, rec)


class Plan:
    """How a check splits: the covered leaves, the volatile check, and the stable sources
    the volatile check takes as extra arguments (``pinned``) instead of reading them."""

    def __init__(self, covered: list[int], volatile: Any, pinned: list[Source]) -> None:
        self.covered = covered
        self.volatile = volatile
        self.pinned = pinned
        # what ``plan`` resolved, until ``install`` takes its first snapshot from it
        self.recorder: Optional[Recorder] = None


def _record(check: Any, values: tuple[Any, ...], p: Plan,
            rec: Optional[Recorder] = None) -> Any:
    """The snapshot and the pinned values for ``values``, or None when a covered leaf or
    a pinned source is no longer stable. ``rec``: the recorder ``plan`` filled for these
    same values, whose covered leaves it has resolved (install's first snapshot)."""
    if rec is None:
        rec = Recorder(dict(zip(check.arg_names, values, strict=True)), check.f_globals,
                       check.arg_names)
        for i in p.covered:
            if not _covered(check.leaves[i], rec):
                return None
    pins = tuple(rec.resolve(s) for s in p.pinned)
    if any(v is _UNSTABLE for v in pins):
        return None
    snap = rec.snapshot()
    return None if snap is None else (snap, pins, [r[-1] for r in rec.roots.values()])


class _Pinner:
    """Rewrites a volatile leaf's sources: the longest stable part of each becomes an
    extra argument of the volatile check (``___pin<k>``), read once per snapshot."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.pinned: dict[Source, LocalSource] = {}

    def pin(self, src: Source) -> Source:
        # a class's namespace resolves to its real dict, where the check reads a mapping
        # proxy of it: pinned is the class, never the namespace itself
        if (type(src) not in (LocalSource, TypeDictSource)
                and self.rec.resolve(src) is not _UNSTABLE):
            got = self.pinned.get(src)
            if got is None:
                got = self.pinned[src] = LocalSource(f"___pin{len(self.pinned)}")
            return got
        base = getattr(src, "base", None)
        if not isinstance(base, Source):
            return src
        new = self.pin(base)
        if new is base:
            return src
        changes: dict[str, Any] = {"base": new}
        index = getattr(src, "index", None)
        if isinstance(index, ConstDictKeySource):
            if index.base != base:
                return src
            changes["index"] = dataclasses.replace(index, base=new)
        try:
            return dataclasses.replace(src, **changes)
        except Exception:  # a source that refuses the new base keeps its own reads
            return src


def plan(check: Any, values: tuple[Any, ...]) -> Optional[Plan]:
    """Split ``check`` (a CheckFunction taking ``values`` positionally, which it accepts)
    into covered and volatile leaves; None when too few are covered or a mechanism is
    missing ([Note: Skipping structure guards by version tags])."""
    from .check import CheckFunction

    if not (enabled and available()) or check.arg_names is None:
        return None
    rec = Recorder(dict(zip(check.arg_names, values, strict=True)), check.f_globals,
                    check.arg_names)
    covered = [i for i, leaf in enumerate(check.leaves) if _covered(leaf, rec)]
    if len(covered) < MIN_COVERED:
        return None
    skip = set(covered)
    pinner = _Pinner(rec)
    leaves = [dataclasses.replace(leaf, sources=tuple(pinner.pin(s) for s in leaf.sources))
              for i, leaf in enumerate(check.leaves) if i not in skip]
    pinned = list(pinner.pinned)
    arg_names = (*check.arg_names, *(pinner.pinned[s].local_name for s in pinned))
    volatile = CheckFunction(leaves, check.guards, name=f"{check.name} volatile",
                             arg_names=arg_names, f_globals=check.f_globals)
    out = Plan(covered, volatile, pinned)
    out.recorder = rec
    return out


class Pins:
    """What the front check of a check pinned ([Note: Inputs read from the pins]): the
    stable sources (``sources``, in order) and, through ``current()``, their values as of
    the last time the check held, or ``()`` once the front check is off for good."""

    def __init__(self, state: list[Any], sources: list[Source]) -> None:
        self._state = state
        self.sources = sources
        self._callbacks: list[Any] = []
        self._rearmed: list[Any] = []

    def current(self) -> tuple[Any, ...]:
        """The pinned values, in the order of ``sources``; ``()`` once disarmed."""
        return self._state[1]

    @property
    def state(self) -> list[Any]:
        """The front check's state list: ``state[1]`` is ``current()``, read without a call
        by a program that takes its inputs from the pins."""
        return self._state

    def on_rearm(self, callback: Any) -> None:
        """Run ``callback(args)`` each time the snapshot is taken again, on the call
        ``args`` whose full check just held (the pins are then that call's)."""
        self._rearmed.append(callback)

    def _rearm(self, args: tuple[Any, ...]) -> None:
        _run(list(self._rearmed), args)

    def on_disarm(self, callback: Any) -> None:
        """Run ``callback()`` once the front check is off for good (now, if it is)."""
        if self._state[2] <= 0 and not self._state[1]:
            callback()
        else:
            self._callbacks.append(callback)

    def _disarmed(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        _run(callbacks)


def _run(callbacks: list[Any], *args: Any) -> None:
    for cb in callbacks:
        try:
            cb(*args)
        except Exception:  # a callback's failure must not stop the others
            pass


def pins(check: Any) -> Optional[Pins]:
    """The pins of ``check``'s front check; None when it has none."""
    return getattr(check, "structure_pins", None)


def _holds(check: Any, values: tuple[Any, ...], p: Plan, rec: Recorder,
           pins: tuple[Any, ...]) -> bool:
    """Whether every guard of ``check`` holds for ``values``, without its full code
    ([Note: Deferred check code]): each covered leaf by its kind on the values ``plan``
    resolved (what its reads give: the premise of the front check), the others by the
    volatile check on the call and the pins, as a hit runs them."""
    for i in p.covered:
        leaf = check.leaves[i]
        got = [rec.resolve(s) for s in leaf.sources]
        if not leaf.kind.holds(tuple(got) if leaf.kind.relational else got[0], leaf.params):
            return False
    return bool(p.volatile.fn(*values, *pins))


_FRONT = '''\
def {name}(*args):
    if ___snap[0](args):
        return ___volatile(*args, *___snap[1])
    if not ___full(*args):
        return False
    ___rearm(args)
    return True
'''


def install(check: Any, values: tuple[Any, ...],
            then: Optional[Callable[[Pins], Any]] = None) -> bool:
    """Give ``check`` a front check (``check.fn`` becomes it) when ``plan`` splits it and
    ``values`` pass the full check; returns whether it did. ``then(pins)`` runs once it
    did (a compiler's ``pin_inputs``: [Note: Inputs read from the pins]). A check whose
    code is deferred keeps it so (``_holds`` answers for ``values``): the full check is
    generated only if it ever runs ([Note: Deferred check code])."""
    try:  # reading a user's objects may raise: then every guard runs, as without a plan
        p = plan(check, values)
        if p is None:
            return False
        # the first snapshot is taken from what plan resolved for these values (each
        # read once, not twice); like any snapshot, it holds only while nothing changed
        rec, p.recorder = p.recorder, None
        if check.deferred:
            got = _record(check, values, p, rec)
            if got is None or rec is None or not _holds(check, values, p, rec, got[1]):
                return False
        else:
            if not check.fn(*values):
                return False
            got = _record(check, values, p, rec)
    except Exception:
        return False
    if got is None:
        return False
    full = check.fn
    state: list[Any] = [got[0], got[1], REARMS]
    view = Pins(state, p.pinned)

    def never(args: tuple[Any, ...]) -> bool:
        return False

    def disarm() -> None:
        state[0], state[1], state[2] = never, (), 0
        view._disarmed()

    def rearm(args: tuple[Any, ...]) -> None:
        if state[2] <= 0:
            return
        state[2] -= 1
        try:
            again = _record(check, args, p)
        except Exception:  # an object that raised when read: the front check stays off
            again = None
        if again is None or state[2] <= 0:
            disarm()
        else:
            state[1], state[0] = again[1], again[0]
            for root in again[2]:
                weakref.finalize(root, disarm)
            view._rearm(args)

    ns: dict[str, Any] = {"___snap": state, "___volatile": p.volatile.fn, "___full": full,
                          "___rearm": rearm}
    name = f"front_{full.__name__}"
    exec(compile(_FRONT.format(name=name), f"<jitguard front check {check.name}>", "exec"), ns)
    check.fn = ns[name]
    check.structure_skip = p
    check.structure_full = full
    check.structure_pins = view
    # The pinned values are held strongly: let them go with the roots they hang from.
    for root in got[2]:
        weakref.finalize(root, disarm)
    if then is not None:
        then(view)
    return True
