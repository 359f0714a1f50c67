"""What ``jitguard.torch`` re-exports that is not a plain name of another module: the torch
guard kinds' create_fns, ``tensor_match(...)`` (a TENSOR_MATCH create_fn with options) and
``capture_info``. Importing this module installs the torch integration.

May import: jitguard._src.* (compiler, cache, torch).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Optional

from ..compiler.builder import GuardBuilder
from . import install
from .compiled import EntryInfo

__all__ = [
    "NN_MODULE_GLOBAL_HOOKS",
    "NN_MODULE_STATE",
    "NO_TENSOR_ALIASING",
    "TENSORS_MATCH",
    "TENSOR_MATCH",
    "TORCH_GLOBAL_STATE",
    "TORCH_GUARD_TREE",
    "capture_info",
    "tensor_match",
]

install()

#: The create_fns of the torch guard kinds (also ``jitguard.GuardBuilder.<NAME>``).
TENSOR_MATCH: Callable[..., Any] = GuardBuilder.TENSOR_MATCH
TENSORS_MATCH: Callable[..., Any] = GuardBuilder.TENSORS_MATCH
NO_TENSOR_ALIASING: Callable[..., Any] = GuardBuilder.NO_TENSOR_ALIASING
NN_MODULE_STATE: Callable[..., Any] = GuardBuilder.NN_MODULE_STATE
NN_MODULE_GLOBAL_HOOKS: Callable[..., Any] = GuardBuilder.NN_MODULE_GLOBAL_HOOKS
TORCH_GLOBAL_STATE: Callable[..., Any] = GuardBuilder.TORCH_GLOBAL_STATE
TORCH_GUARD_TREE: Callable[..., Any] = GuardBuilder.TORCH_GUARD_TREE


def tensor_match(
    *,
    dynamic_dims: Iterable[int] = (),
    sizes: Optional[Iterable[Optional[int]]] = None,
    strides: Optional[Iterable[Optional[int]]] = None,
    dispatch_keys: str = "subset",
) -> Callable[..., Any]:
    """A TENSOR_MATCH create_fn with options: ``dynamic_dims`` leave those sizes (and the
    strides that grow with them) unchecked; ``sizes``/``strides`` say exactly what to check
    (None entries unchecked); ``dispatch_keys`` is ``"subset"`` (default: the neg/conj/
    inference bits), ``"exact"`` (the raw key set) or ``"torch"`` (the key set with the
    thread-local sets folded in, as torch's checker)."""
    options: dict[str, Any] = {"dispatch_keys": dispatch_keys}
    dims = tuple(dynamic_dims)
    if dims:
        options["dynamic_dims"] = dims
    if sizes is not None:
        options["sizes"] = tuple(sizes)
    if strides is not None:
        options["strides"] = tuple(strides)
    if options == {"dispatch_keys": "subset"}:
        return TENSOR_MATCH
    return functools.partial(TENSOR_MATCH, **options)


def capture_info(compiled: Any) -> dict[Any, EntryInfo]:
    """Per compile id, what ``jitguard.torch.compile`` keeps for the entries of
    ``compiled``: the Dynamo capture (``graph_module``, ``guard_types()``), the guards
    delegated to torch per kind (``delegated``), or why the capture failed (``failure``)."""
    compiler = getattr(compiled, "compiler", None)
    infos = getattr(compiler, "infos", None)
    if not isinstance(infos, dict):
        raise TypeError(f"{compiled!r} was not made by jitguard.torch.compile")
    return dict(infos)
