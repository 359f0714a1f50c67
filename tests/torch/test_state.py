"""torch's global states: GLOBAL_STATE misses name the changed state with readable values,
GlobalContext saves and restores the restorable ones, and the "torch" group checks them all
in one C++ call with exactly their meaning ([Note: The torch state group])."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.overrides import TorchFunctionMode  # noqa: E402

import jitguard.torch as jgt  # noqa: E402
from jitguard import (  # noqa: E402
    GlobalContext,
    GlobalStateSource,
    GuardBuilder,
    cache_of,
    compile_guards,
    global_states,
    specialize,
)
from jitguard._src.torch import state as torch_state  # noqa: E402

SPEC_SIX = {
    "grad_enabled", "autocast_enabled", "autocast_cpu_enabled", "autocast_gpu_dtype",
    "autocast_cpu_dtype", "autocast_cache_enabled",
}
ADDED = {
    "deterministic_algorithms", "deterministic_algorithms_warn_only", "default_dtype",
    "inference_mode", "torch_function_enabled", "torch_function_all_disabled",
    "torch_function_mode_stack", "default_device", "autocast_other_devices", "num_threads",
    "allow_tf32", "allow_fp16_reduce", "allow_bf16_reduce",
}


_fp16 = torch._C._get_cublas_allow_fp16_reduced_precision_reduction
_bf16 = torch._C._get_cublas_allow_bf16_reduced_precision_reduction


@pytest.fixture(autouse=True)
def restore_torch_state() -> Iterator[None]:
    """Put back every torch state a test may change."""
    saved = (
        torch.is_grad_enabled(), torch.get_autocast_dtype("cpu"), torch.get_autocast_dtype("cuda"),
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(), torch.get_default_dtype(),
        torch.is_autocast_cache_enabled(), torch.get_num_threads(),
        torch.get_float32_matmul_precision(), _fp16(), _bf16(),
        {d: torch.get_autocast_dtype(d) for d in torch._C._autocast_supported_devices()},
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
        torch.set_num_threads(saved[7])
        torch.set_float32_matmul_precision(saved[8])
        torch._C._set_cublas_allow_fp16_reduced_precision_reduction(*saved[9])
        torch._C._set_cublas_allow_bf16_reduced_precision_reduction(*saved[10])
        for device, dtype in saved[11].items():
            torch.set_autocast_enabled(device, False)
            torch.set_autocast_dtype(device, dtype)


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


# ---- the "torch" group --------------------------------------------------------------------


def calls_torch_group(source: str) -> bool:
    """The generated code calls a torch group's checker, or makes its reads in line
    (``terms``, [Note: Global-state groups]), which are named after the group."""
    return re.search(r"___check_torch\w*_\d+\(\)|___torch\w*_check_\d+\(\) is True",
                     source) is not None


def uses_group(check: Any) -> bool:
    """The check calls the torch group's checker and reads no torch state one by one."""
    return calls_torch_group(check.source) and not any(
        f"___read_{name}_" in check.source for name in torch_state.STATES
    )


def test_group_covers_every_torch_state() -> None:
    """The "torch" group is registered over exactly the states register_states registers,
    all guarded, and GLOBAL_STATE uses it: one C++ call instead of 19 reads."""
    assert torch_state.group_available()
    (group,) = [g for g in global_states.groups() if g.name == torch_state.GROUP]
    assert global_states.is_active(group)
    assert group.names == torch_state.STATES
    torch_names = [s.name for s in global_states.states() if s.name in torch_state.STATES]
    assert torch_names == list(torch_state.STATES)
    assert set(torch_state.STATES) == SPEC_SIX | ADDED
    assert uses_group(state_check())


