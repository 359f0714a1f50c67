"""torch's ambient states, registered in jitguard's global-state registry.

May import: jitguard._src.global_state, torch.
"""

from __future__ import annotations

import functools

import torch

from ..global_state import global_states

__all__ = ["register_states"]


def register_states() -> None:
    """Register the states ``GlobalContext`` restores and GLOBAL_STATE guards check.

    The first six are the specification's ``GlobalContext._supported_global_states``.
    """
    reg = global_states.register
    reg("grad_enabled", torch.is_grad_enabled, write=torch.set_grad_enabled, replace=True)
    for name, device in (("autocast_enabled", "cuda"), ("autocast_cpu_enabled", "cpu")):
        reg(
            name,
            functools.partial(torch.is_autocast_enabled, device),
            write=functools.partial(torch.set_autocast_enabled, device),
            replace=True,
        )
    for name, device in (("autocast_gpu_dtype", "cuda"), ("autocast_cpu_dtype", "cpu")):
        reg(
            name,
            functools.partial(torch.get_autocast_dtype, device),
            write=functools.partial(torch.set_autocast_dtype, device),
            replace=True,
        )
    reg(
        "autocast_cache_enabled",
        torch.is_autocast_cache_enabled,
        write=torch.set_autocast_cache_enabled,
        replace=True,
    )
