"""The default guards for arguments: a registry of rules by type (``ArgPolicy``), what a rule
is given (``ArgContext``), and the built-in rules.

May import: _util, errors, guards, sources, contexts, compiler.*.

# [Note: Argument rules]
# Before the user's compiler runs, every parameter value is *visited*: the policy finds the
# rule for the value's type and the rule installs guards on (source, value), recursing into
# the parts it relies on with ``ctx.visit``, the way a pytree registry flattens a node. What
# an artifact may assume about an argument is exactly what its rule guarded (plus what the
# compiler guards itself). Rules are found along the value type's MRO; a rule registered
# with ``subclasses=False`` applies to that exact type only. The built-in rules:
#   * int, float, complex, str, bytes, bool, None: by value (CONSTANT_MATCH: type-exact
#     equality); a dynamic int/float/complex/str/bytes by exact type only;
#   * tuple, list (and named tuples): SEQUENCE_LENGTH (exact type and length) and each item;
#   * dict, OrderedDict: DICT_KEYS_MATCH (exact type, keys in order, compared with ``==``)
#     and each value; a dict with a key that has no literal form is treated as an object;
#   * functions: FUNCTION_MATCH (code object and closure contents), their ``__globals__``
#     by identity and their ``__defaults__``/``__kwdefaults__`` by their own rules (two
#     functions of one code object differ in these: ``lambda x, k=i: ...`` in a loop);
#     bound methods: their type, ``__func__`` and ``__self__``; classes, modules,
#     builtins: by identity; frozenset, range, slice of constants: by value (a frozenset
#     nested more than 32 deep as an object: the comparisons recurse);
#   * a numpy dtype: by value (EQUALS_MATCH: same class and ``dtype_key``, see
#     [Note: Array facts]; numpy has a class per dtype: found without a registration);
#   * anything else: its exact type and its identity (TYPE_MATCH + ID_MATCH); except the
#     receiver of a method (``self``, see ``Signature.receiver``): its exact type only, so
#     that a specialized method serves every instance of a class with one entry. What an
#     artifact reads from ``self`` it guards itself, and one that depends on which instance
#     it got asks for identity: ``request.add_guard("self", GuardBuilder.ID_MATCH)``.
# Rules are chosen, and named tuples recognized, from the value's real type (``type(v)``
# and its real MRO, compared by identity): never through ``isinstance`` (which asks
# ``v.__class__``, a property that may lie or raise), a metaclass's ``__eq__``/``__hash__``
# or ``__getattr__``. A tuple subclass is a named tuple only if it has ``_fields`` and
# keeps tuple's own ``__len__``/``__getitem__``/``__iter__`` (the items guarded are then
# the items there are).
# A container met again inside itself is guarded by type and tied to its outer occurrence
# by the aliasing guards; past ``max_depth`` levels values are guarded as objects.
#
# [Note: Aliasing guards]
# ``f(a, a)`` and ``f(a, b)`` may need different code when ``a`` is mutable. After the
# compiler ran, the visited values that are mutable and not pinned by identity (an ID_MATCH
# already fixes which object is where) are grouped by identity: each group of one object
# gets DUPLICATE_INPUT between its first source and each other one, and the groups' first
# sources together get one NO_ALIASING. Values of immutable types, the fresh ``*args`` tuple
# and ``**kwargs`` dict, and sources the compiler released with
# ``CompileRequest.allow_aliasing`` are left out.
"""

from __future__ import annotations

import collections
import enum
import functools
import threading
import types
from collections.abc import Callable, Iterable
from typing import Any, Optional

from .._util import SCALAR_TYPES, is_scalar_type
from ..compiler.builder import GuardBuilder
from ..compiler.constants import MAX_CONSTANT_DEPTH, is_dtype
from ..errors import SourceError
from ..guards import Guard, Source
from ..sources import AttrSource, GetItemSource, LocalSource, has_literal_form

__all__ = [
    "ArgContext",
    "ArgPolicy",
    "ArgRule",
    "default_policy",
    "is_immutable",
    "register_arg_rule",
]

ArgRule = Callable[["ArgContext", Source, Any], None]

_MISSING: Any = object()
# The scalars a dynamic marking relaxes to a type guard (a dynamic bool or None is no use).
_DYNAMIC_SCALAR_IDS = frozenset(id(t) for t in SCALAR_TYPES if t is not bool and t is not type(None))
# Functions are not here: their attributes, defaults and ``__dict__`` can be mutated.
_IMMUTABLE = (
    *SCALAR_TYPES, tuple, frozenset, range, slice, type,
    types.BuiltinFunctionType, types.MethodType, types.ModuleType,
    types.CodeType, type(Ellipsis), type(NotImplemented), enum.Enum,
)
# The real MRO and class dicts of a type, read past any metaclass attribute hook.
_mro_of = type.__dict__["__mro__"].__get__
_dict_of = type.__dict__["__dict__"].__get__
_TUPLE_SLOTS = {name: tuple.__dict__[name] for name in ("__len__", "__getitem__", "__iter__")}


