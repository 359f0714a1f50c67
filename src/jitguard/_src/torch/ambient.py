"""TORCH_GLOBAL_STATE: torch's ambient state checked the way torch checks it, in one C++
call, for JITs that want the cheap ambient guard.

May import: jitguard._src.global_state, jitguard._src.compiler.kinds,
jitguard._src.torch.state, torch.

# [Note: TORCH_GLOBAL_STATE]
# GLOBAL_STATE reads every registered state in Python and compares it: with torch's fourteen
# states that is ~1.3 us of reads per check (the autocast reads parse a device string each
# time), more than a tensor guard. torch's own ambient guard is a C++ snapshot,
# ``torch._C._dynamo.guards.GlobalStateGuard``, whose ``check()`` (~0.25 us) compares grad
# mode, autocast (enabled for every device type, the dtype where enabled, the cache), the
# default dtype, determinism and warn-only, torch-function enablement, the thread count and
# the TF32/reduced-precision flags. TORCH_GLOBAL_STATE is that check plus the three states
# it does not cover, read in Python: the torch-function mode stack, the default device and
# inference mode. It is stricter than GLOBAL_STATE over torch's states in two ways (thread
# count, TF32 flags) and looser in one: an autocast dtype changed while that device's
# autocast is off is not a miss (it has no effect until autocast is entered, which is).
# Use it instead of GLOBAL_STATE when every registered state is torch's (or with GLOBAL_STATE
# over the others); the failure text names the registry's states where it can
# (``TORCH_GLOBAL_STATE changed: grad_enabled (expected True, got False)``), else torch's.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from ..compiler.kinds import EmitContext, GuardKind
from ..global_state import global_states
from .state import default_device, torch_function_mode_types

__all__ = ["TorchGlobalState", "available"]

_GlobalStateGuard: Any
try:
    from torch._C._dynamo.guards import GlobalStateGuard as _GlobalStateGuard
except ImportError:  # pragma: no cover - present in torch 2.13
    _GlobalStateGuard = None

_is_inference = torch.is_inference_mode_enabled
_len_stack = torch._C._len_torch_function_stack


def available() -> bool:
    return _GlobalStateGuard is not None


def extras() -> tuple[Any, ...]:
    """What GlobalStateGuard leaves out, in one call: (inference mode,) when the mode stack is
    empty, else (inference mode, mode types, default device)."""
    if not _len_stack():
        return (_is_inference(),)
    return (_is_inference(), torch_function_mode_types(), default_device())


class AmbientSpec(NamedTuple):
    snapshot: Any  # GlobalStateGuard
    extras: tuple[Any, ...]
    states: tuple[tuple[Any, Any], ...]  # (GlobalState, value) of the registry, for reasons


class TorchGlobalState(GuardKind):
    """torch's ambient state unchanged, as torch's GlobalStateGuard sees it, plus the
    torch-function mode stack, the default device and inference mode."""

    name = "TORCH_GLOBAL_STATE"
    cost = 7
    reads_value = False

    def expect(self, value: Any, guard: Any, **options: Any) -> AmbientSpec:
        super().expect(value, guard, **options)
        if _GlobalStateGuard is None:  # pragma: no cover
            raise RuntimeError("this torch build has no torch._C._dynamo.guards.GlobalStateGuard")
        states = tuple((s, s.read()) for s in global_states.guarded())
        return AmbientSpec(_GlobalStateGuard(), extras(), states)

    def holds(self, value: Any, params: AmbientSpec) -> bool:
        return bool(params.snapshot.check() and extras() == params.extras)

    def emit(self, var: Any, params: AmbientSpec, ctx: EmitContext) -> str:
        return (
            f"{ctx.const(params.snapshot.check, 'global_state_guard')}() "
            f"and {ctx.const(extras, 'ambient_extras')}() == {ctx.const(params.extras, 'extras')}"
        )

    def code(self, name: Any, params: AmbientSpec) -> str:
        return "TORCH_GLOBAL_STATE unchanged (torch's GlobalStateGuard, mode stack, default device, inference mode)"

    def reason(self, name: Any, value: Any, params: AmbientSpec) -> str:
        changed = []
        for state, expected in params.states:
            try:
                now = state.read()
            except Exception as e:
                changed.append(f"{state.name} (reading it raised {type(e).__name__})")
                continue
            if not now == expected:
                changed.append(f"{state.name} (expected {state.describe(expected)}, got {state.describe(now)})")
        if not changed:
            torch_reason = params.snapshot.reason().strip()
            changed.append(torch_reason or "the state changed")
        return "TORCH_GLOBAL_STATE changed: " + ", ".join(changed)
