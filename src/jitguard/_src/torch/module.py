"""nn.Module arguments: sources for a module's parameters, buffers, submodules and training
flag, and ``module_guards``, the guards that pin a module argument (its kinds are in
``module_kinds``).

May import: jitguard._src._util, jitguard._src.errors, jitguard._src.guards, jitguard._src.sources,
jitguard._src.compiler.kinds, jitguard._src.compiler.values, jitguard._src.torch.batched,
torch.

# [Note: Guarding an nn.Module]
# A compiled artifact for ``f(m, x)`` may have relied on everything calling ``m`` does: which
# submodules run (the ``_modules`` dicts, each child's identity and class), what each reads
# (the ``_parameters``/``_buffers`` dicts, each tensor's identity and metadata), how it is
# called (``training``, the instance hook dicts, an instance-level ``forward``, a
# ``compile()``d call), and torch's global module hooks. ``module_guards`` pins exactly that:
#   * per module: ID_MATCH and TYPE_MATCH (``register_parametrization`` swaps a module's
#     class in place), and one NN_MODULE_STATE leaf, a single expression: ``training``; the
#     keys of ``_parameters``, ``_buffers``, ``_modules`` in order (containers run children
#     in that order, flatteners pass parameters in it; an empty one is just ``not d``); the
#     four hook dicts (empty stays empty, a non-empty one keeps its keys and hook objects);
#     no instance ``forward``; ``_compiled_call_impl`` unchanged;
#   * per parameter and buffer: ID_MATCH (a replacement is a miss even when it looks the
#     same) and its metadata (TENSOR_MATCH's meaning). Identity does not make the metadata
#     check redundant: ``p.data = ...``, ``m.half()``, ``m.to(device)`` and
#     ``requires_grad_()`` change a tensor in place, keeping its identity, and no
#     Python-visible signal says they happened (they bump no version counter, fire no
#     hook). So every tensor's metadata is read on every call. Read from Python that costs
#     ~0.5 us a tensor (eight reads through torch's argument handling) and dominates a large
#     module's check, so by default all of a module's strided tensors are checked by one
#     TENSORS_MATCH leaf, one call of a C++ tensor checker (~7 ns a tensor for jitguard's
#     native one, ~45 ns for torch's: [Note: Batched tensor checks], [Note: A native
#     tensor checker]); ``batch=False`` keeps one pure-Python TENSOR_MATCH
#     each. Measured on a 100-Linear MLP (bench/bench_torch_module.py): the batched check
#     is about 2.5x cheaper than the per-tensor one;
#   * once per check: NN_MODULE_GLOBAL_HOOKS, torch's global forward/backward (pre-)hooks.
# What keeps the rest cheap: sources read through the dicts (``L['m']._modules['0']
# ._parameters['weight']``), never ``Module.__getattr__``, and the compiler reads each dict
# once for every check under it; an object met twice (tied weights, a shared submodule) is
# checked once and only its identity is pinned at the other places; the per-module call
# state is one expression. Plain attributes (``eps``, ``stride``) are what the traced code
# reads, so the JIT guards those it read; ``constants=True`` pins every constant-valued
# instance attribute as well.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Optional

import torch

from .._util import is_scalar_type
from ..compiler.kinds import create_fn_for
from ..compiler.values import type_name
from ..errors import GuardKindError
from ..guards import Guard, Source
from ..sources import AttrSource, GetItemSource, GlobalStateSource
from .batched import checker_available

__all__ = [
    "buffer_source",
    "module_guards",
    "module_path_source",
    "parameter_source",
    "submodule_source",
    "training_source",
]

# ---- sources ------------------------------------------------------------------------------


def parameter_source(module: Source, name: str) -> GetItemSource:
    """``<module>._parameters['name']``: the parameter registered under ``name``."""
    return GetItemSource(AttrSource(module, "_parameters"), name)


def buffer_source(module: Source, name: str) -> GetItemSource:
    """``<module>._buffers['name']``."""
    return GetItemSource(AttrSource(module, "_buffers"), name)


def submodule_source(module: Source, name: str) -> GetItemSource:
    """``<module>._modules['name']``."""
    return GetItemSource(AttrSource(module, "_modules"), name)


def training_source(module: Source) -> AttrSource:
    """``<module>.training``."""
    return AttrSource(module, "training")


def module_path_source(root: Source, module: torch.nn.Module, path: str) -> Source:
    """The source of a dotted name as ``named_parameters``/``named_buffers``/
    ``named_modules`` spell it (``"layers.0.weight"``), resolved through the live
    ``module``: each step is a submodule, the last one a parameter, buffer or submodule."""
    source: Source = root
    current: Any = module
    parts = path.split(".") if path else []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part in current._modules:
            source, current = submodule_source(source, part), current._modules[part]
        elif last and part in current._parameters:
            return parameter_source(source, part)
        elif last and part in current._buffers:
            return buffer_source(source, part)
        else:
            raise KeyError(
                f"{path!r}: {'.'.join(parts[:i]) or 'the root'} ({type_name(type(current))}) "
                f"has no submodule{', parameter or buffer' if last else ''} named {part!r}"
            )
    return source


# ---- module_guards --------------------------------------------------------------------------


def _is_constant(value: Any) -> bool:
    if type(value) is tuple:
        return all(_is_constant(v) for v in value)
    return is_scalar_type(type(value))


def module_guards(
    source: Source,
    module: torch.nn.Module,
    *,
    identity: bool = True,
    tensor_match: bool = True,
    hooks: bool = True,
    constants: bool = False,
    tensor_options: Optional[dict[str, Any]] = None,
    batch: bool = True,
) -> list[Guard]:
    """The guards that pin the module at ``source`` (see [Note: Guarding an nn.Module]).

    ``identity``: parameters and buffers by identity (ID_MATCH); ``tensor_match``: their
    metadata (TENSOR_MATCH, with ``tensor_options`` such as ``dispatch_keys="exact"``);
    ``hooks``: the hook dicts and torch's global hooks; ``constants``: every instance
    attribute holding an int, float, bool, str, None or a tuple of these, by value;
    ``batch``: check the strided tensors' metadata in one TENSORS_MATCH call (see
    [Note: Batched tensor checks]) instead of one TENSOR_MATCH each; it is not used with
    ``tensor_options``.

    Over 80 lines: one guard list, built part by part of the module.
    """
    if not isinstance(module, torch.nn.Module):
        raise GuardKindError(f"module_guards: {source.name()} holds a {type_name(type(module))}, not an nn.Module")
    kind = create_fn_for
    tensor_fn: Callable[..., Any] = kind("TENSOR_MATCH")
    if tensor_options:
        tensor_fn = functools.partial(tensor_fn, **tensor_options)
    batch = batch and not tensor_options and checker_available()
    guards: list[Guard] = []
    seen: dict[int, Source] = {}  # objects already checked in full, by id (they stay alive)
    batched: list[Source] = []

    def add(src: Source, fn: Callable[..., Any]) -> None:
        guards.append(src.make_guard(fn))

    def tensor(src: Source, value: Any) -> None:
        if value is None:
            add(src, kind("NONE_MATCH"))
            return
        if identity:
            add(src, kind("ID_MATCH"))
        if id(value) in seen:
            if not identity:  # tie the two places together some other way
                add(src, functools.partial(kind("DUPLICATE_INPUT"), source_b=seen[id(value)]))
            return
        seen[id(value)] = src
        if tensor_match and batch and value.layout is torch.strided:
            batched.append(src)
        elif tensor_match:
            add(src, tensor_fn)
        elif not identity:
            add(src, kind("TYPE_MATCH"))

    def visit(src: Source, m: Any) -> None:
        if m is None:
            add(src, kind("NONE_MATCH"))
            return
        add(src, kind("ID_MATCH"))
        if id(m) in seen:
            return
        seen[id(m)] = src
        add(src, kind("TYPE_MATCH"))
        add(src, kind("NN_MODULE_STATE") if hooks else functools.partial(kind("NN_MODULE_STATE"), hooks=False))
        for name, p in m._parameters.items():
            tensor(parameter_source(src, name), p)
        for name, b in m._buffers.items():
            tensor(buffer_source(src, name), b)
        if constants:
            for name, v in m.__dict__.items():
                if name != "training" and _is_constant(v) and not name.startswith("__"):
                    add(AttrSource(src, name), kind("CONSTANT_MATCH"))
        for name, child in m._modules.items():
            visit(submodule_source(src, name), child)

    visit(source, module)
    if batched:
        first, *others = batched
        add(first, functools.partial(kind("TENSORS_MATCH"), others=tuple(others)))
    if hooks:
        add(GlobalStateSource(), kind("NN_MODULE_GLOBAL_HOOKS"))
    return guards
