"""torch's ambient states, registered in jitguard's global-state registry, and the group
that checks them all in one C++ call.

May import: jitguard._src.global_state, torch.

# [Note: torch global states]
# Each state is one named entry, so a GLOBAL_STATE miss says which one changed
# (``GLOBAL_STATE changed: autocast_cpu_enabled (expected False, got True)``). The first six
# are the specification's ``GlobalContext._supported_global_states``; the rest are what
# torch's own GLOBAL_STATE / TORCH_FUNCTION_MODE_STACK / DEFAULT_DEVICE guards cover that
# changes what a compiled graph computes. ``write=`` is given where putting a value back is
# meaningful on its own; states that mirror a context manager's stack (inference mode, the
# torch-function mode stack and the default device it implies, torch-function enablement)
# and the process-wide knobs (thread count, matmul precision flags) are guarded but not
# restorable.
#
# Every field of torch's C++ ``GlobalStateGuard`` (its ``__getstate__()`` JSON in torch 2.13:
# grad_mode, autocast_state {enabled, dtype per autocast device, cached_enabled},
# torch_function, torch_function_all_disabled, deterministic_algorithms(_warn_only),
# allow_tf32, allow_fp16_reduce, allow_bf16_reduce, num_threads, default_dtype) is some
# state here, read the way that guard compares it:
#   * autocast: ``autocast_enabled`` (CUDA) and ``autocast_cpu_enabled``; the CUDA and CPU
#     dtypes as ``autocast_gpu_dtype``/``autocast_cpu_dtype`` (always compared: a graph that
#     enters ``torch.autocast(device)`` bakes the dtype even while autocast is off outside,
#     which GlobalStateGuard does not pin); the other autocast devices (mtia, xpu, hpu, mps,
#     ...) as ``autocast_other_devices``, the (device, dtype) of each one that is enabled
#     (GlobalStateGuard compares a device's dtype only while it is enabled);
#   * ``allow_tf32``: the CUDA matmul fp32 precision is "tf32" (what GlobalStateGuard reads;
#     ``torch._C._get_cublas_allow_tf32`` raises once the new precision API was used);
#   * ``allow_fp16_reduce``/``allow_bf16_reduce``: cuBLAS's (reduced precision, split-K)
#     pair, one-to-one with the enum GlobalStateGuard compares.
#
# [Note: The torch state group]
# Read one by one (the reference meaning, and the check when the group is not usable) these
# states cost ~4-6 us a check (``autocast_other_devices`` alone is 16 reads). The "torch"
# group ([Note: Global-state groups]) covers all of them. Its checker is
# ``GlobalStateGuard().check()`` (~0.2 us for every field above) plus the reads
# GlobalStateGuard lacks: the CPU and CUDA autocast dtypes (each only if that device's
# autocast was off at snapshot time; while it is on, GlobalStateGuard compares the dtype),
# inference mode, and the mode stack (its length when it was empty, else the mode types and
# the default device). That is exactly the conjunction of the members: each GlobalStateGuard
# field is a function of the members (a dtype compared only while enabled is implied by the
# enabled flag and the full dtype, or by ``autocast_other_devices``), and each member is a
# field or one of the extra reads. tests/torch/test_state.py changes each state in turn and
# checks that the generated check and the reference both fail naming it. The group is
# registered only when GlobalStateGuard exists and its JSON has exactly the fields above
# (another torch version may compare more, which would make the checker stricter than its
# members); else every state is read on its own.
# Three variants ("torch_relaxed_cpu", "torch_relaxed_cuda", "torch_relaxed_cpu_cuda") have
# a device's ``autocast_<device>_dtype_while_enabled`` (the dtype while that device's
# autocast is on, else None: exactly what GlobalStateGuard compares of it) as a member in
# place of its dtype, and skip that read. A GLOBAL_STATE guard over those states (a compiler
# left the dtypes out, ``CompileRequest.ignore_global_states``) uses one of them.
#
# Measured (bench/bench_global_state.py, a shared 2-core machine, thread CPU time): the
# GLOBAL_STATE check ~0.8-1.3 us, against ~1.3-2.1 us for the fourteen per-state reads it
# replaced. ~0.3 us of it is the two dtype reads (``get_autocast_dtype`` parses its
# argument): the price of pinning the dtypes while autocast is off, which the retired
# TORCH_GLOBAL_STATE (~0.45-0.7 us) did not do.
#
# Each read is the cheapest exact one: a C function (``torch.is_grad_enabled``), or a Python
# function that touches only C state (the mode stack is read by index, never through
# ``torch.get_default_device()``, which costs ~4 us). ``torch.is_autocast_enabled(device)``
# parses its device string each call (~0.2 us); for CUDA the no-argument form avoids that,
# the other no-argument forms are deprecated and warn.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, Optional

import torch

from ..global_state import global_states, terms_checker

__all__ = [
    "DTYPE_STATES",
    "GROUP",
    "STATES",
    "autocast_other_devices",
    "default_device",
    "describe",
    "register_states",
    "torch_function_mode_types",
]

_len_stack = torch._C._len_torch_function_stack
_stack_at = torch._C._get_function_stack_at
_is_inference = torch.is_inference_mode_enabled
_is_autocast = torch.is_autocast_enabled
_autocast_dtype = torch.get_autocast_dtype

_GlobalStateGuard: Any
try:
    from torch._C._dynamo.guards import GlobalStateGuard as _GlobalStateGuard
except ImportError:  # pragma: no cover - present in torch 2.13
    _GlobalStateGuard = None

_AUTOCAST_DEVICES: tuple[str, ...] = tuple(torch._C._autocast_supported_devices())
_OTHER_AUTOCAST_DEVICES = tuple(d for d in _AUTOCAST_DEVICES if d not in ("cpu", "cuda"))

#: The name of the group that checks every torch state at once.
GROUP = "torch"
#: The states ``register_states`` registers, in order.
STATES = (
    "grad_enabled", "autocast_enabled", "autocast_cpu_enabled", "autocast_gpu_dtype",
    "autocast_cpu_dtype", "autocast_cache_enabled", "autocast_other_devices",
    "deterministic_algorithms", "deterministic_algorithms_warn_only", "default_dtype",
    "num_threads", "allow_tf32", "allow_fp16_reduce", "allow_bf16_reduce", "inference_mode",
    "torch_function_enabled", "torch_function_all_disabled", "torch_function_mode_stack",
    "default_device",
)
#: Per device whose autocast dtype is a state of its own: (that state, its weaker form, which
#: reads the dtype only while the device's autocast is on, and is None while it is off).
DTYPE_STATES = {
    "cpu": ("autocast_cpu_dtype", "autocast_cpu_dtype_while_enabled"),
    "cuda": ("autocast_gpu_dtype", "autocast_gpu_dtype_while_enabled"),
}
# GlobalStateGuard's fields in torch 2.13 (see [Note: The torch state group]).
_GUARD_FIELDS = frozenset({
    "grad_mode", "autocast_state", "torch_function", "torch_function_all_disabled",
    "deterministic_algorithms", "deterministic_algorithms_warn_only", "allow_tf32",
    "allow_fp16_reduce", "allow_bf16_reduce", "num_threads", "default_dtype",
})
_AUTOCAST_FIELDS = frozenset({"enabled", "dtype", "cached_enabled"})


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


def autocast_other_devices() -> tuple[tuple[str, torch.dtype], ...]:
    """(device type, autocast dtype) of each autocast device other than CPU and CUDA whose
    autocast is enabled, in torch's device order."""
    return tuple((d, _autocast_dtype(d)) for d in _OTHER_AUTOCAST_DEVICES if _is_autocast(d))