def real_mro(tp: type) -> tuple[type, ...]:
    """``tp.__mro__`` as the interpreter sees it (no metaclass ``__getattribute__``)."""
    return _mro_of(tp)


def _static_lookup(tp: type, name: str) -> Any:
    """The class attribute ``name`` of ``tp`` found along its real MRO, or ``_MISSING``."""
    for klass in real_mro(tp):
        found = _dict_of(klass).get(name, _MISSING)
        if found is not _MISSING:
            return found
    return _MISSING


def is_immutable(value: Any) -> bool:
    """True for values whose identity an artifact cannot observe through mutation. Decided
    by the real type: ``isinstance`` would ask ``value.__class__``, which may lie or raise."""
    return issubclass(type(value), _IMMUTABLE)


def is_named_tuple(value: Any) -> bool:
    """A tuple subclass with ``_fields`` that reads its items as a tuple does (so that
    SEQUENCE_LENGTH and the item guards see the items an attribute read sees)."""
    tp = type(value)
    if tp is tuple or not issubclass(tp, tuple):
        return False
    if _static_lookup(tp, "_fields") is _MISSING:
        return False
    return all(_static_lookup(tp, name) is slot for name, slot in _TUPLE_SLOTS.items())


class _Registered:
    __slots__ = ("rule", "subclasses", "tp")

    def __init__(self, tp: type, rule: ArgRule, subclasses: bool) -> None:
        self.tp = tp  # holds the type, so that its id stays unique
        self.rule = rule
        self.subclasses = subclasses


_DEFAULT: Any = object()


class ArgPolicy:
    """Argument rules by type. The default policy holds the built-in rules and whatever
    ``register_arg_rule`` adds; ``ArgPolicy()`` makes a per-function policy on top of it
    (``specialize(fn, policy=...)``) whose own rules win; ``ArgPolicy(base=None)`` starts
    from nothing (every value then guarded as an object)."""

    def __init__(self, base: Optional[ArgPolicy] = _DEFAULT) -> None:
        self.base: Optional[ArgPolicy] = default_policy if base is _DEFAULT else base
        # Keyed by id(type): a lookup must not hash or compare types (a metaclass's
        # __hash__/__eq__ could make a class look like int and get int's rule).
        self._rules: dict[int, _Registered] = {}
        self._lock = threading.Lock()

    def register(
        self, tp: type, rule: ArgRule, *, subclasses: bool = True, replace: bool = False
    ) -> None:
        """Guard values of type ``tp`` (and, with ``subclasses``, of its subclasses) with
        ``rule(ctx, source, value)``. A second registration of ``tp`` needs ``replace``."""
        if not isinstance(tp, type) or not callable(rule):
            raise TypeError(f"register needs a type and a callable rule, got {tp!r}, {rule!r}")
        with self._lock:
            if id(tp) in self._rules and not replace:
                raise ValueError(
                    f"an argument rule for {tp.__qualname__} is already registered; pass "
                    f"replace=True to redefine it"
                )
            self._rules[id(tp)] = _Registered(tp, rule, subclasses)

    def unregister(self, tp: type) -> None:
        with self._lock:
            if self._rules.pop(id(tp), None) is None:
                raise KeyError(f"no argument rule registered for {tp!r} in this policy")

    def _find(self, klass: type, exact: bool) -> Optional[ArgRule]:
        policy: Optional[ArgPolicy] = self
        while policy is not None:
            found = policy._rules.get(id(klass))
            if found is not None and found.tp is klass and (exact or found.subclasses):
                return found.rule
            policy = policy.base
        return None

    def rule_for(self, tp: type) -> ArgRule:
        """The rule for values of type ``tp``: the first registered along its real MRO."""
        for klass in real_mro(tp):
            rule = self._find(klass, klass is tp)
            if rule is not None:
                return rule
        return object_rule


