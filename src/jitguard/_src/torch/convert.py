"""Guard conversion: TorchDynamo's guards (``GuardFilterEntry``s from a capture's
``guard_filter_fn``) -> jitguard guards, with the same sources (same ``name()``), the same
meaning, and failure texts in Dynamo's forms.

May import: jitguard._src.compiler.*, jitguard._src.guards, jitguard._src.sources,
jitguard._src.more_sources, jitguard._src.torch.* (kinds, adapter_sources,
convert_context, convert_kinds, convert_tensors, convert_sources, convert_shape), torch.
The kind converters live in ``convert_kinds`` (objects, values, dicts, state) and
``convert_tensors`` (SHAPE_ENV, TENSOR_MATCH); the shared state and the registry in
``convert_context``.

Interface (stable; ``jitguard.torch.compile`` uses it):

    conversion = convert_guards(entries, function=fn, function_source=src,
                                dispatch_keys="torch", batch_tensors=True)
    conversion.guards          # list[Guard]: add each to the CompileRequest
    conversion.shape_guards    # list[ShapeGuard] and
    conversion.symbol_sources  # {symbol name: Source}: request.add_shape_guards(...)
    conversion.add_to(request) # both of the above
    conversion.unconverted     # list[Unconverted]: entries to delegate to torch's guard tree
    conversion.converted       # Counter: Dynamo guard kind -> entries converted
    conversion.delegated       # Counter: Dynamo guard kind -> entries not converted

``entries`` are what ``guard_filter_fn`` received, all of them, in order (the filter
returns False for every one: jitguard keeps and checks them). Conversion reads no frame:
the jitguard guards read their build-time values when the request's guards are compiled,
from the same call that was captured, and ambient kinds (GLOBAL_STATE, DEFAULT_DEVICE,
...) snapshot the state then, so call it right after the capture. ``function`` and
``function_source`` (a jitguard source that evaluates to the compiled function at check
time) let closure variables of the function be guarded; without them a guard on one is
unconverted. ``dispatch_keys`` is TENSOR_MATCH's mode ("torch": torch's exact dispatch key
comparison, the default).

# [Note: Converting guard kinds]
# A registry keyed by Dynamo's guard kind name (``register_kind_converter``) says what each
# becomes; no kind is approximated: a guard whose meaning jitguard cannot state raises
# ``Unconvertible`` and is listed in ``unconverted`` with the reason. Beyond one guard per
# entry:
#   * TENSOR_MATCH is TENSOR_MATCH (sizes and strides the shape guards decide are left
#     unchecked, see [Note: Converting shape guards]) plus DIMENSION_DYNAMIC_MARKING. With
#     ``batch_tensors`` the strided tensors of the capture are checked together by one
#     TENSORS_MATCH, jitguard's native tensor checker or torch's own C++ one (~7 or ~45 ns
#     a tensor, where TENSOR_MATCH in Python with torch's dispatch-key comparison costs
#     several hundred: [Note: A native tensor checker]); it also requires the
#     tensors to be distinct objects, which Dynamo's guards require of all but parameters
#     (parameters tied after compiling miss: stricter than torch). The tensor joins Dynamo's no-aliasing group unless Dynamo leaves it out (parameters,
#     tensors of built-in modules): one NO_ALIASING guard over the group (object identity,
#     as torch compares them).
#   * NOT_PRESENT_IN_GENERIC_DICT guards on one source become one guard (``attrs=``).
#   * GLOBAL_STATE, TORCH_FUNCTION_STATE, GRAD_MODE, DETERMINISTIC_ALGORITHMS and
#     FSDP_TRAINING_STATE become one GLOBAL_STATE guard: jitguard's torch states include
#     everything torch's GlobalStateGuard compares, the mode stack and the default device.
#   * EMPTY_NN_MODULE_HOOKS_DICT is always checked, even when torch skips it
#     (``skip_nnmodule_hook_guards``, its default): a hook added after compiling must not
#     be silently ignored. Here jitguard is stricter than torch (``stricter`` lists it).
#   * SHAPE_ENV becomes shape guards; with no code parts it holds always.
#   * [Note: Attributes resolved through the class] Where Dynamo resolved an attribute
#     of an object through its class (a method, a classmethod, a class attribute), it
#     guards that the instance dict does not shadow it (NOT_PRESENT_IN_GENERIC_DICT) and
#     the object's type, but not the class namespaces: ``M.helper = g``, a classmethod
#     replaced, or a subclass gaining an attribute that shadows its base's would be
#     accepted with the old behaviour baked in. So each source with such guards also gets
#     jitguard's own CLASS_ATTRS_MATCH over the same names: no class before the one that
#     held it in the MRO has the name now, and that class still holds the very object
#     (by identity). Stricter than torch, listed in ``stricter``. Where several sources
#     look up the same names on one type that TYPE_MATCH pins on each (the ten Linear
#     layers of a model), the lookups are checked once, on the first of them: they are a
#     property of the class. For a module whose ``forward`` was so resolved (a module the
#     capture called), ``__call__`` is checked too: a class ``__call__`` set after
#     compiling (on it or a base) changes what calling it runs, and Dynamo guards none.
#   * [Note: Builtins a global may shadow] Dynamo reads a builtin the code names through
#     the builtins dict (``G['__builtins_dict___0']['abs']``, BUILTIN_MATCH) and guards
#     that dict's entry, not that the module has no global of that name: ``abs = g`` at
#     module level after compiling would be ignored. For each such name jitguard adds
#     DICT_CONTAINS (inverted) on the function's globals dict, which the conversion binds
#     to itself there as ``G['__jitguard_globals__']`` (a function must be given; a module
#     dict holding itself is harmless and stays). Stricter than torch, listed.
#   * [Note: Global module hooks] A capture that inlined a module call read torch's
#     global module hook dicts (``register_module_forward_hook`` and the like), but
#     Dynamo guards only their types (``skip_nnmodule_hook_guards``): a global hook
#     registered after compiling would be ignored by a compiled function calling a module.
#     Such a capture gets one NN_MODULE_GLOBAL_HOOKS guard (the hooks as when captured:
#     none, or the same ones). Stricter than torch, listed in ``stricter``.
#   * DICT_KEYS_MATCH on an OrderedDict also compares the order it iterates in (its own
#     linked list; Dynamo traces in that order but its guard reads ``dict.keys``, which
#     ``move_to_end`` does not change): stricter than torch, listed in ``stricter``.
#   * The keys of a dict whose type or length alone Dynamo guarded are pinned
#     ([Note: Dict keys a length stands for]); the mutable objects the guards reach from
#     the arguments must alias as when captured ([Note: Mutable objects that alias]); an
#     EQUALS_MATCH on a float zero or NaN compares strictly (``-0.0`` is not ``0.0``,
#     which torch's guard accepts with the sign baked in). All stricter than torch, listed.
"""

