"""Argument rules for the specializing cache: how a tensor, a torch constant (dtype, device,
Size, layout, memory format) and an nn.Module argument are guarded by default.

May import: jitguard._src.guards, jitguard._src.dispatch.entry, jitguard._src.cache.policy,
jitguard._src.compiler.builder, jitguard._src.torch.module, torch.

A tensor is guarded by TENSOR_MATCH; a dynamic one (declared, or made so by a recompile)
with every dim dynamic. Torch constants are guarded by value and need no aliasing guard
(dtypes, layouts and memory formats are singletons, devices and sizes are immutable). A
module is pinned by ``module_guards`` (see [Note: Guarding an nn.Module]); it and its
tensors are held by identity, so the cache's aliasing guards leave them out.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..compiler.builder import GuardBuilder
from ..guards import Source
from .module import module_guards

__all__ = ["constant_rule", "module_rule", "register_rules", "tensor_rule", "tensor_weight"]


def tensor_rule(ctx: Any, source: Source, value: torch.Tensor) -> None:
    """TENSOR_MATCH; every dim dynamic when the cache says the source is dynamic."""
    if ctx.is_dynamic(source) and value.dim():
        ctx.guard(
            source,
            functools.partial(GuardBuilder.TENSOR_MATCH, dynamic_dims=tuple(range(value.dim()))),
        )
    else:
        ctx.guard(source, GuardBuilder.TENSOR_MATCH)


def constant_rule(ctx: Any, source: Source, value: Any) -> None:
    """By value (EQUALS_MATCH), outside the aliasing guards."""
    ctx.by_value(source, value)
    ctx.ignore_aliasing(source)


def module_rule(ctx: Any, source: Source, value: torch.nn.Module) -> None:
    """Every guard of ``module_guards``."""
    for guard in module_guards(source, value):
        ctx.guard(guard.originating_source, guard.create_fn)


def tensor_weight(spec: Any) -> int:
    """Specificity of a TENSOR_MATCH leaf: 4, plus one per checked size and stride, so a
    static tensor guard outweighs a dynamic one ([Note: Specificity])."""
    checked = sum(e is not None for e in spec.sizes)
    checked += sum(e is not None for e in spec.strides or ())
    return 4 + checked


def tensors_weight(batch: Any) -> int:
    return sum(tensor_weight(s) for s in batch.specs)


def register_rules() -> None:
    """Register the rules (and the torch kinds' specificity) with the specializing cache."""
    from ..cache.policy import register_arg_rule
    from ..dispatch.entry import register_specificity

    register_specificity("TENSOR_MATCH", tensor_weight)
    register_specificity("TENSORS_MATCH", tensors_weight)
    register_specificity("NN_MODULE_STATE", 4)
    register_specificity("NN_MODULE_GLOBAL_HOOKS", 0)
    register_arg_rule(torch.Tensor, tensor_rule, replace=True)
    for tp in (torch.dtype, torch.device, torch.layout, torch.memory_format):
        register_arg_rule(tp, constant_rule, replace=True)
    register_arg_rule(torch.Size, constant_rule, subclasses=False, replace=True)
    register_arg_rule(torch.nn.Module, module_rule, replace=True)
