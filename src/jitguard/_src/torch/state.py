"""torch's ambient states, registered in jitguard's global-state registry.

May import: jitguard._src.global_state, torch.

# [Note: torch global states]
# Each state is one named entry, so a GLOBAL_STATE miss says which one changed
# (``GLOBAL_STATE changed: autocast_cpu_enabled (expected False, got True)``). The first six
# are the specification's ``GlobalContext._supported_global_states``; the rest are what
# torch's own GLOBAL_STATE / TORCH_FUNCTION_MODE_STACK / DEFAULT_DEVICE guards cover that
# changes what a compiled graph computes. ``write=`` is given where putting a value back is
# meaningful on its own; states that mirror a context manager's stack (inference mode, the
# torch-function mode stack and the default device it implies, torch-function enablement)
# are guarded but not restorable.
#
# Every read runs on every check, so each is the cheapest exact read there is: a C function
# (``torch.is_grad_enabled``), or a Python function that touches only C state (the mode
# stack is read by index, never through ``torch.get_default_device()``, which costs ~4 us).
# ``torch.is_autocast_enabled(device)`` parses its device string each call (~0.2 us); for CUDA
# the no-argument form avoids that, the other no-argument forms are deprecated and warn.
#
# Left out (torch guards them, they only matter on CUDA or for threads): TF32 and
# reduced-precision matmul flags, ``num_threads``. ``register_global_state`` adds them.
"""

from __future__ import annotations

import functools
from typing import Any, Optional

import torch

from ..global_state import global_states

__all__ = [
    "default_device",
    "describe",
    "register_states",
    "torch_function_mode_types",
]

_len_stack = torch._C._len_torch_function_stack
_stack_at = torch._C._get_function_stack_at


def torch_function_mode_types() -> tuple[type, ...]:
    """The types of the modes on the torch-function mode stack, outermost first."""
    n = _len_stack()
    if not n:
        return ()
    return tuple(type(_stack_at(i)) for i in range(n))


def default_device() -> Optional[torch.device]:
    """The device of the innermost ``DeviceContext`` on the torch-function mode stack
    (``torch.set_default_device``, ``with torch.device(...)``), or None when there is none,
    which means factory functions use the CPU."""
    n = _len_stack()
    if not n:
        return None
    from torch.utils._device import DeviceContext

    for i in range(n - 1, -1, -1):
        mode = _stack_at(i)
        if isinstance(mode, DeviceContext):
            return mode.device
    return None


def describe(value: Any) -> str:
    """Readable text for a state's value: ``torch.float16``, ``cuda:0``, ``(DeviceContext,)``."""
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, tuple) and all(isinstance(v, type) for v in value):
        return "(" + ", ".join(v.__name__ for v in value) + ("," if len(value) == 1 else "") + ")"
    if value is None:
        return "None"
    return repr(value)


def _set_deterministic(mode: bool) -> None:
    torch.use_deterministic_algorithms(
        mode, warn_only=torch.is_deterministic_algorithms_warn_only_enabled()
    )


def _set_deterministic_warn_only(warn_only: bool) -> None:
    torch.use_deterministic_algorithms(
        torch.are_deterministic_algorithms_enabled(), warn_only=warn_only
    )


def register_states() -> None:
    """Register the states ``GlobalContext`` restores and GLOBAL_STATE guards check."""
    reg = functools.partial(global_states.register, replace=True, describe=describe)
    # The specification's six, under its names.
    reg("grad_enabled", torch.is_grad_enabled, write=torch.set_grad_enabled)
    # The no-argument form reads CUDA's flag without parsing a device string (half the cost).
    reg(
        "autocast_enabled",
        torch.is_autocast_enabled,
        write=functools.partial(torch.set_autocast_enabled, "cuda"),
    )
    reg(
        "autocast_cpu_enabled",
        functools.partial(torch.is_autocast_enabled, "cpu"),
        write=functools.partial(torch.set_autocast_enabled, "cpu"),
    )
    for name, device in (("autocast_gpu_dtype", "cuda"), ("autocast_cpu_dtype", "cpu")):
        reg(
            name,
            functools.partial(torch.get_autocast_dtype, device),
            write=functools.partial(torch.set_autocast_dtype, device),
        )
    reg(
        "autocast_cache_enabled",
        torch.is_autocast_cache_enabled,
        write=torch.set_autocast_cache_enabled,
    )
    # The rest of what torch's ambient guards cover.
    reg(
        "deterministic_algorithms",
        torch.are_deterministic_algorithms_enabled,
        write=_set_deterministic,
    )
    reg(
        "deterministic_algorithms_warn_only",
        torch.is_deterministic_algorithms_warn_only_enabled,
        write=_set_deterministic_warn_only,
    )
    reg("default_dtype", torch.get_default_dtype, write=torch.set_default_dtype)
    reg("inference_mode", torch.is_inference_mode_enabled)
    reg("torch_function_enabled", torch._C._is_torch_function_enabled)
    reg("torch_function_all_disabled", torch._C._is_torch_function_all_disabled)
    reg("torch_function_mode_stack", torch_function_mode_types)
    reg("default_device", default_device)