from __future__ import annotations

import collections
import enum
import functools
import re
import types
from collections.abc import Callable, Iterable
from typing import Any, Optional

import torch

from ..compiler.builder import GuardBuilder
from ..guards import Source
from ..more_sources import DictGetItemSource, GenericAttrSource, TypeDictSource, TypeMROSource
from ..sources import AttrSource, GetItemSource, GlobalSource, GlobalStateSource, TypeSource
from . import adapter_sources as adapter
from . import convert_kinds  # noqa: F401  (registers its kind converters)
from .convert_context import (
    GLOBALS_SELF,
    Context,
    Conversion,
    Unconverted,
    converter_for,
    kind_converters,
    register_kind_converter,
)
from .convert_sources import SourceConverter, Unconvertible
from .convert_tensors import tensor_guards

__all__ = [
    "GLOBALS_SELF",
    "Conversion",
    "Unconverted",
    "Unconvertible",
    "convert_guards",
    "kind_converters",
    "register_kind_converter",
]


def convert_guards(
    entries: Iterable[Any],
    *,
    function: Optional[Callable[..., Any]] = None,
    function_source: Optional[Source] = None,
    dispatch_keys: str = "torch",
    batch_tensors: bool = True,
) -> Conversion:
    """Convert Dynamo's guards; see the module docstring."""
    freevars: tuple[str, ...] = ()
    code = getattr(function, "__code__", None)
    if isinstance(code, types.CodeType):
        freevars = code.co_freevars
    ctx = Context(
        SourceConverter(function_source=function_source, freevars=freevars), dispatch_keys,
        batch_tensors,
    )
    f_globals = getattr(function, "__globals__", None)
    ctx.f_globals = f_globals if isinstance(f_globals, dict) else None
    parts = [(e, adapter.entry_parts(e)) for e in entries]
    # Sources first (shape guards refer to them by name), SHAPE_ENV next (TENSOR_MATCH
    # needs to know which dims it decides), then every other kind.
    converted: dict[int, Source] = {}
    failed: dict[int, str] = {}
    for i, (_, p) in enumerate(parts):
        try:
            converted[i] = ctx.sources.convert(p.source)
        except Unconvertible as e:
            failed[i] = str(e)
    order = sorted(range(len(parts)), key=lambda i: parts[i][1].guard_type != "SHAPE_ENV")
    for i in order:
        entry, p = parts[i]
        if not ctx.global_hooks and _GLOBAL_HOOK_READ.search(adapter.dynamo_source_name(p.source)):
            ctx.global_hooks = True
        try:
            if i in failed:
                raise Unconvertible(failed[i])
            fn = converter_for(p.guard_type)
            if fn is None:
                raise Unconvertible(f"no jitguard kind has the meaning of {p.guard_type}")
            if isinstance(converted[i], TypeDictSource) and p.guard_type not in _ON_NAMESPACE:
                # jitguard reads a class namespace as its mapping proxy; Dynamo's kinds on
                # the dict itself (other than membership) expect a dict.
                raise Unconvertible(f"{p.guard_type} on a class namespace")
            fn(ctx, p, converted[i])
            ctx.out.converted[p.guard_type] += 1
            if p.has_value:
                ctx.values.setdefault(converted[i], p.value)
            if p.has_value and _mutable_object(p.value):
                ctx.objects.setdefault(converted[i], id(p.value))
        except Unconvertible as e:
            name = adapter.dynamo_source_name(p.source)
            ctx.out.unconverted.append(Unconverted(entry, p.guard_type, name, str(e)))
    _finish(ctx)
    return ctx.out