class ArgContext:
    """What an argument rule is given: where guards go and how to recurse.

    ``guard(source, create_fn)`` installs one guard (``create_fn`` is a ``GuardBuilder``
    attribute, or a ``functools.partial`` of one with options); ``visit(source, value)``
    guards a part of the value by its own rule; ``by_value``/``by_type``/``by_identity``/
    ``as_object`` are the common cases. ``is_dynamic(source)`` says the value should be
    guarded loosely (by type, a tensor with dynamic sizes): the user declared it or a
    recompile made it so; ``is_static(source)`` says the user wants it by value.
    ``request`` is the ``CompileRequest`` being served.
    """

    def __init__(
        self,
        policy: ArgPolicy,
        add: Callable[[Guard], None],
        *,
        is_dynamic: Callable[[Source], bool] = lambda s: False,
        is_static: Callable[[Source], bool] = lambda s: False,
        fresh: Iterable[str] = (),
        receiver: Optional[str] = None,
        request: Any = None,
        max_depth: int = 64,
    ) -> None:
        self.policy = policy
        self.request = request
        self.max_depth = max_depth
        self._add = add
        self._is_dynamic = is_dynamic
        self._is_static = is_static
        self._fresh = frozenset(LocalSource(n) for n in fresh)
        self.receiver = receiver
        self.dynamic_sources: set[Source] = set()
        self._visited: list[tuple[Source, Any]] = []  # holds the values: ids stay unique
        self._pinned: set[Source] = set()
        self._loose: set[Source] = set()
        self._path: set[int] = set()
        self._depth = 0

    # ---- for rules ----
    def guard(self, source: Source, create_fn: Callable[..., Any]) -> Guard:
        guard = source.make_guard(create_fn)
        if create_fn is GuardBuilder.ID_MATCH:
            self._pinned.add(source)
        self._add(guard)
        return guard

    def visit(self, source: Source, value: Any) -> None:
        """Guard ``value`` at ``source`` by the rule for its type."""
        self._visited.append((source, value))
        if id(value) in self._path:
            self.guard(source, GuardBuilder.TYPE_MATCH)
            return
        if self.is_dynamic(source):
            self.dynamic_sources.add(source)
        if self._depth >= self.max_depth:
            self.as_object(source, value)
            return
        rule = self.policy.rule_for(type(value))
        self._path.add(id(value))
        self._depth += 1
        try:
            rule(self, source, value)
        finally:
            self._depth -= 1
            self._path.discard(id(value))

    def is_dynamic(self, source: Source) -> bool:
        return not self._is_static(source) and self._is_dynamic(source)

    def is_static(self, source: Source) -> bool:
        return self._is_static(source)

    def is_receiver(self, source: Source) -> bool:
        """``source`` is the parameter that receives the instance of a method (``self``)."""
        return (
            self.receiver is not None and type(source) is LocalSource
            and source.local_name == self.receiver
        )

    def ignore_aliasing(self, source: Source) -> None:
        """Leave ``source`` out of the aliasing guards (its identity does not matter)."""
        self._loose.add(source)

    def by_value(self, source: Source, value: Any) -> None:
        self.guard(source, GuardBuilder.CONSTANT_MATCH)

    def by_type(self, source: Source, value: Any = None) -> None:
        self.guard(source, GuardBuilder.TYPE_MATCH)

    def by_identity(self, source: Source, value: Any = None) -> None:
        self.guard(source, GuardBuilder.ID_MATCH)

    def as_object(self, source: Source, value: Any) -> None:
        """The fallback: exact type and identity."""
        self.guard(source, GuardBuilder.TYPE_MATCH)
        self.guard(source, GuardBuilder.ID_MATCH)

    # ---- for the cache ----
    def identities(self) -> list[tuple[Source, int]]:
        """Every visit so far as (source, id of the value): two visits of unchanged
        arguments give the same list (see [Note: Arguments changed by the compiler])."""
        return [(source, id(value)) for source, value in self._visited]

    def aliasing_guards(self, allowed: Iterable[Source] = ()) -> list[Guard]:
        """The guards of [Note: Aliasing guards] for everything visited so far."""
        skip = self._pinned | self._loose | self._fresh | set(allowed)
        groups: dict[int, list[Source]] = {}
        for source, value in self._visited:
            if source in skip or is_immutable(value):
                continue
            group = groups.setdefault(id(value), [])
            if source not in group:
                group.append(source)
        guards = []
        firsts = []
        for sources in groups.values():
            firsts.append(sources[0])
            for other in sources[1:]:
                guards.append(
                    sources[0].make_guard(
                        functools.partial(GuardBuilder.DUPLICATE_INPUT, source_b=other)
                    )
                )
        if len(firsts) > 1:
            guards.append(
                firsts[0].make_guard(
                    functools.partial(GuardBuilder.NO_ALIASING, others=tuple(firsts[1:]))
                )
            )
        return guards


