"""The guard-kind protocol and its registry.

May import: errors, integrations, guards, compiler.values, compiler.builder (for types only).

A guard kind says, for one assumption, four things kept apart:
  * ``expect(value, guard, **options)``: at build time, what to hold on to (the "params"),
    from the value the source has in the frame being compiled;
  * ``holds(value, params)``: the reference meaning, in plain Python, used by the reference
    evaluator and by ``explain`` (tests compare it with the generated code);
  * ``emit(var, params, ctx)``: a Python boolean expression over the variable holding the
    source's value, for the generated check function;
  * ``code(name, params)`` / ``reason(name, value, params)``: display text: what the guard
    says, and why it failed for a value.
A kind is registered once (``register_guard_kind``); registering makes it a ``GuardBuilder``
attribute whose value is the ``create_fn`` that ``Source.make_guard`` takes. Nothing in the
compiler names a particular kind.

Relational kinds (``RelationalKind``) guard several sources at once; their ``holds`` and
``emit`` receive a tuple of values / variables.

A kind also declares what the specializing cache needs of it ([Note: Kinds own their cache
data]): ``specificity`` (how much one of its guards specializes an entry), the facts it
contributes to dispatch (``dispatch_facts``: name, key expression, exact or not; see
``DispatchFact``), and ``sample_options`` (how property tests build it on a value).

# [Note: Kinds own their cache data]
# The cache names no kind. An entry's specificity is the sum of its leaves'
# ``kind.weight(params)`` (``specificity`` by default: 1 unless the kind says more), unless
# ``register_specificity`` overrides it by name. A leaf on a parameter whose kind's
# ``fact(params)`` returns ``(name, expected)`` is indexed by that fact: computed inline by
# the generated dispatcher when the kind's class itself declares a ``DispatchFact`` of that
# name in ``dispatch_facts`` (not inherited: a subclass that guards something else must not
# keep an exact fact by accident), else by calling ``kind.fact_of(name, value)``. A
# declared fact that is ``exact`` lets a key match stand for the leaf (it leaves the
# residual check); ``fact_of`` facts only narrow the candidates. Fact names are global:
# two kinds that declare one name must declare the same ``DispatchFact``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Optional, Union

from ..errors import GuardKindError
from ..guards import RELATIONAL_ATTR, Guard
from ..integrations import ensure_loaded

if TYPE_CHECKING:
    from .builder import GuardBuilder

__all__ = [
    "FACT_ID",
    "FACT_LEN",
    "FACT_TYPE",
    "FACT_TYPE_KEYS",
    "FACT_TYPE_LEN",
    "FACT_VALUE",
    "DispatchFact",
    "EmitContext",
    "GuardKind",
    "RelationalKind",
    "dispatch_fact",
    "get_guard_kind",
    "guard_kinds",
    "register_guard_kind",
    "register_guard_kind_alias",
    "unregister_guard_kind_alias",
]


class EmitContext:
    """What ``emit`` may use: ``const(obj, hint)`` binds an object strongly and returns its
    name; ``identical(expr, obj, hint)`` returns an expression true iff ``expr`` evaluates to
    ``obj`` (see [Note: Identity binding])."""

    def const(self, obj: Any, hint: str = "c") -> str:
        raise NotImplementedError

    def identical(self, expr: str, ident: Any, hint: str = "o") -> str:
        raise NotImplementedError


class DispatchFact(NamedTuple):
    """A fact of a value that the specializing cache's generated dispatcher computes inline
    and puts in its dispatch key ([Note: Kinds own their cache data], [Note: Key layout]).

    ``name``: the fact's name (what ``kind.fact(params)`` returns first). ``expr``: the key
    part, a Python expression over ``{v}`` (the parameter) and the builtins ``{type}``,
    ``{id}``, ``{len}``, ``{tuple}``, ``{dict}``; None when the type is the whole fact.
    ``{tmp}`` is a prefix for local names the expression assigns (``({tmp}d := ...)``),
    its own per key part.
    ``typed``: the expected fact's first part is the value's type (``"type"``: the type
    itself, ``"id"``: its id): the dispatcher tests it first, or keys on ``id(type(v))``.
    ``gate``: ``expr`` runs code of the value's type (its ``__hash__``, ``__len__``), so it
    runs only for ``"scalar"`` (builtin scalar) types, or for the ``"types"`` the keyed
    entries expect. ``spread``: the expected fact is a tuple of key parts (else one part).
    ``exact``: a key match proves the guard (a bool, or a function of the key parts).
    ``consts``: ``(name, object)`` pairs bound in the dispatcher's namespace, each named in
    ``expr`` as ``{name}`` (a helper function such as ``array_fact``, a tuple of options);
    a name must be an identifier other than the builtin ones above.
    """

    name: str
    expr: Optional[str]
    typed: Optional[str] = None
    gate: Optional[str] = None
    spread: bool = False
    exact: Union[bool, Callable[[tuple[Any, ...]], bool]] = True
    consts: tuple[tuple[str, Any], ...] = ()

    def parts(self, expected: Any) -> tuple[Any, ...]:
        """The key parts of an expected fact."""
        return tuple(expected) if self.spread else (expected,)

    def is_exact(self, parts: tuple[Any, ...]) -> bool:
        return bool(self.exact(parts)) if callable(self.exact) else self.exact


def _has_zero(value: Any) -> bool:
    """A float or complex zero (0.0 and -0.0 are one dict key), also inside a tuple."""
    tp = type(value)
    if tp is float:
        return bool(value == 0.0)
    if tp is complex:
        return bool(value.real == 0.0 or value.imag == 0.0)
    if tp is tuple:
        return any(_has_zero(v) for v in value)
    return False


# The facts of the built-in kinds. A dict key match is ``hash`` and ``==``: for "value" that
# is the guard itself (the type is a part of the key) except for signed zeros; "type_keys"
# compares the call's keys, whatever their types, with ``==`` (a str subclass, ``True`` for
# ``1``), so its leaf stays in the residual and the guard decides.
FACT_VALUE = DispatchFact("value", "{v}", typed="type", gate="scalar", spread=True,
                          exact=lambda parts: not _has_zero(parts[1]))
FACT_TYPE = DispatchFact("type", None, typed="id")
FACT_ID = DispatchFact("id", "{id}({v})")
FACT_LEN = DispatchFact("len", "{len}({v})")
FACT_TYPE_LEN = DispatchFact("type_len", "{len}({v})", typed="id", gate="types", spread=True)
FACT_TYPE_KEYS = DispatchFact("type_keys", "{tuple}({dict}.keys({v}))", typed="id",
                              spread=True, exact=False)


class GuardKind:
    """One kind of guard on one source. Subclass, set ``name``, implement the four parts.

    ``cost`` orders checks within a source (cheap first). ``reads_value`` is False for kinds
    whose source has no frame value (GLOBAL_STATE, SHAPE_ENV). ``on_base`` makes the kind
    read its source's base (HASATTR on ``AttrSource(x, 'a')`` reads ``x``).
    """

    name: ClassVar[str] = ""
    cost: ClassVar[int] = 5
    reads_value: ClassVar[bool] = True
    on_base: ClassVar[bool] = False
    relational: ClassVar[bool] = False
    # [Note: Batched leaves]: True when ``emit_batch`` is implemented.
    batches: ClassVar[bool] = False
    # ... and when ``emit_batch`` uses each value once (it may then be read in place).
    batch_reads_once: ClassVar[bool] = False
    # See [Note: Kinds own their cache data].
    specificity: ClassVar[int] = 1
    dispatch_facts: ClassVar[tuple[DispatchFact, ...]] = ()

    def resolve(self, value: Any, options: dict[str, Any]) -> GuardKind:
        """The kind that actually guards ``value`` (CONSTANT_MATCH picks one by value)."""
        return self

    def expect(self, value: Any, guard: Guard, **options: Any) -> Any:
        """Params to keep, from the value at build time (default: the value itself)."""
        if options:
            raise GuardKindError(f"{self.name} takes no options, got {sorted(options)}")
        return value

    def holds(self, value: Any, params: Any) -> bool:
        raise NotImplementedError

    def emit(self, var: Any, params: Any, ctx: EmitContext) -> str:
        raise NotImplementedError

    def emit_batch(self, vars: Sequence[str], params: Sequence[Any], ctx: EmitContext) -> str:
        """One expression over several leaves of this kind (``vars[i]`` holds the value of
        the leaf with ``params[i]``), true iff every one of them holds; used when ``batches``
        is True ([Note: Batched leaves])."""
        return " and ".join(f"({self.emit(v, p, ctx)})" for v, p in zip(vars, params, strict=True))

    def emit_batch_attrs(self, bases: Sequence[str], attrs: Sequence[str],
                         params: Sequence[Any], ctx: EmitContext) -> Optional[str]:
        """``emit_batch`` for a batch whose every value is a plain attribute read used once
        (``bases[i].attrs[i]``, ``getattr`` semantics), handed over unread so that one call
        can read them all; None (the default): read each, then ``emit_batch``
        ([Note: Batched leaves]). Only asked when ``batch_reads_once`` is True."""
        return None

    def pins_type(self, params: Any) -> Optional[type]:
        """The exact type a value that passes this guard has (TYPE_MATCH's), or None: later
        reads in the same generated function may rely on it (``Source.emit_on``)."""
        return None

    def pins_len(self, params: Any) -> Optional[int]:
        """The length a value that passes this guard has, where ``pins_type`` gives its exact
        type too (SEQUENCE_LENGTH's), or None: later reads in the same generated function
        may read the items of a list or tuple of that length in one unpacking
        ([Note: Unpacked items])."""
        return None

    def code(self, name: Any, params: Any) -> str:
        raise NotImplementedError

    def reason(self, name: Any, value: Any, params: Any) -> str:
        """Why ``value`` fails; the default restates the guard."""
        return f"{self.code(name, params)} failed"

    def export(self, params: Any) -> tuple[Any, Any]:
        """(guarded class weakref or None, object weakref or None) for ``set_export_info``."""
        return (None, None)

    def detail(self, params: Any) -> Optional[dict[str, Any]]:
        """What the guard pins, as JSON-ready fields for inspection (``jitguard.explain``,
        traces), beyond its one-line ``code``; None when the code says it all. A relational
        kind may return ``{"per_source": [fields, ...]}``, one per source in order."""
        return None

    def fact(self, params: Any) -> Optional[tuple[str, Hashable]]:
        """A hashable fact this guard pins, as (fact name, expected fact), or None.

        The specializing cache dispatches on facts: ``fact_of(fact name, value)`` computes the
        fact of a runtime value, and the guard holds only if it equals the expected fact.
        """
        return None

    def fact_of(self, fact: str, value: Any) -> Hashable:
        raise NotImplementedError

    def weight(self, params: Any) -> int:
        """How much one guard of this kind specializes an entry (default ``specificity``)."""
        return self.specificity

    def inline_fact(self, name: str) -> Optional[DispatchFact]:
        """The ``DispatchFact`` called ``name`` that this kind's own class declares."""
        for fact in type(self).__dict__.get("dispatch_facts", ()):
            if fact.name == name:
                return fact
        return None

    def recorded_as(self, params: Any) -> GuardKind:
        """The kind that checks a guard written (in a guard-set document) under this kind's
        name with ``params``: this kind, unless it is a marker that stands for unregistered
        kinds of its name (SHAPE_ENV's marker stands for the kind of each shape guard)."""
        return self

    def sample_options(self, value: Any) -> list[dict[str, Any]]:
        """Option sets to build this kind on ``value`` with, for property tests (the
        differential fuzz draws every registered kind): one build without options, unless a
        kind needs some."""
        return [{}]

    def __repr__(self) -> str:
        return f"<guard kind {self.name}>"


class RelationalKind(GuardKind):
    """A kind over several sources. The guard's own source is the first; the others come
    from the create_fn's options (``expect`` returns them in ``extra_sources``)."""

    relational = True
    cost = 20

    def extra_sources(self, guard: Guard, **options: Any) -> tuple[Any, ...]:
        raise NotImplementedError


_EXPR_NAMES = frozenset({"v", "type", "id", "len", "tuple", "dict", "tmp"})  # DispatchFact.expr's own
_kinds: dict[str, GuardKind] = {}
_facts: dict[str, DispatchFact] = {}
_create_fns: dict[str, Callable[..., Any]] = {}
_aliases: dict[str, str] = {}
_lock = threading.Lock()


def _make_create_fn(kind: GuardKind) -> Callable[..., Any]:
    def create_fn(builder: GuardBuilder, guard: Guard, *args: Any, **options: Any) -> None:
        if args:
            # functools.partial(create_fn, value) puts ``value`` first, shifting the builder
            # and the guard along: options must be keywords.
            raise GuardKindError(
                f"guard kind options must be keywords: functools.partial({kind.name}, "
                f"name=value), got positional {(builder, guard, *args)[:-2]!r}"
            )
        install = getattr(builder, "install", None)
        if install is None or not isinstance(guard, Guard):
            # Called by hand (GuardBuilder.EQUALS_MATCH(x)): a create_fn is not a check.
            raise TypeError(
                f"GuardBuilder.{kind.name} is a guard kind's create_fn, which the guard compiler "
                f"calls as create_fn(builder, guard); got ({type(builder).__name__}, "
                f"{type(guard).__name__}). To guard a value, write "
                f"source.make_guard(GuardBuilder.{kind.name}) and compile it with compile_guards"
            )
        install(kind, guard, options)

    create_fn.__name__ = create_fn.__qualname__ = kind.name
    create_fn.__doc__ = type(kind).__doc__
    create_fn.__jitguard_kind__ = kind  # type: ignore[attr-defined]
    if kind.relational:
        setattr(create_fn, RELATIONAL_ATTR, True)
    return create_fn


def register_guard_kind(kind: GuardKind, *, replace: bool = False) -> Callable[..., Any]:
    """Register ``kind``; returns its create_fn, also reachable as ``GuardBuilder.<NAME>``.

    Options reach the kind through ``functools.partial(create_fn, option=value)``.
    """
    if not isinstance(kind, GuardKind) or not kind.name.isidentifier():
        raise GuardKindError(f"{kind!r} is not a GuardKind with an identifier as name")
    with _lock:
        if (kind.name in _kinds or kind.name in _aliases) and not replace:
            raise GuardKindError(
                f"a guard kind named {kind.name} is already registered; pass replace=True"
            )
        for fact in type(kind).__dict__.get("dispatch_facts", ()):
            for cname, _ in fact.consts:
                if not cname.isidentifier() or cname in _EXPR_NAMES:
                    raise GuardKindError(
                        f"{kind.name}: dispatch fact {fact.name!r} binds {cname!r}, which is "
                        f"not an identifier or is one of {sorted(_EXPR_NAMES)}"
                    )
            if _facts.setdefault(fact.name, fact) != fact:
                raise GuardKindError(
                    f"{kind.name} declares a dispatch fact {fact.name!r} unlike the one "
                    f"registered under that name: {_facts[fact.name]!r}"
                )
        _aliases.pop(kind.name, None)
        _kinds[kind.name] = kind
        fn = _make_create_fn(kind)
        _create_fns[kind.name] = fn
    return fn


def get_guard_kind(create_fn: Callable[..., Any]) -> tuple[GuardKind, dict[str, Any]]:
    """The kind behind a create_fn (unwrapping ``functools.partial``) and its options."""
    options: dict[str, Any] = {}
    fn = create_fn
    while isinstance(fn, functools.partial):
        if fn.args:
            raise GuardKindError(
                f"guard kind options must be keywords: functools.partial({fn.func.__name__}, "
                f"name=value), got positional {fn.args!r}"
            )
        options = {**fn.keywords, **options}
        fn = fn.func
    kind = getattr(fn, "__jitguard_kind__", None)
    if kind is None:
        raise GuardKindError(f"{create_fn!r} is not the create_fn of a registered guard kind")
    return kind, options


def dispatch_fact(name: str) -> Optional[DispatchFact]:
    """The ``DispatchFact`` registered under ``name`` (by a kind declaring it), or None."""
    return _facts.get(name)


def guard_kinds() -> dict[str, GuardKind]:
    """Every registered kind, by name."""
    return dict(_kinds)


def register_guard_kind_alias(alias: str, name: str) -> None:
    """Make ``GuardBuilder.<alias>`` the create_fn of the kind named ``name``, so a retired
    kind's name keeps working. An alias is no kind of its own: its guards are ``name``
    guards (``guard_types``, failure reasons), and it follows ``name`` if that is replaced."""
    if not alias.isidentifier():
        raise GuardKindError(f"guard kind alias {alias!r} is not an identifier")
    with _lock:
        if alias in _kinds:
            raise GuardKindError(f"{alias} is a registered guard kind; it cannot be an alias")
        _aliases[alias] = name


def unregister_guard_kind_alias(alias: str) -> None:
    """Remove an alias made by ``register_guard_kind_alias`` (``KeyError`` if there is none)."""
    with _lock:
        if _aliases.pop(alias, None) is None:
            raise KeyError(f"no guard kind alias named {alias!r}")


def create_fn_for(name: str) -> Callable[..., Any]:
    try:
        return _create_fns[_aliases.get(name, name)]
    except KeyError:
        pass
    # The kind may belong to an integration not loaded yet (GuardBuilder.TENSOR_MATCH once
    # torch is imported): see [Note: Lazy integrations].
    ensure_loaded()
    try:
        return _create_fns[_aliases.get(name, name)]
    except KeyError:
        raise AttributeError(
            f"no guard kind named {name!r}; registered: {sorted(_create_fns)}"
        ) from None