_ON_NAMESPACE = frozenset({"DICT_CONTAINS", "DICT_NOT_CONTAINS"})
# a source reading one of torch's global module hook dicts ([Note: Global module hooks])
_GLOBAL_HOOK_READ = re.compile(r"\._global_(forward|backward)(_pre)?_hooks\b")


# [Note: Dict keys a length stands for]
# Dynamo (torch 2.13) bakes into the graph the keys of a dict it read through ``list(d)``
# or ``[*d]`` and guards only the dict's length (``list(d)``) or only its type (``[*d]``):
# ``{1.0: v}`` then ``{2.0: v}``, or ``{1: v}`` then ``{1: v, 2: w}``, served the first
# capture (``len(d)``, ``d.keys()`` and ``for k in d`` do get DICT_KEYS_MATCH). The guards
# do not say which read it was, so jitguard pins the keys of every dict whose type or
# length Dynamo guarded and whose keys it left unguarded: DICT_KEYS_MATCH, stricter than
# torch (a dict with other keys of which the function read only ``d['a']`` recompiles).
# Only where every key is a constant (others would be compared with their own ``__eq__``)
# and not on a module's own dicts (``_modules``, ``_parameters``, ``_buffers``, hook dicts),
# which Dynamo guards by their items.
_MODULE_DICT = re.compile(r"\.(_modules|_parameters|_buffers|_\w*hooks\w*)$")


def _pin_dict_keys(ctx: Context) -> None:
    keyed = {
        g.originating_source for g in ctx.out.guards
        if g.create_fn in (GuardBuilder.DICT_KEYS_MATCH, GuardBuilder.DICT_VERSION)
    }
    for source, (stack, constant_keys) in ctx.typed_dicts.items():
        if not constant_keys or source in keyed or _MODULE_DICT.search(source.name()):
            continue
        ctx.add(source, GuardBuilder.DICT_KEYS_MATCH, stack)
        ctx.out.stricter.append(
            f"DICT_KEYS_MATCH on {source.name()}: the keys, where torch guards only the "
            f"dict's type or length ([Note: Dict keys a length stands for])"
        )


