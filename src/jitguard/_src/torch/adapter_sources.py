"""The torch internals that guard conversion reads: TorchDynamo's guard-filter entries, its
source classes and their fields, its guard options and code parts, its config flags, and
the ambient torch states some Dynamo guards compare. Nothing else in jitguard touches
these; tests/torch/test_adapter_sources.py pins each one, so a torch upgrade that moves one
breaks here, loudly (``adapter.py``, the capture side, is the other half of the adapter).

May import: torch.

# [Note: What a Dynamo guard carries]
# ``guard_filter_fn(entries)`` gets one ``GuardFilterEntry`` per guard Dynamo made, after
# Dynamo built its own guard tree once (so each ``orig_guard`` already has its export info):
#   * ``guard_type``: the GuardBuilder method name (TENSOR_MATCH, ...), and
#     ``derived_guard_types``: the kinds that method delegated to (CONSTANT_MATCH on a float
#     derives EQUALS_MATCH, TENSOR_MATCH matched by id derives ID_MATCH);
#   * ``value`` / ``has_value``: the guarded value in the frame that was captured;
#   * ``orig_guard``: a ``torch._guards.Guard``: ``originating_source`` (a Dynamo source),
#     ``create_fn`` (a GuardBuilder method, or a ``functools.partial`` of one whose keywords
#     are the options: ``attr=`` for HASATTR and NOT_PRESENT_IN_GENERIC_DICT, ``key=`` for
#     DICT_CONTAINS and SET_CONTAINS, ``source_b=`` for DUPLICATE_INPUT, ``value=`` (a
#     ``TensorWeakRef``) for TENSOR_MATCH), ``code_list`` (the Python code parts Dynamo
#     installed: for TENSOR_MATCH the dimension-marking checks, for SHAPE_ENV every shape
#     guard as a Python expression over source names) and ``user_stack``.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Optional

import torch

__all__ = [
    "EntryParts",
    "config_flag",
    "constant_base_types",
    "current_default_device",
    "dict_version",
    "dynamo_source_fields",
    "entry_parts",
    "forward_ad_level",
    "functorch_states",
    "functorch_states_match",
    "is_dynamo_source",
    "saved_tensors_hooks_ids",
    "source_class_name",
    "sympy_floor_div",
    "sympy_python_mod",
    "tensor_property_name",
]

_dynamo_source_base = torch._guards.Source


class EntryParts(NamedTuple):
    """What conversion needs of one ``GuardFilterEntry``."""

    guard_type: str
    derived: tuple[str, ...]
    source: Any  # a Dynamo source
    options: dict[str, Any]  # the create_fn's keyword options
    has_value: bool
    value: Any
    code_list: tuple[str, ...]
    user_stack: Any
    guard: Any  # the torch._guards.Guard itself (kept for reports)


def entry_parts(entry: Any) -> EntryParts:
    """The parts of a ``torch._dynamo.types.GuardFilterEntry``."""
    guard = entry.orig_guard
    fn = guard.create_fn
    options: dict[str, Any] = {}
    while isinstance(fn, functools.partial):
        options = {**fn.keywords, **options}
        fn = fn.func
    return EntryParts(
        guard_type=str(entry.guard_type),
        derived=tuple(entry.derived_guard_types or ()),
        source=guard.originating_source,
        options=options,
        has_value=bool(entry.has_value),
        value=entry.value,
        code_list=tuple(guard.code_list or ()),
        user_stack=guard.user_stack,
        guard=guard,
    )


def is_dynamo_source(obj: Any) -> bool:
    """Whether ``obj`` is a torch (Dynamo) ``Source``."""
    return isinstance(obj, _dynamo_source_base)


def source_class_name(source: Any) -> str:
    """The Dynamo source's class name (``LocalSource``, ``AttrSource``, ...): what the
    converter registry is keyed by."""
    return type(source).__name__


def dynamo_source_fields(source: Any) -> dict[str, Any]:
    """A Dynamo source's dataclass fields, by name (``base``, ``member``, ``index``, ...)."""
    return {f.name: getattr(source, f.name) for f in dataclasses.fields(source)}


def dynamo_source_name(source: Any) -> str:
    """The source's ``name`` (a cached property in torch 2.13, a method in the seed)."""
    name = source.name
    return name() if callable(name) else str(name)


