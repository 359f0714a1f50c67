"""The guard data model: where a value comes from (``Source``, ``GuardSource``), an
assumption on it (``Guard``), and the assumptions made after tracing (``GuardEnvExpr``).
``GuardSource`` lives in ``guard_source`` and the after-tracing assumptions in
``guard_exprs``; both are re-exported here.

May import: stacks, guard_source, guard_exprs.

Behaviour follows the specification (PyTorch's ``torch/_guards.py``); the places where
jitguard deliberately differs are said in the docstring of the class concerned.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import traceback
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Optional, TypeVar

from .guard_exprs import DuplicateInputs, GuardEnvExpr, ShapeGuard, SLoc, StorageOverlap
from .guard_source import GuardSource
from .stacks import CapturedStack

if TYPE_CHECKING:  # mypy: source_dataclass makes frozen dataclasses
    from typing_extensions import dataclass_transform
else:

    def dataclass_transform(**kwargs: Any) -> Any:
        return lambda fn: fn

__all__ = [
    "RELATIONAL_ATTR",
    "ChainedSource",
    "DuplicateInputs",
    "Guard",
    "GuardBuilderBase",
    "GuardEnvExpr",
    "Binder",
    "FrameSlot",
    "GuardSource",
    "SLoc",
    "ShapeGuard",
    "Source",
    "StorageOverlap",
    "source_dataclass",
]

log = logging.getLogger("jitguard.guards")

# ``bind(obj, hint)``: binds ``obj`` as a constant of generated code and returns its name
# (``hint`` says what it is); see ``ChainedSource.emit``.
Binder = Callable[[Any, str], str]
# Where a root source's value sits in the frame: its locals ``L`` or globals ``G``, by key.
FrameSlot = tuple[Literal["L", "G"], str]


class GuardBuilderBase:
    """Marker base of the object a guard's ``create_fn`` is called with.

    Kept empty on purpose: what a builder does is the compiler's business
    (``jitguard.GuardBuilder``), not the data model's.
    """


_S = TypeVar("_S")


@dataclass_transform(frozen_default=True)
def source_dataclass(cls: type[_S]) -> type[_S]:
    """``dataclass(frozen=True)`` whose hash and ``guard_source()`` (and, for a chained
    source, ``chain()``) are computed once and cached.

    Chained sources hash their whole chain; guard compilation hashes each source many times,
    so the cache turns that into one computation per source object.
    """
    cls = dataclasses.dataclass(frozen=True)(cls)
    field_hash = cls.__hash__

    def __hash__(self: Any) -> int:
        # getattr, not self.__dict__: reading __dict__ would give every source a dict object
        # (CPython keeps an instance's attributes inline until it is asked for one).
        h = getattr(self, "_jitguard_hash", None)
        if h is None:
            h = field_hash(self)
            object.__setattr__(self, "_jitguard_hash", h)
        return h

    cls.__hash__ = __hash__  # type: ignore[method-assign]
    compute = getattr(cls, "guard_source", None)
    if compute is not None and not getattr(compute, "_jitguard_cached", False):
        cls.guard_source = _cached_guard_source(compute)  # type: ignore[attr-defined]
    return cls


def _cached_guard_source(compute: Callable[[Any], GuardSource]) -> Callable[[Any], GuardSource]:
    """A source's ``guard_source()``, computed once (a function of its frozen fields; a
    chained source's asks its base, so without the cache every new source walked its
    whole chain). Kept out of pickles like the hash."""

    def guard_source(self: Any) -> GuardSource:
        got = getattr(self, "_jitguard_guard_source", None)
        if got is None:
            got = compute(self)
            object.__setattr__(self, "_jitguard_guard_source", got)
        return got

    guard_source.__doc__ = compute.__doc__
    guard_source.__qualname__ = compute.__qualname__
    guard_source._jitguard_cached = True  # type: ignore[attr-defined]
    return guard_source


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a value comes from. Concrete sources live in ``jitguard`` (``LocalSource``,
    ``AttrSource``, ...); this base holds the behaviour every source shares.

    A source keeps three things apart: its identity (its dataclass fields: equality and
    hash), its display (``name()``, a Python expression over ``L`` and ``G``) and its
    evaluation (a root's ``frame_slot``, a chained source's ``access`` and ``emit``). See
    [Note: Source protocol] in sources.py.
    """

    def is_dict_key(self) -> bool:
        return False

    def is_ephemeral(self) -> bool:
        return False

    def reconstruct(self, codegen: Any) -> None:
        raise NotImplementedError

    def guard_source(self) -> GuardSource:
        raise NotImplementedError

    def name(self) -> str:
        raise NotImplementedError

    def make_guard(self, fn: Callable[..., Any]) -> Guard:
        """A guard of kind ``fn`` on this source. Constants cannot be guarded."""
        if not callable(fn):
            hint = (f" (write GuardBuilder.{fn})" if isinstance(fn, str) and fn.isidentifier()
                    else "")
            raise TypeError(
                f"make_guard takes a guard kind such as GuardBuilder.EQUALS_MATCH, got "
                f"{type(fn).__name__} {fn!r}{hint}")
        if self.guard_source() is GuardSource.CONSTANT:
            raise NotImplementedError(
                f"cannot guard on the constant source {self!r}: a constant has no frame value"
            )
        return Guard(self, fn)

    def is_specialized_nn_module(self) -> bool:
        return self.guard_source().is_specialized_nn_module()

    def subguards_allowed(self) -> bool:
        """True if you can guard on attributes of this."""
        return self.guard_source() != GuardSource.SYNTHETIC_LOCAL

    def __getstate__(self) -> dict[str, Any]:
        # The cached hash and name (``_jitguard_*``) are not pickled: str hashes differ
        # between processes, so a cached hash would be stale after unpickling elsewhere.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_jitguard_")}

    # jitguard: the source protocol ([Note: Source protocol] in sources.py).
    def frame_slot(self) -> Optional[FrameSlot]:
        """Where a root source's value sits in the frame (``("L", "x")`` for ``L['x']``);
        None for a source whose value is not read straight from the frame."""
        return None

    def chain(self) -> tuple[Source, ...]:
        """This source, then its base, its base's base, ... down to the root (the one walk
        of a source's bases: the root is ``chain()[-1]``, the depth ``len(chain()) - 1``,
        and ``s`` derives from ``t`` when ``t in s.chain()``)."""
        return (self,)

    def get_value(self, f_locals: Any, f_globals: Any) -> Any:
        """Read this source's value from a frame's locals and globals (slow, reference path):
        a root reads its ``frame_slot``."""
        slot = self.frame_slot()
        if slot is None:
            raise NotImplementedError(f"{type(self).__name__} does not say how to read its value")
        scope, key = slot
        return (f_locals if scope == "L" else f_globals)[key]


