"""The nn.Module guard kinds: NN_MODULE_STATE (how calling one module behaves: training,
registry keys, hooks, forward override, compiled call) and NN_MODULE_GLOBAL_HOOKS (torch's
global module hooks). See [Note: Guarding an nn.Module] in ``module``.

May import: jitguard._src.errors, jitguard._src.compiler.kinds, jitguard._src.compiler.values,
torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Optional

import torch
import torch.nn.modules.module as _torch_module

from ..compiler.kinds import EmitContext, GuardKind
from ..compiler.values import Ident, describe_ident, type_name
from ..errors import GuardKindError

__all__ = ["HOOK_DICTS", "MODULE_DICTS", "ModuleGlobalHooks", "ModuleState", "ModuleStateSpec"]

# The instance hook dicts whose emptiness ``Module._call_impl`` tests before calling forward.
HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
# Side tables that say how a registered hook is called (keyed by the hook's handle id).
_HOOK_SIDE_TABLES = {
    "_forward_hooks": ("_forward_hooks_with_kwargs", "_forward_hooks_always_called"),
    "_forward_pre_hooks": ("_forward_pre_hooks_with_kwargs",),
    "_backward_hooks": (),
    "_backward_pre_hooks": (),
}
_GLOBAL_HOOK_DICTS = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)
_GLOBAL_SIDE_TABLES = {
    "_global_forward_hooks": ("_global_forward_hooks_always_called", "_global_forward_hooks_with_kwargs"),
    "_global_forward_pre_hooks": (),
    "_global_backward_hooks": (),
    "_global_backward_pre_hooks": (),
}


# ---- NN_MODULE_STATE -------------------------------------------------------------------


class _Hooks(NamedTuple):
    """One hook dict as it was: its keys in order with the hook objects, and the keys of its
    side tables (None for an empty dict: then only its emptiness is checked)."""

    attr: str
    keys: tuple[Any, ...]
    hooks: tuple[Ident, ...]
    side: tuple[tuple[str, tuple[Any, ...]], ...]


class ModuleStateSpec(NamedTuple):
    training: bool
    keys: tuple[tuple[str, tuple[str, ...]], ...]  # ("_parameters", names), ... in order
    hook_attrs: tuple[str, ...]  # the hook dicts checked (none with hooks=False)
    hooks: tuple[_Hooks, ...]  # the non-empty ones among them
    forward: Optional[Ident]  # an instance-level forward, or None
    compiled: Optional[Ident]  # a compile()d call (as stored, unbound), or None
    via_dict: bool  # read the instance attributes from ``__dict__`` (see ModuleState)
    compiled_on_class: bool = False  # ``compiled`` is the class's, no instance attribute


# The registries whose keys (in order) say what a module holds.
MODULE_DICTS = ("_parameters", "_buffers", "_modules")


Reader = Callable[[Any, str], Any]
Expr = Callable[[str], str]


def _from_dict(obj: Any, name: str) -> Any:
    return obj.__dict__[name]


def _hooks_of(obj: Any, attrs: tuple[str, ...], side: dict[str, tuple[str, ...]]) -> tuple[_Hooks, ...]:
    out = []
    for attr in attrs:
        d = getattr(obj, attr)
        if d:
            out.append(
                _Hooks(
                    attr,
                    tuple(d),
                    tuple(Ident(h) for h in d.values()),
                    tuple((s, tuple(getattr(obj, s, {}))) for s in side[attr]),
                )
            )
    return tuple(out)


def _emit_hooks(read: Expr, attrs: tuple[str, ...], hooks: tuple[_Hooks, ...], ctx: EmitContext) -> list[str]:
    """Tests of the hook dicts; ``read(name)`` is the expression reading one attribute."""
    nonempty = {h.attr: h for h in hooks}
    empty = [a for a in attrs if a not in nonempty]
    parts = []
    if empty:
        parts.append("not (" + " or ".join(read(a) for a in empty) + ")")
    for h in hooks:
        parts.append(f"list({read(h.attr)}) == {ctx.const(list(h.keys), 'hook_keys')}")
        for key, ident in zip(h.keys, h.hooks, strict=False):
            parts.append(ctx.identical(f"{read(h.attr)}[{ctx.const(key, 'hook_id')}]", ident, "hook"))
        for side_attr, side_keys in h.side:
            parts.append(f"list({read(side_attr)}) == {ctx.const(list(side_keys), 'hook_keys')}")
    return parts


def _hooks_hold(
    obj: Any, attrs: tuple[str, ...], hooks: tuple[_Hooks, ...], get: Reader = getattr
) -> Optional[str]:
    """None if the hook dicts are as recorded, else which one differs and how."""
    nonempty = {h.attr: h for h in hooks}
    for attr in attrs:
        d = get(obj, attr)
        h = nonempty.get(attr)
        if h is None:
            if d:
                return f"{attr} has {len(d)} hook(s), expected none"
            continue
        if tuple(d) != h.keys:
            return f"{attr} keys changed: expected {list(h.keys)}, got {list(d)}"
        for key, ident in zip(h.keys, h.hooks, strict=False):
            if not ident.alive or d[key] is not ident.get():
                return f"{attr}[{key}] is a different hook"
        for side_attr, side_keys in h.side:
            if tuple(get(obj, side_attr)) != side_keys:
                return f"{side_attr} changed"
    return None


_FORWARD = "forward"
_COMPILED = "_compiled_call_impl"


def _compiled_call(value: Any) -> tuple[Any, bool]:
    """The module's ``_compiled_call_impl`` as stored (not bound), and whether it is the
    class's (no instance attribute of that name)."""
    d = value.__dict__
    if _COMPILED in d:
        return d[_COMPILED], False
    return getattr(type(value), _COMPILED, None), True