def _allow_tf32_reader() -> Callable[[], bool]:
    getter = getattr(torch._C, "_get_fp32_precision_getter", None)
    if getter is None:  # pragma: no cover - torch before the fp32 precision API
        return torch._C._get_cublas_allow_tf32

    def allow_tf32() -> bool:
        """The CUDA matmul fp32 precision (resolved through its parents) is TF32."""
        return bool(getter("cuda", "matmul") == "tf32")

    return allow_tf32


def describe(value: Any) -> str:
    """Readable text for a state's value: ``torch.float16``, ``cuda:0``, ``(DeviceContext,)``,
    ``(xpu: torch.bfloat16)``."""
    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    if isinstance(value, tuple) and all(isinstance(v, type) for v in value):
        return "(" + ", ".join(v.__name__ for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, tuple) and all(
        isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], torch.dtype) for v in value
    ):
        return "(" + ", ".join(f"{d}: {t}" for d, t in value) + ")"
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


def _snapshot_pinning(pin_cpu: bool, pin_cuda: bool) -> Callable[[], Callable[[], Any]]:
    """The snapshot of a torch state group: with ``pin_<device>`` the group's member is that
    device's autocast dtype (compared even while its autocast is off), else its
    ``..._while_enabled`` form (which GlobalStateGuard compares by itself)."""

    def snapshot() -> Callable[[], Any]:
        check = _GlobalStateGuard().check
        cpu, cuda = _autocast_dtype("cpu"), _autocast_dtype("cuda")
        # While a device's autocast is on, GlobalStateGuard compares its dtype itself.
        cpu_free = _is_autocast("cpu") or not pin_cpu
        cuda_free = _is_autocast("cuda") or not pin_cuda
        inference = _is_inference()
        if not _len_stack():
            # three C calls, and a dtype read where it is pinned (a dtype is one object per
            # kind: ``==`` is ``is`` on them); generated checks make them in line
            return terms_checker([
                (check, True), (_len_stack, 0), (_is_inference, inference),
                *([] if cpu_free else [(functools.partial(_autocast_dtype, "cpu"), cpu)]),
                *([] if cuda_free else [(functools.partial(_autocast_dtype, "cuda"), cuda)]),
            ])
        modes, device = torch_function_mode_types(), default_device()

        def torch_state_and_modes_unchanged() -> Any:
            return (
                check()
                and _is_inference() is inference
                and (cpu_free or _autocast_dtype("cpu") is cpu)
                and (cuda_free or _autocast_dtype("cuda") is cuda)
                and torch_function_mode_types() == modes
                and default_device() == device
            )

        return torch_state_and_modes_unchanged

    return snapshot


