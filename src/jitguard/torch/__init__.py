"""jitguard's torch integration, public names: tensor guards, module guards and their sources.

Importing ``jitguard.torch`` imports torch and installs the integration (``import jitguard``
alone never imports torch; see [Note: Lazy integrations]). The code lives in
``jitguard._src.torch``.

    from jitguard import LocalSource, compile_guards
    import jitguard.torch as jgt

    guards = [LocalSource("x").make_guard(jgt.tensor_match(dynamic_dims=(0,)))]
    guards += jgt.module_guards(LocalSource("m"), model)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Optional

from .._src.compiler.builder import GuardBuilder
from .._src.torch import install as install
from .._src.torch.aliasing import no_tensor_aliasing_guard as no_tensor_aliasing_guard
from .._src.torch.aliasing import overlapping_indices as overlapping_indices
from .._src.torch.automatic import mark_dynamic as mark_dynamic
from .._src.torch.compile import CompiledEntryInfo as CompiledEntryInfo
from .._src.torch.compile import compile as compile
from .._src.torch.compile import traced_info as traced_info
from .._src.torch.module import buffer_source as buffer_source
from .._src.torch.module import module_guards as module_guards
from .._src.torch.module import module_path_source as module_path_source
from .._src.torch.module import parameter_source as parameter_source
from .._src.torch.module import submodule_source as submodule_source
from .._src.torch.module import training_source as training_source
from .._src.torch.state import default_device as default_device
from .._src.torch.state import torch_function_mode_types as torch_function_mode_types
from .._src.torch.tensor_match import dtype_name as dtype_name

install()

#: The create_fns of the torch guard kinds (also ``jitguard.GuardBuilder.<NAME>``).
TENSOR_MATCH: Callable[..., Any] = GuardBuilder.TENSOR_MATCH
TENSORS_MATCH: Callable[..., Any] = GuardBuilder.TENSORS_MATCH
NO_TENSOR_ALIASING: Callable[..., Any] = GuardBuilder.NO_TENSOR_ALIASING
NN_MODULE_STATE: Callable[..., Any] = GuardBuilder.NN_MODULE_STATE
NN_MODULE_GLOBAL_HOOKS: Callable[..., Any] = GuardBuilder.NN_MODULE_GLOBAL_HOOKS
TORCH_GLOBAL_STATE: Callable[..., Any] = GuardBuilder.TORCH_GLOBAL_STATE


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


__all__ = [
    "CompiledEntryInfo",
    "NN_MODULE_GLOBAL_HOOKS",
    "NN_MODULE_STATE",
    "NO_TENSOR_ALIASING",
    "TENSORS_MATCH",
    "TENSOR_MATCH",
    "TORCH_GLOBAL_STATE",
    "buffer_source",
    "compile",
    "default_device",
    "dtype_name",
    "install",
    "mark_dynamic",
    "module_guards",
    "module_path_source",
    "no_tensor_aliasing_guard",
    "overlapping_indices",
    "parameter_source",
    "submodule_source",
    "tensor_match",
    "torch_function_mode_types",
    "traced_info",
    "training_source",
]