_INSTANCE_ATTRS = ("training", *MODULE_DICTS, *HOOK_DICTS, *(s for t in _HOOK_SIDE_TABLES.values() for s in t))


def _plain_instance_attrs(value: Any, names: tuple[str, ...]) -> bool:
    """True if every name is an instance attribute no class-level data descriptor shadows,
    so reading ``value.__dict__[name]`` is reading ``value.name``."""
    d = value.__dict__
    for name in names:
        if name not in d:
            return False
        for klass in type(value).__mro__:
            attr = klass.__dict__.get(name)
            if attr is not None:
                if hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__"):
                    return False
                break
    return True


class ModuleState(GuardKind):
    """How calling a module behaves: ``training``, the keys of its parameter, buffer and
    submodule registries (in order), its instance hook dicts (empty ones stay empty,
    non-empty ones keep their hooks; unchecked with ``hooks=False``), no (or the same)
    instance-level ``forward``, the same ``_compiled_call_impl``."""

    name = "NN_MODULE_STATE"
    cost = 4

    def expect(self, value: Any, guard: Any, **options: Any) -> ModuleStateSpec:
        if set(options) - {"hooks"}:
            raise GuardKindError(
                f"NN_MODULE_STATE on {guard.name} takes hooks= (default True), got {sorted(options)}"
            )
        if not isinstance(value, torch.nn.Module):
            raise GuardKindError(
                f"NN_MODULE_STATE on {guard.name}: expected an nn.Module, found "
                f"{type_name(type(value))}"
            )
        attrs = HOOK_DICTS if options.get("hooks", True) else ()
        forward = value.__dict__.get(_FORWARD)
        compiled, on_class = _compiled_call(value)
        needed = ("training", *MODULE_DICTS, *attrs, *(s for a in attrs for s in _HOOK_SIDE_TABLES[a]))
        return ModuleStateSpec(
            training=bool(value.training),
            keys=tuple((attr, tuple(getattr(value, attr))) for attr in MODULE_DICTS),
            hook_attrs=attrs,
            hooks=_hooks_of(value, attrs, _HOOK_SIDE_TABLES),
            forward=None if forward is None else Ident(forward),
            compiled=None if compiled is None else Ident(compiled),
            via_dict=_plain_instance_attrs(value, needed),
            compiled_on_class=on_class,
        )

    def holds(self, value: Any, params: ModuleStateSpec) -> bool:
        return self._failure(value, params) is None

    def _failure(self, value: Any, params: ModuleStateSpec) -> Optional[str]:
        get: Reader = _from_dict if params.via_dict else getattr
        training = get(value, "training")
        if training is not params.training:
            return f"training is {training!r}, expected {params.training!r}"
        for attr, keys in params.keys:
            now = tuple(get(value, attr))
            if now != keys:
                return f"{attr} keys changed: expected {list(keys)}, got {list(now)}"
        bad = _hooks_hold(value, params.hook_attrs, params.hooks, get)
        if bad is not None:
            return bad
        forward = value.__dict__.get(_FORWARD)
        if params.forward is None:
            if forward is not None:
                return "an instance-level forward was set"
        elif not params.forward.alive or forward is not params.forward.get():
            return "the instance-level forward changed"
        compiled, on_class = _compiled_call(value)
        if params.compiled is None:
            if compiled is not None:
                return "the module was compile()d"
        elif (
            not params.compiled.alive
            or compiled is not params.compiled.get()
            or on_class is not params.compiled_on_class
        ):
            return "the compiled call changed"
        return None

    def emit(self, var: str, params: ModuleStateSpec, ctx: EmitContext) -> str:
        # Attribute reads on a module go through Module.__getattr__'s slow lookup hook
        # (~35 ns each); the instance dict, read once, answers a subscript in ~15 ns.
        instance = f"{var}.__dict__"
        if var.isidentifier():
            bound = f"_d_{var}"
            first = f"({bound} := {instance})"
            instance = bound
        else:
            first = instance

        def read(name: str) -> str:
            if not params.via_dict:
                return f"{var}.{name}"
            return f"{instance}[{ctx.const(name, 'attr')}]"

        training = f"{first}[{ctx.const('training', 'attr')}]" if params.via_dict else f"{var}.training"
        parts = [f"{training} is {'True' if params.training else 'False'}"]
        for attr, keys in params.keys:
            if keys:
                # ``[*d]`` builds the key list without looking up and calling ``list``.
                parts.append(f"[*{read(attr)}] == {ctx.const(list(keys), 'keys')}")
            else:
                parts.append(f"not {read(attr)}")
        parts += _emit_hooks(read, params.hook_attrs, params.hooks, ctx)
        fwd = ctx.const(_FORWARD, "attr")
        where = instance if params.via_dict else f"{var}.__dict__"
        if params.forward is None:
            parts.append(f"{fwd} not in {where}")
        else:
            parts.append(ctx.identical(f"{where}.get({fwd})", params.forward, "forward"))
        # As ``Module.__call__`` reads it: an instance attribute, else the class's (read off
        # the class: through the instance a function would be bound anew on every read).
        attr = ctx.const(_COMPILED, "attr")
        if params.compiled is None:
            parts.append(f"{var}._compiled_call_impl is None")
        elif params.compiled_on_class:
            parts.append(f"{attr} not in {where}")
            parts.append(ctx.identical(f"type({var})._compiled_call_impl", params.compiled, "compiled"))
        else:
            parts.append(ctx.identical(f"{where}.get({attr})", params.compiled, "compiled"))
        return " and ".join(parts)

    def code(self, name: str, params: ModuleStateSpec) -> str:
        hooks = ", ".join(f"{h.attr}: {len(h.keys)}" for h in params.hooks) or (
            "no hooks" if params.hook_attrs else "hooks unchecked"
        )
        extra = "".join(f", {attr} {list(keys)}" for attr, keys in params.keys if keys)
        if params.forward is not None:
            extra += f", forward is {describe_ident(params.forward)}"
        if params.compiled is not None:
            extra += ", compiled"
        return f"{name}.training is {params.training}, {hooks}{extra}"

    def reason(self, name: str, value: Any, params: ModuleStateSpec) -> str:
        try:
            why = self._failure(value, params) or "the check failed"
        except Exception as e:
            why = f"reading it raised {type(e).__name__}: {e}"
        return f"module {name} changed: {why}"


