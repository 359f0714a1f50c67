"""Guard conversion of Dynamo's tensor kinds: SHAPE_ENV (shape guards), TENSOR_MATCH, and
the guards made over every tensor of a capture at the end (one TENSORS_MATCH with
``batch_tensors``, else a TENSOR_MATCH each) ([Note: Converting guard kinds], in
``convert``).

May import: jitguard._src.compiler.*, jitguard._src.guards, jitguard._src.sources,
jitguard._src.torch.* (adapter_sources, convert_context, convert_shape, convert_sources),
torch.
"""

from __future__ import annotations

import functools
from typing import Any

from ..compiler.builder import GuardBuilder
from ..guards import Source
from ..sources import AttrSource, TensorPropertySource
from . import adapter_sources as adapter
from .convert_context import Context, TensorSeen, register_kind_converter
from .convert_shape import parse_shape_code
from .convert_sources import Unconvertible

__all__ = ["tensor_guards"]


@register_kind_converter("SHAPE_ENV")
def _shape_env(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
    if not p.code_list:
        return
    parsed = parse_shape_code(p.code_list, ctx.sources.by_name, p.user_stack)
    ctx.out.shape_guards.extend(parsed.guards)
    ctx.out.symbol_sources.update(parsed.symbol_sources)
    ctx.shape_checked |= parsed.shape_checked


@register_kind_converter("TENSOR_MATCH")
def _tensor_match(ctx: Context, p: adapter.EntryParts, src: Source) -> None:
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
    ctx.tensors.append(TensorSeen(src, sizes, strides, p.user_stack))
    ctx.add(src, GuardBuilder.DIMENSION_DYNAMIC_MARKING, p.user_stack)
    if value.requires_grad and not isinstance(value, torch.nn.Parameter):
        # [Note: A tensor's leafness]
        # Dynamo traces ``x.is_leaf`` / ``x.grad_fn is None`` from the capture's fake
        # tensor and guards neither: a non-leaf tensor of a leaf's metadata was served the
        # leaf's graph (torch.compile too). jitguard pins ``is_leaf`` of each input that
        # requires grad (a tensor that does not is always a leaf, a Parameter too), read
        # past function modes. Stricter than torch, listed.
        ctx.add(AttrSource(src, "is_leaf"), GuardBuilder.BOOL_MATCH, p.user_stack)
        ctx.out.stricter.append(
            f"BOOL_MATCH on {src.name()}.is_leaf: jitguard's own guard "
            f"([Note: A tensor's leafness])"
        )
    param = isinstance(value, torch.nn.Parameter) and adapter.config_flag(
        "skip_no_tensor_aliasing_guards_on_parameters"
    )
    if not param and not _from_builtin_module(p.source):
        ctx.aliasing.append(src)


def tensor_guards(ctx: Context) -> None:
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


def _static_dims(ctx: Context, src: Source, value: Any) -> tuple[Any, Any]:
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