def root_name(source: Source) -> Optional[str]:
    """The parameter a source starts from, if it starts from a ``LocalSource``."""
    root = source.chain()[-1]
    return root.local_name if isinstance(root, LocalSource) else None


# ---- the built-in rules ------------------------------------------------------------------


def object_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """Anything without a rule: a named tuple as a sequence; a numpy dtype by value; a
    method's receiver by its exact type; else type and identity."""
    if is_named_tuple(value):
        sequence_rule(ctx, source, value)
        return
    if is_dtype(value):
        ctx.by_value(source, value)
        return
    if ctx.is_receiver(source):
        ctx.by_type(source, value)
        return
    ctx.as_object(source, value)


def scalar_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """By value; a dynamic scalar by exact type."""
    if ctx.is_dynamic(source) and id(type(value)) in _DYNAMIC_SCALAR_IDS:
        ctx.by_type(source, value)
    else:
        ctx.by_value(source, value)


def sequence_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """Exact type, length and every item."""
    ctx.guard(source, GuardBuilder.SEQUENCE_LENGTH)
    for i, item in enumerate(value):
        ctx.visit(GetItemSource(source, i), item)


def mapping_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """Exact type, keys in order and every value."""
    keys = list(dict.keys(value))
    if not all(has_literal_form(k) for k in keys):
        ctx.as_object(source, value)
        return
    try:
        items = [(GetItemSource(source, k), v) for k, v in dict.items(value)]
    except SourceError:  # a key with no literal form cannot be named by a source
        ctx.as_object(source, value)
        return
    ctx.guard(source, GuardBuilder.DICT_KEYS_MATCH)
    for item_source, item in items:
        ctx.visit(item_source, item)


def function_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """Code object and closure contents; the globals it runs in; its defaults."""
    ctx.guard(source, GuardBuilder.FUNCTION_MATCH)
    ctx.by_identity(AttrSource(source, "__globals__"), value.__globals__)
    ctx.visit(AttrSource(source, "__defaults__"), value.__defaults__)
    ctx.visit(AttrSource(source, "__kwdefaults__"), value.__kwdefaults__)


def method_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """A bound method is made afresh on each attribute read: guard what it binds."""
    ctx.by_type(source, value)
    ctx.visit(AttrSource(source, "__func__"), value.__func__)
    ctx.visit(AttrSource(source, "__self__"), value.__self__)


def identity_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    ctx.by_identity(source, value)


def _constant(value: Any, depth: int = 0) -> bool:
    """A scalar or a frozenset of constants, by exact type identity; nested deeper than
    ``MAX_CONSTANT_DEPTH`` (EQUALS_MATCH's own limit), not a constant (guarded as an object,
    never a RecursionError)."""
    if type(value) is frozenset:
        return depth < MAX_CONSTANT_DEPTH and all(_constant(v, depth + 1) for v in value)
    return is_scalar_type(type(value))


def frozenset_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    if _constant(value):
        ctx.by_value(source, value)
    else:
        ctx.as_object(source, value)


def constant_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    ctx.by_value(source, value)


def slice_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """By value when its bounds are constants (``slice(0, 2)``); otherwise (``slice(a, b)``
    of dates, of objects) as an object: EQUALS_MATCH holds constants only."""
    if all(_constant(v) for v in (value.start, value.stop, value.step)):
        ctx.by_value(source, value)
    else:
        ctx.as_object(source, value)


default_policy = ArgPolicy(base=None)
_tp: type
for _tp in SCALAR_TYPES:
    default_policy.register(_tp, scalar_rule, subclasses=False)
for _tp in (tuple, list):
    default_policy.register(_tp, sequence_rule, subclasses=False)
for _tp in (dict, collections.OrderedDict):
    default_policy.register(_tp, mapping_rule, subclasses=False)
default_policy.register(types.FunctionType, function_rule, subclasses=False)
default_policy.register(types.MethodType, method_rule, subclasses=False)
for _tp in (type, types.ModuleType, types.BuiltinFunctionType):
    default_policy.register(_tp, identity_rule)
default_policy.register(frozenset, frozenset_rule, subclasses=False)
default_policy.register(range, constant_rule, subclasses=False)
default_policy.register(slice, slice_rule, subclasses=False)
del _tp


def register_arg_rule(
    tp: type, rule: ArgRule, *, subclasses: bool = True, replace: bool = False
) -> None:
    """Register ``rule(ctx, source, value)`` as the default guards for arguments of type
    ``tp`` in every specialized function (see [Note: Argument rules])."""
    default_policy.register(tp, rule, subclasses=subclasses, replace=replace)