def test_global_state_guard_fields_are_registry_states() -> None:
    """Every field torch's GlobalStateGuard compares is mirrored by a state: the JSON has
    exactly the fields the group was written against."""
    from torch._C._dynamo.guards import GlobalStateGuard

    fields = json.loads(GlobalStateGuard().__getstate__())
    assert set(fields) == {
        "grad_mode", "autocast_state", "torch_function", "torch_function_all_disabled",
        "deterministic_algorithms", "deterministic_algorithms_warn_only", "allow_tf32",
        "allow_fp16_reduce", "allow_bf16_reduce", "num_threads", "default_dtype",
    }
    assert len(fields["autocast_state"]["enabled"]) == len(torch._C._autocast_supported_devices())
    assert global_states.get("num_threads").read() == fields["num_threads"]
    assert global_states.get("allow_tf32").read() is fields["allow_tf32"]


@contextlib.contextmanager
def _setting(fn: Callable[[], Any]) -> Iterator[None]:
    fn()
    yield  # the autouse fixture puts the state back


class _Mode(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


# state -> a context in which that state (and only where noted, others too) differs.
CHANGES: dict[str, Callable[[], Any]] = {
    "grad_enabled": lambda: _setting(lambda: torch.set_grad_enabled(False)),
    "autocast_enabled": lambda: _setting(lambda: torch.set_autocast_enabled("cuda", True)),
    "autocast_cpu_enabled": lambda: _setting(lambda: torch.set_autocast_enabled("cpu", True)),
    "autocast_gpu_dtype": lambda: _setting(lambda: torch.set_autocast_dtype("cuda", torch.bfloat16)),
    "autocast_cpu_dtype": lambda: _setting(lambda: torch.set_autocast_dtype("cpu", torch.float16)),
    "autocast_cache_enabled": lambda: _setting(lambda: torch.set_autocast_cache_enabled(False)),
    "autocast_other_devices": lambda: _setting(lambda: torch.set_autocast_enabled("xpu", True)),
    "deterministic_algorithms": lambda: _setting(lambda: torch.use_deterministic_algorithms(True)),
    "deterministic_algorithms_warn_only": lambda: _setting(
        lambda: torch.use_deterministic_algorithms(False, warn_only=True)
    ),
    "default_dtype": lambda: _setting(lambda: torch.set_default_dtype(torch.float64)),
    "num_threads": lambda: _setting(lambda: torch.set_num_threads(torch.get_num_threads() + 1)),
    "allow_tf32": lambda: _setting(lambda: torch.set_float32_matmul_precision("high")),
    "allow_fp16_reduce": lambda: _setting(
        lambda: torch._C._set_cublas_allow_fp16_reduced_precision_reduction(False, False)
    ),
    "allow_bf16_reduce": lambda: _setting(
        lambda: torch._C._set_cublas_allow_bf16_reduced_precision_reduction(False, True)
    ),
    "inference_mode": torch.inference_mode,  # also grad_enabled
    "torch_function_enabled": torch._C.DisableTorchFunctionSubclass,
    "torch_function_all_disabled": torch._C.DisableTorchFunction,  # also torch_function_enabled
    "torch_function_mode_stack": _Mode,
    "default_device": lambda: torch.device("meta"),  # also torch_function_mode_stack
}


# The states those contexts change besides their own.
ALSO_CHANGED = {
    "inference_mode": ("grad_enabled",),
    "torch_function_all_disabled": ("torch_function_enabled",),
    "default_device": ("torch_function_mode_stack",),
}


def test_every_state_has_a_change_case() -> None:
    assert set(CHANGES) == set(torch_state.STATES)


def built_values(c: Any) -> dict[str, Any]:
    """The value each state had when the GLOBAL_STATE guard of ``c`` was built."""
    return {s.name: v for s, v in c.leaves[0].params.values}


def _restore_plain_settings(c: Any) -> None:
    """Put back what the CHANGES settings change (the context managers restore themselves)."""
    built = built_values(c)
    for state, value in c.leaves[0].params.values:
        if state.write is not None and state.read() != value:
            state.write(value)
    torch.set_autocast_enabled("xpu", False)
    torch.set_num_threads(built["num_threads"])
    torch.set_float32_matmul_precision("highest")
    torch._C._set_cublas_allow_fp16_reduced_precision_reduction(True, True)
    torch._C._set_cublas_allow_bf16_reduced_precision_reduction(True, True)


@pytest.mark.parametrize("name", list(CHANGES))
def test_group_and_reference_agree_on_each_state(name: str) -> None:
    """Changing each torch state in turn: the group's check and the reference both fail, the
    reason names the state; once it is back both pass again."""
    c = state_check()
    assert uses_group(c)
    with CHANGES[name]():
        assert global_states.get(name).read() != built_values(c)[name]
        named = set(re.findall(r"(\w+) \(expected ", changed(c)))
    assert named == {name, *ALSO_CHANGED.get(name, ())}
    _restore_plain_settings(c)
    assert c() is True and c.reference() is True


def test_state_equality_matches_global_state_guard() -> None:
    """For each state GlobalStateGuard compares, torch's own guard fails too (the group's C++
    part sees the change, not only the extra Python reads)."""
    from torch._C._dynamo.guards import GlobalStateGuard

    for name in (
        "grad_enabled", "autocast_enabled", "autocast_cpu_enabled", "autocast_cache_enabled",
        "autocast_other_devices", "deterministic_algorithms",
        "deterministic_algorithms_warn_only", "default_dtype", "num_threads", "allow_tf32",
        "allow_fp16_reduce", "allow_bf16_reduce", "torch_function_enabled",
        "torch_function_all_disabled",
    ):
        g = GlobalStateGuard()
        c = state_check()
        with CHANGES[name]():
            assert not g.check(), name
        _restore_plain_settings(c)
        assert g.check(), name


def test_dtype_change_while_autocast_is_on() -> None:
    """Built under CPU autocast (GlobalStateGuard compares the dtype itself then, and the group
    skips its own read): a dtype change inside is still a miss naming autocast_cpu_dtype."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        c = state_check()
        assert uses_group(c) and c()
        torch.set_autocast_dtype("cpu", torch.float16)
        assert changed(c) == (
            "GLOBAL_STATE changed: autocast_cpu_dtype (expected torch.bfloat16, got torch.float16)"
        )
        torch.set_autocast_dtype("cpu", torch.bfloat16)
        assert c()
    assert "autocast_cpu_enabled (expected True, got False)" in changed(c)


def test_other_device_dtype_counts_only_while_enabled() -> None:
    """autocast_other_devices pins a device's dtype while its autocast is on (as torch does)."""
    torch.set_autocast_enabled("xpu", True)
    c = state_check()
    torch.set_autocast_dtype("xpu", torch.bfloat16)
    assert changed(c) == (
        "GLOBAL_STATE changed: autocast_other_devices (expected (xpu: torch.float16), got "
        "(xpu: torch.bfloat16))"
    )
    torch.set_autocast_enabled("xpu", False)
    torch.set_autocast_dtype("xpu", torch.float16)
    c = state_check()
    torch.set_autocast_dtype("xpu", torch.bfloat16)
    assert c() and c.reference()


def test_group_built_under_a_mode_stack() -> None:
    """Built with a mode on the stack: the checker compares the mode types and the default
    device; the same types with another device is a miss naming default_device only."""
    with torch.device("meta"):
        c = state_check()
        assert uses_group(c) and c()
        torch.set_grad_enabled(False)
        assert changed(c) == "GLOBAL_STATE changed: grad_enabled (expected True, got False)"
        torch.set_grad_enabled(True)
    with torch.device("cpu"):
        assert changed(c) == "GLOBAL_STATE changed: default_device (expected meta, got cpu)"
    assert "torch_function_mode_stack (expected (DeviceContext,), got ())" in changed(c)
    with torch.device("meta"), _Mode():
        assert "torch_function_mode_stack" in changed(c)


def test_replaced_torch_state_falls_back_to_reads() -> None:
    """Redefining a torch state retires the group: GLOBAL_STATE reads every state one by one
    (same answers); registering the states again brings the group back."""
    try:
        global_states.register("num_threads", torch.get_num_threads, replace=True)
        c = state_check()
        assert not calls_torch_group(c.source) and "___read_grad_enabled_" in c.source
        assert c() and c.reference()
        torch.set_grad_enabled(False)
        assert changed(c) == "GLOBAL_STATE changed: grad_enabled (expected True, got False)"
    finally:
        torch_state.register_states()
    assert uses_group(state_check())


def test_specialize_entry_uses_the_group() -> None:
    """A specialized function's entry checks the ambient state through the group."""
    sf = specialize(lambda x: x + 1)
    x = torch.ones(2)
    sf(x)
    torch.set_num_threads(torch.get_num_threads() + 1)
    sf(x)
    assert cache_of(sf).stats().compiles == 2
    assert "GLOBAL_STATE changed: num_threads" in cache_of(sf).reasons()[0]


# ---- relaxed dtypes ([Note: Autocast dtypes a capture did not read]) ----------------------


def relaxed_check(*devices: str) -> Any:
    """GLOBAL_STATE over the torch states with each device's dtype in its weaker form."""
    names = list(torch_state.STATES)
    for device in devices:
        dtype, weak = torch_state.DTYPE_STATES[device]
        names[names.index(dtype)] = weak
    create = functools.partial(GuardBuilder.GLOBAL_STATE, states=names)
    return compile_guards([GlobalStateSource().make_guard(create)], f_locals={}, arg_names=[])


@pytest.mark.parametrize("devices", [("cpu",), ("cuda",), ("cpu", "cuda")])
def test_relaxed_group_is_used_and_skips_the_dtype(devices: tuple[str, ...]) -> None:
    """With a dtype left out, GLOBAL_STATE calls the matching relaxed group (no per-state
    read), and a dtype change while that device's autocast is off is a hit."""
    c = relaxed_check(*devices)
    group = "torch_relaxed_" + "_".join(devices)
    # the group's checker, or its reads in line ([Note: Global-state groups])
    assert f"_{group}_" in c.source and "___read_" not in c.source
    for device in devices:
        torch.set_autocast_dtype(device, torch.float16 if device == "cpu" else torch.bfloat16)
    assert c() is True and c.reference() is True


@pytest.mark.parametrize("name", list(CHANGES))
def test_relaxed_group_and_reference_agree_on_each_state(name: str) -> None:
    """Each torch state changed in turn under the fully relaxed group: compiled and reference
    agree; a dtype change alone (autocast off) holds, every other change fails naming it."""
    c = relaxed_check("cpu", "cuda")
    with CHANGES[name]():
        compiled, reference = c(), c.reference()
        assert compiled is reference
        if name in ("autocast_cpu_dtype", "autocast_gpu_dtype"):
            assert compiled is True
        else:
            named = set(re.findall(r"(\w+) \(expected ", changed(c)))
            assert named == {name, *ALSO_CHANGED.get(name, ()), *RELAXED_ALSO.get(name, ())}
    _restore_plain_settings(c)
    assert c() is True and c.reference() is True


# Turning a device's autocast on also changes its weaker dtype state (None -> the dtype).
RELAXED_ALSO = {
    "autocast_enabled": ("autocast_gpu_dtype_while_enabled",),
    "autocast_cpu_enabled": ("autocast_cpu_dtype_while_enabled",),
}


def test_relaxed_dtype_still_pinned_while_autocast_is_on() -> None:
    """Built under CPU autocast, the weaker state holds the dtype: changing it is a miss
    naming autocast_cpu_dtype_while_enabled, in the group check and the reference alike."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        c = relaxed_check("cpu", "cuda")
        assert c()
        torch.set_autocast_dtype("cpu", torch.float16)
        assert changed(c) == (
            "GLOBAL_STATE changed: autocast_cpu_dtype_while_enabled (expected torch.bfloat16, "
            "got torch.float16)"
        )
        torch.set_autocast_dtype("cpu", torch.bfloat16)
        assert c()


def test_global_state_states_option_errors() -> None:
    """states= names unknown states or is a bare string: a GuardKindError that says which."""
    from jitguard import GuardKindError

    bad = functools.partial(GuardBuilder.GLOBAL_STATE, states=["grad_enabled", "no_such"])
    with pytest.raises(GuardKindError, match=r"no global state named 'no_such'; registered: \["):
        compile_guards([GlobalStateSource().make_guard(bad)], f_locals={}, arg_names=[])
    text = functools.partial(GuardBuilder.GLOBAL_STATE, states="grad_enabled")
    with pytest.raises(GuardKindError, match=r"write states=\['grad_enabled'\]"):
        compile_guards([GlobalStateSource().make_guard(text)], f_locals={}, arg_names=[])


def test_compile_pins_a_dtype_the_function_reads() -> None:
    """A function that reads torch.get_autocast_dtype itself bakes the value in: a change of
    it recompiles."""
    f = jgt.compile(lambda x: x.to(torch.get_autocast_dtype("cpu")))
    x = torch.randn(2)
    assert f(x).dtype == torch.bfloat16
    torch.set_autocast_dtype("cpu", torch.float16)
    assert f(x).dtype == torch.float16
    assert cache_of(f).stats().compiles == 2


def _autocast_matmul(x: Any) -> Any:
    with torch.autocast("cpu"):
        return x @ x.T


def test_compile_pins_the_dtype_of_an_indexed_device_string() -> None:
    """torch.autocast("cpu:0") inside the function reads the CPU dtype: a change of it
    recompiles and the result follows."""
    def f(x: Any) -> Any:
        with torch.autocast("cpu:0"):
            return torch.mm(x, x)

    cf = jgt.compile(f)
    x = torch.randn(2, 2)
    assert cf(x).dtype == torch.bfloat16
    torch.set_autocast_dtype("cpu", torch.float16)
    assert cf(x).dtype == torch.float16 and cache_of(cf).stats().compiles == 2


def test_autocast_set_directly_agrees_with_eager() -> None:
    """A function that calls torch.set_autocast_enabled itself agrees with eager (Dynamo
    traces or refuses it; either way the result has eager's dtype)."""
    def f(x: Any) -> Any:
        torch.set_autocast_enabled("cpu", True)
        try:
            return torch.mm(x, x)
        finally:
            torch.set_autocast_enabled("cpu", False)

    cf = jgt.compile(f)
    x = torch.randn(2, 2)
    assert cf(x).dtype == f(x).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")


def test_autocast_block_is_captured() -> None:
    """A torch.autocast block inside the function is captured (not run eagerly)."""
    cf = jgt.compile(lambda x: _autocast_matmul(x))
    cf(torch.randn(2, 2))
    (info,) = jgt.capture_info(cf).values()
    assert info.failure is None and info.graph_module is not None


def test_specialize_of_ints_ignores_torch_state(dispatch_mode: str) -> None:
    """[Note: Global states in play]: a pure-Python function on ints compiles once under
    no_grad and another thread count; with a tensor argument, no_grad is a recompile."""
    import jitguard as jg

    ints = jg.specialize(lambda n: n + 1)
    tensors = jg.specialize(lambda n, t: t + n)
    threads = torch.get_num_threads()
    t = torch.ones(2)
    try:
        assert ints(1) == 2 and torch.equal(tensors(1, t), t + 1)
        with torch.no_grad():
            assert ints(1) == 2 and torch.equal(tensors(1, t), t + 1)
        torch.set_num_threads(max(1, threads - 1) if threads > 1 else 2)
        assert ints(1) == 2
    finally:
        torch.set_num_threads(threads)
    assert jg.cache_of(ints).stats().compiles == 1
    assert jg.cache_of(tensors).stats().compiles == 2
    assert "GLOBAL_STATE changed: grad_enabled" in jg.cache_of(tensors).reasons()[0]