@dataclasses.dataclass(frozen=True)
class ChainedSource(Source):
    """A source derived from another (``base``): an attribute, an item, a type, ..."""

    base: Source

    def is_dict_key(self) -> bool:
        return self.base.is_dict_key()

    def is_ephemeral(self) -> bool:
        return self.base.is_ephemeral()

    def get_base(self) -> Source:
        """The root this source is derived from."""
        return self.chain()[-1]

    def chain(self) -> tuple[Source, ...]:
        got: Optional[tuple[Source, ...]] = getattr(self, "_jitguard_chain", None)
        if got is None:  # computed once, like the hash (the fields are frozen)
            got = (self, *self.base.chain())
            object.__setattr__(self, "_jitguard_chain", got)
        return got

    def guard_source(self) -> GuardSource:
        return self.base.guard_source()

    def access(self, base_value: Any) -> Any:
        """This source's value given its base's value (the reference path)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how to read its value")

    def emit(self, base: str, bind: Binder) -> str:
        """A Python expression for this source's value, given the expression ``base`` of its
        base's value (the compiled path). ``bind(obj, hint)`` binds a constant and returns
        its name. By default a call of the bound ``access``; the library's sources write
        the expression itself (``sources.Chained.render``)."""
        return f"{bind(self.access, 'access')}({base})"

    def emit_on(self, base: str, bind: Binder, base_type: type) -> str:
        """``emit`` where an earlier test of the check has pinned the base's exact type to
        ``base_type`` (a builtin whose instances' type cannot change): a source may then
        write a cheaper expression of the same value. By default ``emit``."""
        return self.emit(base, bind)

    def get_value(self, f_locals: Any, f_globals: Any) -> Any:
        return self.access(self.base.get_value(f_locals, f_globals))


# A create_fn carrying this attribute (true) relates several sources (DUPLICATE_INPUT and
# other aliasing kinds); ``Guard.sort_key`` puts such guards last, as the specification does
# for Dynamo's DUPLICATE_INPUT, without the data model knowing any particular guard kind.
RELATIONAL_ATTR = "__jitguard_relational__"


def _create_fn_key(fn: Callable[..., Any]) -> Any:
    if isinstance(fn, functools.partial):
        key = ("partial", id(fn.func), fn.args, tuple(sorted(fn.keywords.items())))
        try:
            hash(key)
        except TypeError:
            return id(fn)
        return key
    return id(fn)


@dataclasses.dataclass(slots=True, eq=False)
class Guard:
    """One assumption: the value at ``originating_source`` passes the check ``create_fn``
    describes. ``create_fn(builder, guard)`` installs the check when the guards compile.

    The export-only fields (``guard_types``, ``code_list``, ``obj_weakref``,
    ``guarded_class_weakref``) are written by ``set_export_info`` when a check is built.

    Deliberate differences from the specification:
      * equality agrees with the hash: two guards are equal when their name, guard source
        and create_fn match. The specification compares every field, including the lazily
        cached hash and the captured stacks, so two identically built guards compared equal
        or not depending on which had been hashed, and a set could hold both.
      * two ``functools.partial`` create_fns of the same function with equal arguments count
        as the same create_fn (the specification keys on the partial object's ``id``).
    """

    originating_source: Source
    create_fn: Callable[..., Any]

    guard_types: Optional[list[str]] = None
    code_list: Optional[list[str]] = None
    obj_weakref: Optional[object] = None
    guarded_class_weakref: Optional[weakref.ReferenceType[Any]] = None

    stack: Optional[CapturedStack] = None
    user_stack: Optional[traceback.StackSummary] = None
    _hash: Optional[int] = None
    _unserializable: bool = False

    def __post_init__(self) -> None:
        source = self.originating_source
        if not callable(getattr(source, "guard_source", None)) or not callable(
            getattr(source, "name", None)
        ):
            raise TypeError(
                f"Guard needs a Source as originating_source (LocalSource('x'), "
                f"GlobalSource('cfg'), ...), got {type(source).__name__} {source!r}"
            )

    def _identity(self) -> tuple[str, GuardSource, Any]:
        return (self.name, self.source, _create_fn_key(self.create_fn))

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            # The identity's hash, with a GuardSource member hashed by its value (an enum
            # member's own __hash__, like its ``value`` property, is a Python-level call;
            # equal members have equal values).
            source = self.originating_source
            guard_source: Any = source.guard_source()
            if type(guard_source) is GuardSource:
                guard_source = guard_source._value_
            h = self._hash = hash((source.name(), guard_source, _create_fn_key(self.create_fn)))
        return h

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Guard):
            return NotImplemented
        return hash(self) == hash(other) and self._identity() == other._identity()

    def sort_key(self) -> tuple[bool, int, int, str, int]:
        """Relational guards last, then by guard source, name length, name, create_fn line."""
        inner = self.create_fn
        if isinstance(inner, functools.partial):
            inner = inner.func
        code = getattr(inner, "__code__", None)
        source = self.originating_source
        guard_source = source.guard_source()
        if not guard_source:
            order = -1
        elif type(guard_source) is GuardSource:
            order = guard_source._value_  # ``value`` is a Python-level property
        else:
            order = guard_source.value
        name = source.name()
        return (
            bool(getattr(inner, RELATIONAL_ATTR, False)),
            order,
            len(name),
            name,
            code.co_firstlineno if code is not None else 0,
        )

    def __lt__(self, other: Guard) -> bool:
        return self.sort_key() < other.sort_key()

    def inner_create_fn(self) -> Callable[..., Any]:
        if isinstance(self.create_fn, functools.partial):
            return self.create_fn.func
        return self.create_fn

    @property
    def name(self) -> str:
        return self.originating_source.name()

    @property
    def source(self) -> GuardSource:
        return self.originating_source.guard_source()

    @staticmethod
    def weakref_to_str(obj_weakref: object) -> str:
        """Text for a weak reference that never calls into the referent.

        ``str(weakref.ref(obj))`` reads ``obj``'s class ``__name__`` through ``getattr`` and
        fails for objects whose ``__getattr__`` raises (a dict subclass that maps attributes
        to keys); this reads ``__class__.__name__`` directly.
        """
        if isinstance(obj_weakref, weakref.ReferenceType):
            obj = obj_weakref()
            if obj is not None:
                return (
                    f"<weakref at {hex(id(obj_weakref))}; to "
                    f"'{obj.__class__.__name__}' at {hex(id(obj))}>"
                )
            return f"<weakref at {hex(id(obj_weakref))}; dead>"
        return str(obj_weakref)

    def _create_fn_display(self) -> str:
        return getattr(self.inner_create_fn(), "__name__", repr(self.inner_create_fn()))

    def __repr__(self) -> str:
        # One line (the specification's is a multi-line block): every field, for debugging.
        source = self.source.name.lower() if self.source else ""
        return (
            f"Guard(name={self.name!r}, source={source}, "
            f"create_fn={self._create_fn_display()}, guard_types={self.guard_types}, "
            f"code={self.code_list}, obj_weakref={self.weakref_to_str(self.obj_weakref)}, "
            f"guarded_class={self.guarded_class_weakref})"
        )

    def __str__(self) -> str:
        """One readable line: ``EQUALS_MATCH on L['n'] (local): L['n'] == 7`` (the check's
        text once the guard is compiled). The specification prints a multi-line block."""
        source = self.source.name.lower() if self.source else "no source"
        name = self.name  # empty for the anchors of ambient state (GLOBAL_STATE, SHAPE_ENV)
        text = f"{self._create_fn_display()}{' on ' + name if name else ''} ({source})"
        if self.code_list:
            text += ": " + " and ".join(self.code_list)
        return text

    def create(self, builder: GuardBuilderBase) -> Any:
        """Install this guard into ``builder``; on failure log the guard and where it was
        created on the ``guards`` log at DEBUG (``+guards``: nothing is printed to a caller
        who catches the error), then re-raise."""
        try:
            return self.create_fn(builder, self)
        except Exception:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("Error while creating guard %s", self, exc_info=True)
                if self.stack:
                    log.debug("Created at:\n%s", "".join(self.stack.format()[-4:]).rstrip())
            raise

    def is_specialized_nn_module(self) -> bool:
        return self.source.is_specialized_nn_module()

    def is_fsdp_module(self) -> bool:
        return self.source.is_fsdp_module()

    def is_local(self) -> bool:
        return self.source.is_local()

    def create_fn_name(self) -> str:
        return self.inner_create_fn().__name__

    def set_export_info(
        self,
        guard_type: str,
        guarded_class: Optional[weakref.ReferenceType[Any]],
        code_list: list[str],
        obj_weakref: object,
    ) -> None:
        """Record what check was built for this guard (export only).

        Several checks may be built for one guard; their types and code accumulate. The
        guarded class must be the same each time (or unset), and so must the guarded object,
        except that a weak reference that has died meanwhile may be replaced.
        """
        if not self.guard_types:
            self.guard_types = []
        self.guard_types.append(guard_type)

        if not _same_or_unset(self.guarded_class_weakref, guarded_class):
            raise AssertionError(
                f"Guarded class id must be identical, or None (guard {self.name!r}: "
                f"{self.guarded_class_weakref} then {guarded_class})"
            )
        self.guarded_class_weakref = guarded_class

        if not self.code_list:
            # A copy: a later call extends this list, which must not be the caller's.
            self.code_list = list(code_list)
        else:
            self.code_list.extend(code_list)

        old = self.obj_weakref
        if not (_same_or_unset(old, obj_weakref) or (callable(old) and old() is None)):
            raise AssertionError(
                f"Guarded object must be identical, None or ephemeral (dead weakref) "
                f"(guard {self.name!r})"
            )
        self.obj_weakref = obj_weakref


def _same_or_unset(old: Any, new: Any) -> bool:
    """``old`` is unset or refers to the same object as ``new``: weak references are compared
    by referent identity, never with ``==`` (a tensor's ``==`` is elementwise)."""
    if old is None or old is new:
        return True
    if isinstance(old, weakref.ReferenceType) and isinstance(new, weakref.ReferenceType):
        return old() is new() and old() is not None
    return False