#: The "torch" group's snapshot: a checker true iff every torch state still has the value
#: it has now ([Note: The torch state group]).
snapshot = _snapshot_pinning(True, True)


def _dtype_while_enabled(device: str) -> Optional[torch.dtype]:
    return _autocast_dtype(device) if _is_autocast(device) else None


def group_available() -> bool:
    """Whether this torch's GlobalStateGuard compares exactly what the torch states cover."""
    if _GlobalStateGuard is None:
        return False
    try:
        fields = json.loads(_GlobalStateGuard().__getstate__())
    except Exception:  # pragma: no cover - a torch whose guard does not serialize
        return False
    autocast = fields.get("autocast_state")
    return (
        set(fields) == _GUARD_FIELDS
        and isinstance(autocast, dict)
        and set(autocast) == _AUTOCAST_FIELDS
        and len(autocast["enabled"]) == len(_AUTOCAST_DEVICES)
        and {"cpu", "cuda"} <= set(_AUTOCAST_DEVICES)
    )


def register_states() -> None:
    """Register the states ``GlobalContext`` restores and GLOBAL_STATE guards check, and the
    group that checks them in one call where this torch allows it."""
    reg = functools.partial(global_states.register, replace=True, describe=describe,
                            owner="torch")
    # [Note: Global states in play]: a tensor or a module among a specialized function's
    # arguments puts torch's states in play.
    global_states.register_owner("torch", (torch.Tensor, torch.nn.Module))
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
    reg("autocast_other_devices", autocast_other_devices)
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
    reg("num_threads", torch.get_num_threads)
    reg("allow_tf32", _allow_tf32_reader())
    reg("allow_fp16_reduce", torch._C._get_cublas_allow_fp16_reduced_precision_reduction)
    reg("allow_bf16_reduce", torch._C._get_cublas_allow_bf16_reduced_precision_reduction)
    reg("inference_mode", torch.is_inference_mode_enabled)
    reg("torch_function_enabled", torch._C._is_torch_function_enabled)
    reg("torch_function_all_disabled", torch._C._is_torch_function_all_disabled)
    reg("torch_function_mode_stack", torch_function_mode_types)
    reg("default_device", default_device)
    # Unguarded unless a compiler asks for them in place of the dtypes
    # (``CompileRequest.ignore_global_states(..., guard_instead=[...])``).
    for device, (_, weak) in DTYPE_STATES.items():
        reg(weak, functools.partial(_dtype_while_enabled, device), guarded=False)
    if group_available():
        for pin_cpu in (True, False):
            for pin_cuda in (True, False):
                members = list(STATES)
                for device, pin in (("cpu", pin_cpu), ("cuda", pin_cuda)):
                    if not pin:
                        dtype, weak = DTYPE_STATES[device]
                        members[members.index(dtype)] = weak
                unpinned = [d for d, pin in (("cpu", pin_cpu), ("cuda", pin_cuda)) if not pin]
                name = "_".join([GROUP, *(["relaxed", *unpinned] if unpinned else [])])
                global_states.register_group(
                    name, members, _snapshot_pinning(pin_cpu, pin_cuda), replace=True
                )