def tensor_property_name(prop: Any) -> str:
    """``SIZE``, ``STRIDE`` or ``STORAGE_OFFSET`` for a Dynamo ``TensorProperty``."""
    if not isinstance(prop, enum.Enum):
        raise TypeError(f"not a TensorProperty: {prop!r}")
    return prop.name


def unwrap_tensor_weakref(obj: Any) -> Any:
    """The tensor behind TENSOR_MATCH's ``value=`` option (a ``TensorWeakRef``), or None."""
    from torch.utils.weak import TensorWeakRef

    if isinstance(obj, TensorWeakRef):
        return obj()
    return obj


def constant_base_types() -> tuple[type, ...]:
    """The builtin types whose subclass instances Dynamo guards by CONSTANT_SUBCLASS_MATCH
    (``base_type(x) == base_value``, with the first base type ``x`` is an instance of)."""
    from torch._dynamo.variables import user_defined

    return tuple(user_defined._CONSTANT_BASE_TYPES)


def config_flag(name: str) -> Any:
    """A ``torch._dynamo.config`` value (``skip_nnmodule_hook_guards``,
    ``skip_no_tensor_aliasing_guards_on_parameters``)."""
    import torch._dynamo.config as config

    return getattr(config, name)


# ---- ambient states some Dynamo guards compare ------------------------------------------


def saved_tensors_hooks_ids() -> Optional[tuple[int, ...]]:
    """What AUTOGRAD_SAVED_TENSORS_HOOKS compares: the ids of the innermost saved-tensors
    hooks pair when Dynamo can inline it, else None."""
    from torch._functorch._aot_autograd import utils

    hooks = utils.top_saved_tensors_hooks()
    if not utils.saved_tensors_hooks_are_inlineable(hooks):
        return None
    return tuple(map(id, hooks))


def top_saved_tensors_hooks_read() -> tuple[Callable[..., Any], bool]:
    """torch's reader of the innermost saved-tensors hooks pair and the argument it takes
    (``ignore_is_tracing``): called with it, it gives that pair, or None when there is none,
    the read ``saved_tensors_hooks_ids`` starts from. A check that expects no inlineable
    hooks is done when it gives None; generated code calls it directly, with no Python
    function around it."""
    return torch._C._autograd._top_saved_tensors_default_hooks, True


def forward_ad_level() -> int:
    """The current forward-mode AD level (what DUAL_LEVEL compares)."""
    return int(torch.autograd.forward_ad._current_level)


def functorch_states() -> list[Any]:
    """The functorch interpreter stack's states, outermost first (what
    FUNCTORCH_STACK_MATCH compares)."""
    from torch._functorch import pyfunctorch

    return [ci.get_state() for ci in pyfunctorch.retrieve_all_functorch_interpreters()]


def functorch_states_match(states: Sequence[Any]) -> bool:
    """Whether the functorch interpreter stack now has ``states``."""
    from torch._functorch import pyfunctorch

    return bool(pyfunctorch.compare_functorch_state(list(states)))


def current_default_device() -> Any:
    """``torch.utils._device.CURRENT_DEVICE`` (what DEFAULT_DEVICE compares)."""
    import torch.utils._device as device_mod

    return device_mod.CURRENT_DEVICE


def default_device_home() -> tuple[Any, str]:
    """The module and the name ``CURRENT_DEVICE`` is read under (generated code reads the
    module's attribute: a fresh read each call, where ``torch.set_default_device`` writes)."""
    import torch.utils._device as device_mod

    return device_mod, "CURRENT_DEVICE"


def dict_version(d: Any) -> int:
    """The dict's PEP 509 version tag, as Dynamo's DICT_VERSION reads it."""
    return int(torch._C._dynamo.guards.dict_version(d))


def sympy_floor_div() -> Any:
    """torch's sympy ``FloorDiv`` (Python ``//`` on ints), for shape guards."""
    from torch.utils._sympy.functions import FloorDiv

    return FloorDiv


def sympy_python_mod() -> Any:
    """torch's sympy ``PythonMod`` (Python ``%`` on ints), for shape guards."""
    from torch.utils._sympy.functions import PythonMod

    return PythonMod