# [Note: Mutable objects that alias]
# A capture is specialized to which of its mutable Python inputs are one object: with
# ``fn(a, b)`` doing ``a.append(1); return len(b)``, two lists and one list passed twice
# trace differently. Dynamo guards the second form (DUPLICATE_INPUT, ``L['b'] is L['a']``)
# but not the first (torch 2.13 has no non-aliasing guard on objects other than tensors),
# so a call with one list twice was served the two-list graph. jitguard adds, per capture,
# one NO_ALIASING over the distinct mutable objects its guards reach from the arguments
# (lists, dicts, sets, bytearrays, deques, instances of user classes; not tensors, which
# have their own, nor modules, functions, classes and constants), and DUPLICATE_INPUT
# between the sources that held one object when captured. Stricter than torch, listed.
_IMMUTABLE_ROOTS = (type, types.ModuleType, types.FunctionType, types.MethodType,
                    types.BuiltinFunctionType, torch.Tensor, torch.nn.Module)


def _mutable_object(value: Any) -> bool:
    if isinstance(value, (list, dict, set, bytearray, collections.deque)):
        return True
    tp = type(value)
    if tp.__module__ == "builtins" or isinstance(value, _IMMUTABLE_ROOTS):
        return False
    if isinstance(value, (int, float, complex, str, bytes, tuple, frozenset, enum.Enum)):
        return False
    return hasattr(value, "__dict__") or bool(getattr(tp, "__slots__", ()))


def _object_aliasing(ctx: Context) -> None:
    groups: dict[int, list[Source]] = {}
    for source, ident in ctx.objects.items():
        if source.name().startswith("L[") and not _MODULE_DICT.search(source.name()):
            groups.setdefault(ident, []).append(source)
    firsts = []
    for sources in groups.values():
        firsts.append(sources[0])
        for other in sources[1:]:
            ctx.add(sources[0], functools.partial(GuardBuilder.DUPLICATE_INPUT, source_b=other))
            ctx.out.stricter.append(
                f"DUPLICATE_INPUT on {sources[0].name()}: {other.name()} is the same object "
                f"([Note: Mutable objects that alias])"
            )
    if len(firsts) > 1:
        ctx.add(firsts[0], functools.partial(GuardBuilder.NO_ALIASING, others=tuple(firsts[1:])))
        ctx.out.stricter.append(
            f"NO_ALIASING on {firsts[0].name()}: the mutable objects are distinct "
            f"([Note: Mutable objects that alias])"
        )


# [Note: Attributes a class __getattr__ gives]
# Dynamo inlines a user class's ``__getattr__`` for an attribute the object lacks and
# guards only the object's type: neither that ``__getattr__`` (replaced on the class after
# compiling) nor the attribute's absence from the instance (``o.zz = 5`` after compiling
# shadows it) was checked, and the old value was served. For such an object jitguard adds
# CLASS_ATTRS_MATCH on ``__getattr__`` and DICT_KEYS_MATCH on its ``__dict__`` (read with
# ``object.__getattribute__``): an instance attribute added or removed is a miss, stricter
# than torch, listed. Modules and torch's own classes are left to their own guards.
def _getattr_objects(ctx: Context) -> None:
    for source, (stack, has_dict) in ctx.getattr_objects.items():
        fn = functools.partial(GuardBuilder.CLASS_ATTRS_MATCH, attrs=("__getattr__",))
        ctx.add(source, fn, stack)
        ctx.out.stricter.append(
            f"CLASS_ATTRS_MATCH on {source.name()}: its class's __getattr__ "
            f"([Note: Attributes a class __getattr__ gives])"
        )
        if not has_dict:
            continue  # slots: a slot is found before __getattr__ is asked
        ctx.add(GenericAttrSource(source, "__dict__"), GuardBuilder.DICT_KEYS_MATCH, stack)
        ctx.out.stricter.append(
            f"DICT_KEYS_MATCH on object.__getattribute__({source.name()}, '__dict__'): "
            f"([Note: Attributes a class __getattr__ gives])"
        )


