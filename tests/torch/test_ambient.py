"""TORCH_GLOBAL_STATE: now an alias of GLOBAL_STATE, which checks torch's ambient state in
one C++ call itself ([Note: TORCH_GLOBAL_STATE], [Note: The torch state group])."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard.torch as jgt  # noqa: E402
from jitguard import GlobalStateSource, GuardBuilder, compile_guards, guard_kinds  # noqa: E402
from jitguard._src.torch import ambient  # noqa: E402


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


def ambient_check() -> Any:
    return compile_guards(
        [GlobalStateSource().make_guard(jgt.TORCH_GLOBAL_STATE)], f_locals={}, arg_names=[]
    )


def reason(check: Any) -> str:
    assert check() is False and check.reference() is False
    return str(check.explain()[0].reason)


def test_alias_of_global_state() -> None:
    """The public name is GLOBAL_STATE's create_fn: one kind, one meaning."""
    assert jgt.TORCH_GLOBAL_STATE is GuardBuilder.TORCH_GLOBAL_STATE is GuardBuilder.GLOBAL_STATE
    assert "TORCH_GLOBAL_STATE" not in guard_kinds() and "GLOBAL_STATE" in guard_kinds()
    c = ambient_check()
    assert c.leaves[0].guard.guard_types == ["GLOBAL_STATE"]


def test_unchanged_hits_in_one_call() -> None:
    """Nothing changed: a hit, through torch's C++ GlobalStateGuard (the torch group)."""
    assert ambient.available()
    c = ambient_check()
    assert c() and c.reference()
    # the group's checker, or its reads in line ([Note: Global-state groups])
    assert re.search(r"___check_torch\w*_\d+\(\)|___torch\w*_check_\d+\(\) is True", c.source)


def test_change_names_the_registry_state() -> None:
    """A grad-mode change names grad_enabled with readable values."""
    c = ambient_check()
    torch.set_grad_enabled(False)
    assert reason(c) == "GLOBAL_STATE changed: grad_enabled (expected True, got False)"


def test_thread_count_is_a_registry_state() -> None:
    """The thread count (which torch's guard compares) is a state of its own now."""
    c = ambient_check()
    n = torch.get_num_threads()
    torch.set_num_threads(n + 1)
    assert reason(c) == f"GLOBAL_STATE changed: num_threads (expected {n}, got {n + 1})"


def test_mode_stack_and_default_device_are_checked() -> None:
    """with torch.device('meta') is a miss naming the mode stack and the device."""
    c = ambient_check()
    with torch.device("meta"):
        text = reason(c)
    assert "torch_function_mode_stack (expected (), got (DeviceContext,))" in text
    assert "default_device (expected None, got meta)" in text
    assert c()


def test_autocast_enabled_and_dtype_are_misses() -> None:
    """Entering autocast is a miss; so is an autocast dtype change with autocast off (the old
    TORCH_GLOBAL_STATE let that one through; GLOBAL_STATE never did)."""
    c = ambient_check()
    with torch.autocast("cpu"):
        assert "autocast_cpu_enabled (expected False, got True)" in reason(c)
    torch.set_autocast_dtype("cpu", torch.float16)
    assert "autocast_cpu_dtype (expected torch.bfloat16, got torch.float16)" in reason(c)


def test_inference_mode_is_a_miss() -> None:
    """inference_mode is a miss (grad mode and inference mode both named)."""
    c = ambient_check()
    with torch.inference_mode():
        text = reason(c)
    assert "inference_mode (expected False, got True)" in text and "grad_enabled" in text
