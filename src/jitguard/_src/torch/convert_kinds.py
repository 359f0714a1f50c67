"""Guard conversion of Dynamo's guard kinds on objects, values, attributes, dicts,
builtins, inputs and global state: one converter per kind, registered by Dynamo's kind name
([Note: Converting guard kinds], in ``convert``).

May import: jitguard._src.compiler.*, jitguard._src.errors, jitguard._src.guards,
jitguard._src.sources, jitguard._src.more_sources, jitguard._src.torch.* (adapter_sources, convert_context,
convert_sources).
"""

from __future__ import annotations

import collections
import functools
import types

from ..compiler.builder import GuardBuilder
from ..compiler.constants import is_constant, needs_strict
from ..compiler.kinds import get_guard_kind
from ..guards import Guard, Source
from ..more_sources import DictGetItemSource, TypeDictSource
from ..sources import AttrSource, CodeSource, GlobalSource, GlobalStateSource
from . import adapter_sources as adapter
from .convert_context import Context, KindFn, register_kind_converter
from .convert_sources import Unconvertible

__all__: list[str] = []  # registers its converters on import


def _simple(jg_kind: str) -> KindFn:
    def convert(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
        ctx.add(src, getattr(GuardBuilder, jg_kind), p.user_stack)

    return convert


for _dyn, _jg in {
    "NN_MODULE": "ID_MATCH",
    "FUNCTION_MATCH": "ID_MATCH",
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


@register_kind_converter("TYPE_MATCH")
def _type_match(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    ctx.add(src, GuardBuilder.TYPE_MATCH, p.user_stack)
    if p.has_value and isinstance(p.value, dict):
        _typed_dict(ctx, p, src)
    elif p.has_value and _own_getattr(type(p.value)):
        has_dict = isinstance(getattr(p.value, "__dict__", None), dict)
        ctx.getattr_objects.setdefault(src, (p.user_stack, has_dict))


def _own_getattr(tp: type) -> bool:
    """Whether attribute reads on a ``tp`` may end in a Python ``__getattr__`` of a user
    class ([Note: Attributes a class __getattr__ gives])."""
    for klass in tp.__mro__:
        fn = klass.__dict__.get("__getattr__")
        if fn is not None:
            module = getattr(klass, "__module__", "") or ""
            return isinstance(fn, types.FunctionType) and not module.startswith("torch")
    return False


def _typed_dict(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    """Record a dict whose keys ``convert._finish`` may pin
    ([Note: Dict keys a length stands for])."""
    constant = all(is_constant(k) for k in dict.keys(p.value))
    ctx.typed_dicts.setdefault(src, (p.user_stack, constant))


@register_kind_converter("CLASS_MATCH")
def _class_match(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    ctx.add(src, GuardBuilder.CLASS_MATCH, p.user_stack)
    if not (p.has_value and isinstance(p.value, type)):
        return
    names = _metaclass_names(type(p.value))
    if not names:
        return
    # [Note: Attributes a metaclass gives]
    # ``C.k`` with ``k`` defined on C's metaclass: Dynamo bakes the value in and guards only
    # CLASS_MATCH on C, so ``Meta.k = 6`` after compiling was stale (torch.compile too).
    # For a class whose metaclass is a user class, jitguard checks where the lookup through
    # the metaclass finds each non-dunder name it defines (CLASS_ATTRS_MATCH on C, whose type
    # is the metaclass), and that C's own namespace does not gain or lose one
    # (DICT_CONTAINS). A base of C gaining the name stays unchecked. Stricter than torch, listed.
    fn = functools.partial(GuardBuilder.CLASS_ATTRS_MATCH, attrs=names)
    ctx.add(src, fn, p.user_stack)
    ctx.out.stricter.append(
        f"CLASS_ATTRS_MATCH on {src.name()}: its metaclass's attributes "
        f"([Note: Attributes a metaclass gives])"
    )
    own = p.value.__dict__
    for name in names:
        # the name stays absent from (or present in) C's own namespace
        fn = functools.partial(GuardBuilder.DICT_CONTAINS, key=name, invert=name not in own)
        ctx.add(TypeDictSource(src), fn, p.user_stack)
    ctx.out.stricter.append(
        f"DICT_CONTAINS on dict({src.name()}.__dict__): whether an own attribute shadows its "
        f"metaclass's ([Note: Attributes a metaclass gives])"
    )


_STD_METACLASS_MODULES = ("builtins", "abc", "enum", "typing", "typing_extensions", "torch")


def _metaclass_names(meta: type) -> tuple[str, ...]:
    """The non-dunder names a user metaclass (and its user bases) define, at most 32."""
    names: dict[str, None] = {}
    for klass in meta.__mro__:
        module = (getattr(klass, "__module__", "") or "").split(".")[0]
        if module in _STD_METACLASS_MODULES:
            continue
        for name in klass.__dict__:
            if not name.startswith("__"):
                names[name] = None
    return tuple(names)[:32]


@register_kind_converter("ID_MATCH")
def _id_match(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    if adapter.source_class_name(p.source) == "TypeSource":
        # Dynamo turns ID_MATCH on type(x) into TYPE_MATCH on x.
        ctx.add(src.base, GuardBuilder.TYPE_MATCH, p.user_stack)  # type: ignore[attr-defined]
        return
    ctx.add(src, GuardBuilder.ID_MATCH, p.user_stack)


@register_kind_converter("CLOSURE_MATCH")
def _closure_match(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    if type(p.value) is types.FunctionType:
        # Dynamo: CONSTANT_MATCH on the function's __code__, i.e. the same code object.
        ctx.add(CodeSource(src), GuardBuilder.ID_MATCH, p.user_stack)
    else:
        ctx.add(src, GuardBuilder.ID_MATCH, p.user_stack)


@register_kind_converter("EQUALS_MATCH", "CONSTANT_MATCH")
def _equals(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
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
            if any(needs_strict(v) for v in value):
                _strict_note(ctx, src, "CONTAINER_EQUALS_MATCH")
            return
        try:
            EQUALS_MATCH.expect(value, Guard(src, GuardBuilder.EQUALS_MATCH))
        except GuardKindError:
            raise Unconvertible(
                f"EQUALS_MATCH on a {type(value).__name__}: no jitguard kind compares it with "
                f"the same meaning"
            ) from None
        ctx.add(src, GuardBuilder.EQUALS_MATCH, p.user_stack)
        if needs_strict(value):
            _strict_note(ctx, src, "EQUALS_MATCH")


def _strict_note(ctx: Context, src: Source, kind: str) -> None:
    ctx.out.stricter.append(
        f"{kind} on {src.name()}: compared strictly (a float zero's sign, NaN), where "
        f"torch's == takes -0.0 for 0.0 and the capture baked in the sign"
    )


@register_kind_converter("HASATTR")
def _hasattr(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
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
def _not_present(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
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


@register_kind_converter("BUILTIN_MATCH")
def _builtin(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    ctx.add(src, GuardBuilder.BUILTIN_MATCH, p.user_stack)
    base = getattr(src, "base", None)
    if (
        isinstance(src, DictGetItemSource) and isinstance(src.index, str)
        and isinstance(base, GlobalSource) and base.global_name.startswith("__builtins_dict___")
    ):
        ctx.builtins.append(src.index)


@register_kind_converter("EMPTY_NN_MODULE_HOOKS_DICT")
def _empty_hooks(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    ctx.add(src, GuardBuilder.EMPTY_NN_MODULE_HOOKS_DICT, p.user_stack)
    if adapter.config_flag("skip_nnmodule_hook_guards"):
        name = src.name()
        ctx.out.stricter.append(
            f"EMPTY_NN_MODULE_HOOKS_DICT on {name}: checked, though torch skips it "
            f"(torch._dynamo.config.skip_nnmodule_hook_guards)"
        )


@register_kind_converter("SEQUENCE_LENGTH")
def _sequence_length(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    if isinstance(p.value, dict):
        # a dict's keys are pinned in ``convert._finish`` where they can be
        # ([Note: Dict keys a length stands for]); the length stays in any case
        ctx.add(src, GuardBuilder.LENGTH_CHECK, p.user_stack)
        _typed_dict(ctx, p, src)
    else:
        ctx.add(src, GuardBuilder.SEQUENCE_LENGTH, p.user_stack)


@register_kind_converter("DICT_KEYS_MATCH")
def _dict_keys(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
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
    def convert(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
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
def _constant_subclass(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    base = next((t for t in adapter.constant_base_types() if isinstance(p.value, t)), None)
    if base is None or base not in (int, float, str):
        raise Unconvertible(f"CONSTANT_SUBCLASS_MATCH on a {type(p.value).__name__}")
    fn = functools.partial(GuardBuilder.CONSTANT_SUBCLASS_MATCH, base_type=base)
    ctx.add(src, fn, p.user_stack)


@register_kind_converter("MAPPING_KEYS_CHECK")
def _mapping_keys(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    try:
        keys = list(p.value.keys())
    except Exception:
        raise Unconvertible("MAPPING_KEYS_CHECK on a value without keys()") from None
    if not all(type(k) is str for k in keys):
        raise Unconvertible("MAPPING_KEYS_CHECK with keys that are not all str")
    ctx.add(src, GuardBuilder.MAPPING_KEYS_CHECK, p.user_stack)


@register_kind_converter("DUPLICATE_INPUT")
def _duplicate(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    other = p.options.get("source_b")
    if other is None:
        raise Unconvertible("DUPLICATE_INPUT without source_b")
    fn = functools.partial(GuardBuilder.DUPLICATE_INPUT, source_b=ctx.sources.convert(other))
    ctx.add(src, fn, p.user_stack)


@register_kind_converter(
    "GLOBAL_STATE", "TORCH_FUNCTION_STATE", "GRAD_MODE", "DETERMINISTIC_ALGORITHMS",
    "FSDP_TRAINING_STATE",
)
def _global_state(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    if not ctx.global_state:
        ctx.global_state = True
        ctx.add(GlobalStateSource(), GuardBuilder.GLOBAL_STATE)