# ---- NN_MODULE_GLOBAL_HOOKS -------------------------------------------------------------


class ModuleGlobalHooks(GuardKind):
    """torch's global module hooks (``register_module_forward_hook`` and the like) are as
    at build time: none, or the same hooks."""

    name = "NN_MODULE_GLOBAL_HOOKS"
    cost = 4
    reads_value = False

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[_Hooks, ...]:
        super().expect(value, guard, **options)
        return _hooks_of(_torch_module, _GLOBAL_HOOK_DICTS, _GLOBAL_SIDE_TABLES)

    def holds(self, value: Any, params: tuple[_Hooks, ...]) -> bool:
        return _hooks_hold(_torch_module, _GLOBAL_HOOK_DICTS, params) is None

    def emit(self, var: Any, params: tuple[_Hooks, ...], ctx: EmitContext) -> str:
        mod = ctx.const(_torch_module, "torch_nn_module")
        return " and ".join(_emit_hooks(lambda name: f"{mod}.{name}", _GLOBAL_HOOK_DICTS, params, ctx))

    def code(self, name: Any, params: tuple[_Hooks, ...]) -> str:
        hooks = ", ".join(f"{h.attr}: {len(h.keys)}" for h in params)
        return f"global nn.Module hooks unchanged ({hooks or 'none'})"

    def reason(self, name: Any, value: Any, params: tuple[_Hooks, ...]) -> str:
        why = _hooks_hold(_torch_module, _GLOBAL_HOOK_DICTS, params) or "the check failed"
        return f"global nn.Module hooks changed: {why}"