# [Note: Class namespaces Dynamo read]
# Besides the lookups it guards with NOT_PRESENT_IN_GENERIC_DICT, Dynamo reads attributes
# it resolved through a class straight from the namespace that held them:
# ``dict(type(L['m']).__mro__[1].__dict__)['factor']`` for a property of a base, a custom
# descriptor, a classmethod or staticmethod. It guards what it read there (a property's
# ``fget``, a descriptor's fields), never that the lookup still ends there: a subclass
# given its own ``factor`` after compiling, or the namespace's object replaced by one its
# guards do not tell apart, was served the old result (torch.compile too). So each such
# read ``type(obj).__mro__[i].__dict__[name]`` (or ``type(obj).__dict__[name]``) gets
# CLASS_ATTRS_MATCH on ``obj`` for ``name``, as the lookups above do; and where the lookup
# from ``type(obj)`` finds the name before ``__mro__[i]`` (a ``super()`` call reads past
# the class that defines it), each class between the two that lacked it must still lack it
# (DICT_CONTAINS, inverted). Stricter than torch, listed in ``stricter``.
def _namespace_read(source: Source) -> Optional[tuple[Source, int, str]]:
    """``(obj, i, name)`` for a read ``type(obj).__mro__[i].__dict__[name]`` (``i`` 0 for
    ``type(obj).__dict__[name]``) or ``type(obj).__mro__[i].name`` (a ``super()`` call's),
    else None."""
    klass: Any
    if (isinstance(source, DictGetItemSource) and isinstance(source.base, TypeDictSource)
            and isinstance(source.index, str)):
        klass, name = source.base.base, source.index
    elif isinstance(source, AttrSource) and isinstance(source.base, GetItemSource):
        klass, name = source.base, source.member
    else:
        return None
    index = 0
    if (isinstance(klass, GetItemSource) and isinstance(klass.base, TypeMROSource)
            and type(klass.index) is int and not klass.index_is_slice):
        index, klass = klass.index, klass.base.base
    if isinstance(klass, TypeSource) and (index or not isinstance(source, AttrSource)):
        return klass.base, index, name
    return None


def _mro_namespace(obj: Source, i: int) -> Source:
    return TypeDictSource(GetItemSource(TypeMROSource(TypeSource(obj)), i))


def _class_namespace_reads(ctx: Context) -> None:
    reads: dict[Source, dict[str, int]] = {}
    for guard in list(ctx.out.guards):
        source: Any = guard.originating_source
        while source is not None:
            read = _namespace_read(source)
            if read is not None:
                reads.setdefault(read[0], {}).setdefault(read[2], read[1])
            source = getattr(source, "base", None)
    for obj, names in reads.items():
        checked = set(ctx.class_attrs.get(obj, ())) if obj in ctx.not_present else set()
        todo = tuple(n for n in names if n not in checked)
        if todo:
            ctx.add(obj, functools.partial(GuardBuilder.CLASS_ATTRS_MATCH, attrs=todo))
            ctx.out.stricter.append(
                f"CLASS_ATTRS_MATCH on {obj.name()}: where the class lookup of "
                f"{', '.join(map(repr, todo))} finds what ([Note: Class namespaces Dynamo read])"
            )
        if obj not in ctx.values:
            continue
        mro = type(ctx.values[obj]).__mro__
        for name in names:
            owner = next((j for j, k in enumerate(mro) if name in k.__dict__), len(mro))
            for j in range(owner + 1, min(names[name], len(mro))):
                if name not in mro[j].__dict__:
                    fn = functools.partial(GuardBuilder.DICT_CONTAINS, key=name, invert=True)
                    ctx.add(_mro_namespace(obj, j), fn)
                    ctx.out.stricter.append(
                        f"DICT_CONTAINS on {_mro_namespace(obj, j).name()}: {name!r} stays "
                        f"absent ([Note: Class namespaces Dynamo read])"
                    )


# [Note: Float facts a symbolic guard cannot see] (compiler/python_kinds.py): a float
# Dynamo kept symbolic (guarded by its type, and by shape guards, never by its value) also
# gets FLOAT_FACTS_MATCH: the sign of a zero and being finite, which the shape guards
# cannot state (``-0.0`` after ``0.0`` under ``dynamic=True`` was served the sign of the
# first, by torch.compile too). Stricter than torch, listed in ``stricter``. And a trace
# over a symbolic zero cannot see its sign either (``math.copysign(1.0, k)`` of a symbol
# whose value is ``-0.0`` traces as 1.0): such a float is listed in ``symbolic_zeros``,
# and ``jitguard.torch.compile`` captures that call again with floats specialized. So it
# does a capture whose graph reads a value back as a Python scalar (``adapter.ScalarBreak``,
# [Note: Graph breaks]): that value may be such a float, made a tensor, whose sign torch's
# frame path would lose; only if the capture with floats specialized breaks too does the
# function go to the frame path.
_VALUE_KINDS = frozenset({"EQUALS_MATCH", "CONSTANT_MATCH", "ID_MATCH", "FLOAT_FACTS_MATCH"})


