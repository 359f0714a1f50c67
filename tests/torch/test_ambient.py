"""TORCH_GLOBAL_STATE: torch's ambient state in one C++ check (GlobalStateGuard) plus the
mode stack, default device and inference mode."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard.torch as jgt  # noqa: E402
from jitguard import GlobalStateSource, compile_guards  # noqa: E402


@pytest.fixture(autouse=True)
def restore() -> Iterator[None]:
    """Put back grad mode, thread count and CPU autocast dtype."""
    saved = torch.is_grad_enabled(), torch.get_num_threads(), torch.get_autocast_dtype("cpu")
    try:
        yield
    finally:
        torch.set_grad_enabled(saved[0])
        torch.set_num_threads(saved[1])
        torch.set_autocast_dtype("cpu", saved[2])


def ambient() -> Any:
    return compile_guards(
        [GlobalStateSource().make_guard(jgt.TORCH_GLOBAL_STATE)], f_locals={}, arg_names=[]
    )


def reason(check: Any) -> str:
    assert check() is False and check.reference() is False
    return check.explain()[0].reason


def test_unchanged_hits() -> None:
    """Nothing changed: a hit, in one C++ call and one Python read."""
    c = ambient()
    assert c() and c.reference()
    assert "___global_state_guard" in c.source and "___ambient_extras" in c.source


def test_change_names_the_registry_state() -> None:
    """A grad-mode change names grad_enabled with readable values."""
    c = ambient()
    torch.set_grad_enabled(False)
    assert reason(c) == "TORCH_GLOBAL_STATE changed: grad_enabled (expected True, got False)"


def test_states_only_torch_checks_use_its_reason() -> None:
    """The thread count (not a registry state) is a miss with torch's own reason."""
    c = ambient()
    torch.set_num_threads(torch.get_num_threads() + 1)
    assert reason(c) == "TORCH_GLOBAL_STATE changed: num_threads"


def test_mode_stack_and_default_device_are_checked() -> None:
    """with torch.device('meta') is a miss naming the mode stack and the device."""
    c = ambient()
    with torch.device("meta"):
        text = reason(c)
    assert "torch_function_mode_stack (expected (), got (DeviceContext,))" in text
    assert "default_device (expected None, got meta)" in text
    assert c()


def test_autocast_enabled_is_a_miss_dtype_alone_is_not() -> None:
    """Entering autocast is a miss; an autocast dtype change with autocast off is not."""
    c = ambient()
    with torch.autocast("cpu"):
        assert "autocast_cpu_enabled (expected False, got True)" in reason(c)
    torch.set_autocast_dtype("cpu", torch.float16)
    assert c() and c.reference()


def test_inference_mode_is_a_miss() -> None:
    """inference_mode is a miss (grad mode and inference mode both named)."""
    c = ambient()
    with torch.inference_mode():
        text = reason(c)
    assert "inference_mode (expected False, got True)" in text and "grad_enabled" in text
