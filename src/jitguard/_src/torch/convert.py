"""Guard conversion: TorchDynamo's guards (``GuardFilterEntry``s from a capture's
``guard_filter_fn``) -> jitguard guards, with the same sources (same ``name()``), the same
meaning, and failure texts in Dynamo's forms.

May import: jitguard._src.compiler.*, jitguard._src.guards, jitguard._src.sources,
jitguard._src.more_sources, jitguard._src.torch.* (kinds, adapter_sources,
convert_sources, convert_shape), torch.

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
#     TENSORS_MATCH, torch's own C++ tensor checker (~0.2 us a tensor where TENSOR_MATCH in
#     Python with torch's dispatch-key comparison costs several); it also requires the
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
#     property of the class.
#   * [Note: Builtins a global may shadow] Dynamo reads a builtin the code names through
#     the builtins dict (``G['__builtins_dict___0']['abs']``, BUILTIN_MATCH) and guards
#     that dict's entry, not that the module has no global of that name: ``abs = g`` at
#     module level after compiling would be ignored. For each such name jitguard adds
#     DICT_CONTAINS (inverted) on the function's globals dict, which the conversion binds
#     to itself there as ``G['__jitguard_globals__']`` (a function must be given; a module
#     dict holding itself is harmless and stays). Stricter than torch, listed.
#   * DICT_KEYS_MATCH on an OrderedDict also compares the order it iterates in (its own
#     linked list; Dynamo traces in that order but its guard reads ``dict.keys``, which
#     ``move_to_end`` does not change): stricter than torch, listed in ``stricter``.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import types
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Optional

from ..compiler.builder import GuardBuilder
from ..compiler.kinds import get_guard_kind
from ..guards import Guard, ShapeGuard, Source
from ..more_sources import DictGetItemSource, TypeDictSource
from ..sources import (
    AttrSource,
    CodeSource,
    GlobalSource,
    GlobalStateSource,
    TensorPropertySource,
)
from . import adapter_sources as adapter
from .convert_shape import parse_shape_code
from .convert_sources import SourceConverter, Unconvertible

__all__ = [
    "Conversion",
    "Unconverted",
    "Unconvertible",
    "convert_guards",
    "kind_converters",
    "register_kind_converter",
]


class Unconverted(NamedTuple):
    """A Dynamo guard left to torch's guard tree: the entry, its kind, its source's name and
    why it was not converted."""

    entry: Any
    guard_type: str
    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.guard_type} on {self.name or '(global)'}: {self.reason}"


@dataclasses.dataclass
class Conversion:
    """What ``convert_guards`` returns; see the module docstring."""

    guards: list[Guard] = dataclasses.field(default_factory=list)
    shape_guards: list[ShapeGuard] = dataclasses.field(default_factory=list)
    symbol_sources: dict[str, Source] = dataclasses.field(default_factory=dict)
    unconverted: list[Unconverted] = dataclasses.field(default_factory=list)
    converted: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    stricter: list[str] = dataclasses.field(default_factory=list)
    # builtins the capture read from the builtins dict; their names must stay absent from
    # the function's globals ([Note: Builtins a global may shadow])
    shadowable_builtins: tuple[str, ...] = ()

    @property
    def delegated(self) -> collections.Counter[str]:
        return collections.Counter(u.guard_type for u in self.unconverted)

    @property
    def complete(self) -> bool:
        """True when every entry was converted (nothing to delegate)."""
        return not self.unconverted

    def add_to(self, request: Any) -> None:
        """Add the guards and shape guards to a ``CompileRequest``."""
        guards = request.tracing_context.guards_context.dynamo_guards
        for g in self.guards:
            guards.add(g, collect_debug_stack=False)
        if self.shape_guards:
            request.add_shape_guards(self.shape_guards, self.symbol_sources)


class _Context:
    """The state of one conversion, passed to every kind converter."""

    def __init__(self, sources: SourceConverter, dispatch_keys: str, batch_tensors: bool) -> None:
        self.sources = sources
        self.dispatch_keys = dispatch_keys
        self.batch_tensors = batch_tensors
        self.tensors: list[_Tensor] = []
        self.out = Conversion()
        self.shape_checked: set[str] = set()
        self.aliasing: list[Source] = []
        self.not_present: dict[Source, tuple[list[str], Any]] = {}
        self.class_attrs: dict[Source, list[str]] = {}
        self.class_types: dict[Source, type] = {}
        self.builtins: list[str] = []
        self.f_globals: Optional[dict[str, Any]] = None  # the function's, when given
        self.global_state = False

    def add(self, source: Source, create_fn: Callable[..., Any], user_stack: Any = None) -> None:
        guard = source.make_guard(create_fn)
        if user_stack is not None:
            guard.user_stack = user_stack
        self.out.guards.append(guard)


KindFn = Callable[[_Context, adapter.EntryParts, Source], None]
_kind_converters: dict[str, KindFn] = {}


def register_kind_converter(*guard_types: str) -> Callable[[KindFn], KindFn]:
    """Register ``fn(context, parts, source)`` for Dynamo guard kinds; it adds guards
    through ``context.add`` or raises ``Unconvertible``."""

    def deco(fn: KindFn) -> KindFn:
        for name in guard_types:
            _kind_converters[name] = fn
        return fn

    return deco


def kind_converters() -> dict[str, KindFn]:
    return dict(_kind_converters)


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
    ctx = _Context(
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
        try:
            if i in failed:
                raise Unconvertible(failed[i])
            fn = _kind_converters.get(p.guard_type)
            if fn is None:
                raise Unconvertible(f"no jitguard kind has the meaning of {p.guard_type}")
            if isinstance(converted[i], TypeDictSource) and p.guard_type not in _ON_NAMESPACE:
                # jitguard reads a class namespace as its mapping proxy; Dynamo's kinds on
                # the dict itself (other than membership) expect a dict.
                raise Unconvertible(f"{p.guard_type} on a class namespace")
            fn(ctx, p, converted[i])
            ctx.out.converted[p.guard_type] += 1
        except Unconvertible as e:
            name = adapter.dynamo_source_name(p.source)
            ctx.out.unconverted.append(Unconverted(entry, p.guard_type, name, str(e)))
    _finish(ctx)
    return ctx.out


_ON_NAMESPACE = frozenset({"DICT_CONTAINS", "DICT_NOT_CONTAINS"})


def _finish(ctx: _Context) -> None:
    _tensor_guards(ctx)
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
    group = list(dict.fromkeys(ctx.aliasing))
    if len(group) > 1:
        fn = functools.partial(GuardBuilder.NO_ALIASING, others=tuple(group[1:]))
        ctx.add(group[0], fn)


# ---- the kinds -----------------------------------------------------------------------------


def _simple(jg_kind: str) -> KindFn:
    def convert(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
        ctx.add(src, getattr(GuardBuilder, jg_kind), p.user_stack)

    return convert


for _dyn, _jg in {
    "TYPE_MATCH": "TYPE_MATCH",
    "NN_MODULE": "ID_MATCH",
    "FUNCTION_MATCH": "ID_MATCH",
    "CLASS_MATCH": "CLASS_MATCH",
    "MODULE_MATCH": "MODULE_MATCH",
    "BOOL_MATCH": "BOOL_MATCH",
    "NONE_MATCH": "NONE_MATCH",
    "NOT_NONE_MATCH": "NOT_NONE",
    "WEAKREF_ALIVE": "NOT_NONE",
    "DICT_VERSION": "DICT_VERSION",
    "DISPATCH_KEY_SET_MATCH": "DISPATCH_KEY_SET_MATCH",
    "DUAL_LEVEL": "DUAL_LEVEL",
    "FUNCTORCH_STACK_MATCH": "FUNCTORCH_STACK_MATCH",
    "AUTOGRAD_SAVED_TENSORS_HOOKS": "AUTOGRAD_SAVED_TENSORS_HOOKS",
    "DEFAULT_DEVICE": "DEFAULT_DEVICE",
}.items():
    register_kind_converter(_dyn)(_simple(_jg))
del _dyn, _jg


@register_kind_converter("ID_MATCH")
def _id_match(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    if adapter.source_class_name(p.source) == "TypeSource":
        # Dynamo turns ID_MATCH on type(x) into TYPE_MATCH on x.
        ctx.add(src.base, GuardBuilder.TYPE_MATCH, p.user_stack)  # type: ignore[attr-defined]
        return
    ctx.add(src, GuardBuilder.ID_MATCH, p.user_stack)


@register_kind_converter("CLOSURE_MATCH")
def _closure_match(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    if type(p.value) is types.FunctionType:
        # Dynamo: CONSTANT_MATCH on the function's __code__, i.e. the same code object.
        ctx.add(CodeSource(src), GuardBuilder.ID_MATCH, p.user_stack)
    else:
        ctx.add(src, GuardBuilder.ID_MATCH, p.user_stack)


@register_kind_converter("EQUALS_MATCH", "CONSTANT_MATCH")
def _equals(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    value = p.value
    if not p.has_value:
        raise Unconvertible("the entry carries no value")
    if "BOOL_MATCH" in p.derived:
        ctx.add(src, GuardBuilder.BOOL_MATCH, p.user_stack)
    elif "NONE_MATCH" in p.derived:
        ctx.add(src, GuardBuilder.NONE_MATCH, p.user_stack)
    elif "ID_MATCH" in p.derived or isinstance(value, (types.CodeType, type)):
        # A code object (CONSTANT_MATCH) by identity; a class compared with == is compared
        # by identity unless its metaclass overrides __eq__ (ID_MATCH is then stricter).
        ctx.add(src, GuardBuilder.ID_MATCH, p.user_stack)
    else:
        from ..compiler.builtin_kinds import EQUALS_MATCH
        from ..errors import GuardKindError

        if type(value) in (list, set):
            try:
                kind = GuardBuilder.CONTAINER_EQUALS_MATCH
                get_guard_kind(kind)[0].expect(value, Guard(src, kind))
            except GuardKindError:
                raise Unconvertible(
                    f"EQUALS_MATCH on a {type(value).__name__} of non-constants"
                ) from None
            ctx.add(src, kind, p.user_stack)
            return
        try:
            EQUALS_MATCH.expect(value, Guard(src, GuardBuilder.EQUALS_MATCH))
        except GuardKindError:
            raise Unconvertible(
                f"EQUALS_MATCH on a {type(value).__name__}: no jitguard kind compares it with "
                f"the same meaning"
            ) from None
        ctx.add(src, GuardBuilder.EQUALS_MATCH, p.user_stack)


@register_kind_converter("HASATTR")
def _hasattr(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    attr = p.options.get("attr")
    if not isinstance(attr, str) or not p.has_value:
        raise Unconvertible("HASATTR without an attribute name or a value")
    base = src
    if adapter.source_class_name(p.source) in ("NNModuleSource", "UnspecializedNNModuleSource",
                                                "UnspecializedBuiltinNNModuleSource"):
        base = src.base  # type: ignore[attr-defined]
    try:
        target = AttrSource(base, attr)
    except Exception as e:
        raise Unconvertible(f"HASATTR {attr!r}: {e}") from None
    kind = GuardBuilder.HASATTR if hasattr(p.value, attr) else GuardBuilder.NOT_HASATTR
    ctx.add(target, kind, p.user_stack)


@register_kind_converter("NOT_PRESENT_IN_GENERIC_DICT")
def _not_present(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    attr = p.options.get("attr")
    if not isinstance(attr, str):
        raise Unconvertible("NOT_PRESENT_IN_GENERIC_DICT without an attribute name")
    attrs, _ = ctx.not_present.setdefault(src, ([], p.user_stack))
    attrs.append(attr)
    if p.has_value:
        ctx.class_attrs.setdefault(src, []).append(attr)
        ctx.class_types[src] = type(p.value)


#: The global under which jitguard.torch.compile binds a function's globals dict to itself,
#: so that a check can ask what is absent from it ([Note: Builtins a global may shadow]).
GLOBALS_SELF = "__jitguard_globals__"


@register_kind_converter("BUILTIN_MATCH")
def _builtin(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    ctx.add(src, GuardBuilder.BUILTIN_MATCH, p.user_stack)
    base = getattr(src, "base", None)
    if (
        isinstance(src, DictGetItemSource) and isinstance(src.index, str)
        and isinstance(base, GlobalSource) and base.global_name.startswith("__builtins_dict___")
    ):
        ctx.builtins.append(src.index)


@register_kind_converter("EMPTY_NN_MODULE_HOOKS_DICT")
def _empty_hooks(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    ctx.add(src, GuardBuilder.EMPTY_NN_MODULE_HOOKS_DICT, p.user_stack)
    if adapter.config_flag("skip_nnmodule_hook_guards"):
        name = src.name()
        ctx.out.stricter.append(
            f"EMPTY_NN_MODULE_HOOKS_DICT on {name}: checked, though torch skips it "
            f"(torch._dynamo.config.skip_nnmodule_hook_guards)"
        )


@register_kind_converter("SEQUENCE_LENGTH")
def _sequence_length(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    if isinstance(p.value, dict):
        ctx.add(src, GuardBuilder.LENGTH_CHECK, p.user_stack)
    else:
        ctx.add(src, GuardBuilder.SEQUENCE_LENGTH, p.user_stack)


@register_kind_converter("DICT_KEYS_MATCH")
def _dict_keys(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    if "DICT_VERSION" in p.derived:
        ctx.add(src, GuardBuilder.DICT_VERSION, p.user_stack)
    else:
        ctx.add(src, GuardBuilder.DICT_KEYS_MATCH, p.user_stack)
        if isinstance(p.value, collections.OrderedDict):
            ctx.out.stricter.append(
                f"DICT_KEYS_MATCH on {src.name()}: the OrderedDict's iteration order is "
                f"compared too (torch compares dict.keys's order, which move_to_end leaves)"
            )


def _contains(invert: bool, kind: str) -> KindFn:
    def convert(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
        if "key" not in p.options:
            raise Unconvertible(f"{p.guard_type} without a key")
        if kind == "DICT_CONTAINS" and type(p.value).__contains__ is not dict.__contains__:
            raise Unconvertible(
                f"{p.guard_type} on a {type(p.value).__name__} with its own __contains__"
            )
        fn = functools.partial(getattr(GuardBuilder, kind), key=p.options["key"], invert=invert)
        ctx.add(src, fn, p.user_stack)

    return convert


register_kind_converter("DICT_CONTAINS")(_contains(False, "DICT_CONTAINS"))
register_kind_converter("DICT_NOT_CONTAINS")(_contains(True, "DICT_CONTAINS"))
register_kind_converter("SET_CONTAINS")(_contains(False, "SET_CONTAINS"))
register_kind_converter("SET_NOT_CONTAINS")(_contains(True, "SET_CONTAINS"))


@register_kind_converter("CONSTANT_SUBCLASS_MATCH")
def _constant_subclass(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    base = next((t for t in adapter.constant_base_types() if isinstance(p.value, t)), None)
    if base is None or base not in (int, float, str):
        raise Unconvertible(f"CONSTANT_SUBCLASS_MATCH on a {type(p.value).__name__}")
    fn = functools.partial(GuardBuilder.CONSTANT_SUBCLASS_MATCH, base_type=base)
    ctx.add(src, fn, p.user_stack)


@register_kind_converter("MAPPING_KEYS_CHECK")
def _mapping_keys(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    try:
        keys = list(p.value.keys())
    except Exception:
        raise Unconvertible("MAPPING_KEYS_CHECK on a value without keys()") from None
    if not all(type(k) is str for k in keys):
        raise Unconvertible("MAPPING_KEYS_CHECK with keys that are not all str")
    ctx.add(src, GuardBuilder.MAPPING_KEYS_CHECK, p.user_stack)


@register_kind_converter("DUPLICATE_INPUT")
def _duplicate(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    other = p.options.get("source_b")
    if other is None:
        raise Unconvertible("DUPLICATE_INPUT without source_b")
    fn = functools.partial(GuardBuilder.DUPLICATE_INPUT, source_b=ctx.sources.convert(other))
    ctx.add(src, fn, p.user_stack)


@register_kind_converter(
    "GLOBAL_STATE", "TORCH_FUNCTION_STATE", "GRAD_MODE", "DETERMINISTIC_ALGORITHMS",
    "FSDP_TRAINING_STATE",
)
def _global_state(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    if not ctx.global_state:
        ctx.global_state = True
        ctx.add(GlobalStateSource(), GuardBuilder.GLOBAL_STATE)


@register_kind_converter("SHAPE_ENV")
def _shape_env(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    if not p.code_list:
        return
    parsed = parse_shape_code(p.code_list, ctx.sources.by_name, p.user_stack)
    ctx.out.shape_guards.extend(parsed.guards)
    ctx.out.symbol_sources.update(parsed.symbol_sources)
    ctx.shape_checked |= parsed.shape_checked


@register_kind_converter("TENSOR_MATCH")
def _tensor_match(ctx: _Context, p: adapter.EntryParts, src: Source) -> None:
    if "ID_MATCH" in p.derived:
        ctx.add(src, GuardBuilder.ID_MATCH, p.user_stack)
        return
    value = adapter.unwrap_tensor_weakref(p.options.get("value"))
    if value is None:
        value = p.value
    import torch

    if not isinstance(value, torch.Tensor):
        raise Unconvertible(f"TENSOR_MATCH on a {type(value).__name__}")
    sizes, strides = _static_dims(ctx, src, value)
    ctx.tensors.append(_Tensor(src, sizes, strides, p.user_stack))
    ctx.add(src, GuardBuilder.DIMENSION_DYNAMIC_MARKING, p.user_stack)
    param = isinstance(value, torch.nn.Parameter) and adapter.config_flag(
        "skip_no_tensor_aliasing_guards_on_parameters"
    )
    if not param and not _from_builtin_module(p.source):
        ctx.aliasing.append(src)


class _Tensor(NamedTuple):
    source: Source
    sizes: tuple[Optional[int], ...]
    strides: Optional[tuple[Optional[int], ...]]  # None: not strided
    user_stack: Any


def _tensor_guards(ctx: _Context) -> None:
    """TENSOR_MATCH guards for the tensors: with ``batch_tensors``, every strided tensor in
    one TENSORS_MATCH (one call of torch's C++ checker, which has TENSOR_MATCH's meaning
    with torch's dispatch key comparison and also insists the tensors are distinct
    objects), else one TENSOR_MATCH each."""
    batch = [t for t in ctx.tensors if t.strides is not None] if ctx.batch_tensors else []
    if len(batch) > 0 and len({t.source for t in batch}) == len(batch):
        first, *rest = batch
        fn = functools.partial(
            GuardBuilder.TENSORS_MATCH,
            others=tuple(t.source for t in rest),
            sizes=tuple(t.sizes for t in batch),
            strides=tuple(t.strides for t in batch),
        )
        ctx.add(first.source, fn, first.user_stack)
        single = [t for t in ctx.tensors if t.strides is None]
    else:
        single = ctx.tensors
    for t in single:
        fn = functools.partial(
            GuardBuilder.TENSOR_MATCH, sizes=t.sizes, strides=t.strides,
            dispatch_keys=ctx.dispatch_keys,
        )
        ctx.add(t.source, fn, t.user_stack)


def _static_dims(ctx: _Context, src: Source, value: Any) -> tuple[Any, Any]:
    from ..sources import TensorProperty

    def checked(prop: TensorProperty, i: int) -> bool:
        return TensorPropertySource(src, prop, i).name() in ctx.shape_checked

    sizes = tuple(
        None if checked(TensorProperty.SIZE, i) else int(s) for i, s in enumerate(value.shape)
    )
    if value.layout is not _strided():
        return sizes, None
    strides = tuple(
        None if checked(TensorProperty.STRIDE, i) else int(s)
        for i, s in enumerate(value.stride())
    )
    return sizes, strides


def _strided() -> Any:
    import torch

    return torch.strided


def _from_builtin_module(dsrc: Any) -> bool:
    """Whether a Dynamo source lies under an UnspecializedBuiltinNNModuleSource (Dynamo
    leaves such tensors out of its no-aliasing group)."""
    while dsrc is not None:
        if adapter.source_class_name(dsrc) == "UnspecializedBuiltinNNModuleSource":
            return True
        dsrc = adapter.dynamo_source_fields(dsrc).get("base") if _chained(dsrc) else None
    return False


def _chained(dsrc: Any) -> bool:
    return "base" in adapter.dynamo_source_fields(dsrc)
