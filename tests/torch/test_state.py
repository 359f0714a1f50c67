"""torch's global states: GLOBAL_STATE misses name the changed state with readable values,
GlobalContext saves and restores the restorable ones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.overrides import TorchFunctionMode  # noqa: E402

import jitguard.torch as jgt  # noqa: E402
from jitguard import (  # noqa: E402
    GlobalContext,
    GlobalStateSource,
    GuardBuilder,
    compile_guards,
    global_states,
)

SPEC_SIX = {
    "grad_enabled", "autocast_enabled", "autocast_cpu_enabled", "autocast_gpu_dtype",
    "autocast_cpu_dtype", "autocast_cache_enabled",
}
ADDED = {
    "deterministic_algorithms", "deterministic_algorithms_warn_only", "default_dtype",
    "inference_mode", "torch_function_enabled", "torch_function_all_disabled",
    "torch_function_mode_stack", "default_device",
}


@pytest.fixture(autouse=True)
def restore_torch_state() -> Iterator[None]:
    """Put back every torch state a test may change."""
    saved = (
        torch.is_grad_enabled(), torch.get_autocast_dtype("cpu"), torch.get_autocast_dtype("cuda"),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(), torch.get_default_dtype(),
        torch.is_autocast_cache_enabled(),
    )
    try:
        yield
    finally:
        torch.set_grad_enabled(saved[0])
        torch.set_autocast_dtype("cpu", saved[1])
        torch.set_autocast_dtype("cuda", saved[2])
        torch.use_deterministic_algorithms(saved[3], warn_only=saved[4])
        torch.set_default_dtype(saved[5])
        torch.set_autocast_cache_enabled(saved[6])
        torch.set_autocast_enabled("cpu", False)
        torch.set_autocast_enabled("cuda", False)


def state_check() -> Any:
    return compile_guards([GlobalStateSource().make_guard(GuardBuilder.GLOBAL_STATE)], f_locals={}, arg_names=[])


def changed(check: Any) -> str:
    assert check() is False and check.reference() is False
    (failure,) = check.explain()
    return failure.reason


def test_all_states_registered_with_spec_names_kept() -> None:
    """The spec's six and the added states are all guarded; the spec's six are restorable."""
    guarded = {s.name for s in global_states.guarded()}
    assert SPEC_SIX | ADDED <= guarded
    assert SPEC_SIX | {"deterministic_algorithms", "deterministic_algorithms_warn_only", "default_dtype"} <= (
        GlobalContext._supported_global_states
    )
    for name in ("inference_mode", "torch_function_mode_stack", "default_device"):
        assert name not in GlobalContext._supported_global_states


def test_unchanged_state_hits() -> None:
    """With nothing changed the check passes repeatedly."""
    c = state_check()
    assert c() and c() and c.reference()


def test_grad_mode_change_names_grad_enabled() -> None:
    """set_grad_enabled(False) is a miss naming grad_enabled."""
    c = state_check()
    torch.set_grad_enabled(False)
    assert changed(c) == "GLOBAL_STATE changed: grad_enabled (expected True, got False)"


def test_autocast_enable_names_the_device_state() -> None:
    """Entering CPU autocast is a miss on autocast_cpu_enabled."""
    c = state_check()
    with torch.autocast("cpu"):
        assert changed(c) == "GLOBAL_STATE changed: autocast_cpu_enabled (expected False, got True)"
    assert c()


def test_autocast_dtype_change_is_readable() -> None:
    """A CPU autocast dtype change reads torch.bfloat16 -> torch.float16."""
    torch.set_autocast_dtype("cpu", torch.bfloat16)
    c = state_check()
    torch.set_autocast_dtype("cpu", torch.float16)
    assert changed(c) == (
        "GLOBAL_STATE changed: autocast_cpu_dtype (expected torch.bfloat16, got torch.float16)"
    )


def test_cuda_autocast_states_on_cpu_build() -> None:
    """The CUDA autocast flag and dtype are guarded too (settable without a GPU)."""
    c = state_check()
    torch.set_autocast_enabled("cuda", True)
    assert changed(c) == "GLOBAL_STATE changed: autocast_enabled (expected False, got True)"
    torch.set_autocast_enabled("cuda", False)
    torch.set_autocast_dtype("cuda", torch.bfloat16)
    assert "autocast_gpu_dtype (expected torch.float16, got torch.bfloat16)" in changed(c)


def test_autocast_cache_change() -> None:
    """Turning the autocast cache off is a miss on autocast_cache_enabled."""
    c = state_check()
    torch.set_autocast_cache_enabled(False)
    assert changed(c) == "GLOBAL_STATE changed: autocast_cache_enabled (expected True, got False)"


def test_deterministic_algorithms_and_warn_only() -> None:
    """use_deterministic_algorithms is a miss; so is warn_only alone."""
    c = state_check()
    torch.use_deterministic_algorithms(True)
    assert changed(c) == "GLOBAL_STATE changed: deterministic_algorithms (expected False, got True)"
    torch.use_deterministic_algorithms(False, warn_only=True)
    assert changed(c) == (
        "GLOBAL_STATE changed: deterministic_algorithms_warn_only (expected False, got True)"
    )


def test_default_dtype_change_is_readable() -> None:
    """set_default_dtype(float64) reads torch.float32 -> torch.float64."""
    c = state_check()
    torch.set_default_dtype(torch.float64)
    assert changed(c) == "GLOBAL_STATE changed: default_dtype (expected torch.float32, got torch.float64)"


def test_default_device_context() -> None:
    """with torch.device('meta') changes the default device and the mode stack."""
    c = state_check()
    with torch.device("meta"):
        assert jgt.default_device() == torch.device("meta")
        reason = changed(c)
    assert "default_device (expected None, got meta)" in reason
    assert "torch_function_mode_stack (expected (), got (DeviceContext,))" in reason
    assert jgt.default_device() is None and c()


def test_set_default_device() -> None:
    """torch.set_default_device is seen the same way."""
    c = state_check()
    torch.set_default_device("meta")
    try:
        assert "default_device (expected None, got meta)" in changed(c)
    finally:
        torch.set_default_device(None)
    assert c()


def test_torch_function_mode_stack_types() -> None:
    """A TorchFunctionMode on the stack is a miss naming its type."""

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    c = state_check()
    with Mode():
        assert jgt.torch_function_mode_types() == (Mode,)
        assert changed(c) == "GLOBAL_STATE changed: torch_function_mode_stack (expected (), got (Mode,))"


def test_inference_mode_and_torch_function_disabled() -> None:
    """inference_mode and DisableTorchFunctionSubclass are misses naming their states."""
    c = state_check()
    with torch.inference_mode():
        reason = changed(c)
    assert "inference_mode (expected False, got True)" in reason
    assert "grad_enabled (expected True, got False)" in reason
    with torch._C.DisableTorchFunctionSubclass():
        assert changed(c) == "GLOBAL_STATE changed: torch_function_enabled (expected True, got False)"
    with torch._C.DisableTorchFunction():
        assert "torch_function_all_disabled (expected False, got True)" in changed(c)


def test_global_context_restores_torch_states() -> None:
    """save, change grad mode, determinism, default dtype and CPU autocast, restore."""
    torch.set_autocast_dtype("cpu", torch.bfloat16)
    ctx = GlobalContext()
    ctx.save()
    snap = ctx.copy_graphstate()
    torch.set_grad_enabled(False)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_default_dtype(torch.float64)
    torch.set_autocast_enabled("cpu", True)
    torch.set_autocast_dtype("cpu", torch.float16)
    ctx.restore_graphstate(snap)
    assert torch.is_grad_enabled() is True
    assert torch.are_deterministic_algorithms_enabled() is False
    assert torch.is_deterministic_algorithms_warn_only_enabled() is False
    assert torch.get_default_dtype() is torch.float32
    assert torch.is_autocast_enabled("cpu") is False
    assert torch.get_autocast_dtype("cpu") is torch.bfloat16
    assert state_check()()


def test_deterministic_writers_keep_each_other() -> None:
    """Restoring deterministic_algorithms keeps warn_only, and the reverse."""
    det = global_states.get("deterministic_algorithms")
    warn = global_states.get("deterministic_algorithms_warn_only")
    torch.use_deterministic_algorithms(False, warn_only=True)
    assert det.write is not None and warn.write is not None
    det.write(True)
    assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    warn.write(False)
    assert torch.are_deterministic_algorithms_enabled() and not torch.is_deterministic_algorithms_warn_only_enabled()