def _kind_name(create_fn: Any) -> str:
    return getattr(getattr(create_fn, "func", create_fn), "__name__", "")


def _symbolic_floats(ctx: Context) -> None:
    typed, valued = set(), set()
    for g in ctx.out.guards:
        name = _kind_name(g.create_fn)
        if name == "TYPE_MATCH":
            typed.add(g.originating_source)
        elif name in _VALUE_KINDS:
            valued.add(g.originating_source)
    for source, value in ctx.values.items():
        if type(value) is float and source in typed and source not in valued:
            if value == 0.0:
                ctx.out.symbolic_zeros.append(source.name())
            ctx.add(source, GuardBuilder.FLOAT_FACTS_MATCH)
            ctx.out.stricter.append(
                f"FLOAT_FACTS_MATCH on {source.name()}: the sign of a zero and being finite "
                f"([Note: Float facts a symbolic guard cannot see])"
            )


def _finish(ctx: Context) -> None:
    tensor_guards(ctx)
    _pin_dict_keys(ctx)
    _object_aliasing(ctx)
    _getattr_objects(ctx)
    _symbolic_floats(ctx)
    # sources whose type a TYPE_MATCH pins: a class-level lookup checked on one of them
    # holds for all the others of that type
    typed = {g.originating_source for g in ctx.out.guards if g.create_fn is GuardBuilder.TYPE_MATCH}
    done: set[tuple[type, tuple[str, ...]]] = set()
    for source, (attrs, stack) in ctx.not_present.items():
        fn = functools.partial(GuardBuilder.NOT_PRESENT_IN_GENERIC_DICT, attrs=tuple(attrs))
        ctx.add(source, fn, stack)
        if source in ctx.class_attrs:
            # [Note: Attributes resolved through the class]
            attrs = ctx.class_attrs[source]
            if (
                "forward" in attrs and "__call__" not in attrs
                and issubclass(ctx.class_types[source], torch.nn.Module)
            ):
                # a module called: what its class's __call__ is decides what runs
                attrs = [*attrs, "__call__"]
            key = (ctx.class_types[source], tuple(attrs))
            if key in done and source in typed:
                continue  # the same lookups on the same pinned type: checked once
            done.add(key)
            fn = functools.partial(GuardBuilder.CLASS_ATTRS_MATCH, attrs=tuple(attrs))
            ctx.add(source, fn, stack)
            ctx.out.stricter.append(
                f"CLASS_ATTRS_MATCH on {source.name()}: jitguard's own guard on where the "
                f"class lookup of {', '.join(map(repr, attrs))} finds what (torch guards none)"
            )
    _class_namespace_reads(ctx)
    if ctx.builtins and ctx.f_globals is not None:
        # [Note: Builtins a global may shadow]
        ctx.f_globals.setdefault(GLOBALS_SELF, ctx.f_globals)
        ctx.out.shadowable_builtins = tuple(dict.fromkeys(ctx.builtins))
        for name in ctx.out.shadowable_builtins:
            fn = functools.partial(GuardBuilder.DICT_CONTAINS, key=name, invert=True)
            ctx.add(GlobalSource(GLOBALS_SELF), fn)
            ctx.out.stricter.append(
                f"DICT_CONTAINS on G[{GLOBALS_SELF!r}]: jitguard's own guard that no global "
                f"shadows the builtin {name!r} (torch guards the builtins dict only)"
            )
    if ctx.global_hooks:
        # [Note: Global module hooks]
        ctx.add(GlobalStateSource(), GuardBuilder.NN_MODULE_GLOBAL_HOOKS)
        ctx.out.stricter.append(
            "NN_MODULE_GLOBAL_HOOKS: jitguard's own guard that torch's global module hooks "
            "are as when captured (torch guards only their dicts' types)"
        )
    group = list(dict.fromkeys(ctx.aliasing))
    if len(group) > 1:
        fn = functools.partial(GuardBuilder.NO_ALIASING, others=tuple(group[1:]))
        ctx.add(group[0], fn)
