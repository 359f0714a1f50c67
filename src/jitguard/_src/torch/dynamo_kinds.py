"""Guard kinds for the torch-specific assumptions TorchDynamo guards that jitguard's torch
integration had no kind for: a tensor's dimension markings, a dict's version tag, a
dispatch key set, and the ambient states Dynamo checks on their own (forward-AD level,
functorch stack, saved-tensors hooks, default device). ``install()`` registers them.

May import: jitguard._src.errors, jitguard._src.compiler.kinds, jitguard._src.compiler.values,
jitguard._src.compiler.bulk, jitguard._src.compiler.coverage, jitguard._src.torch.adapter_sources,
torch.

Each kind's ``code`` is the Python code part Dynamo installs for the same guard, and its
reason restates that code, then what was found.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple, Optional

import torch

from ..compiler import bulk, coverage
from ..compiler.kinds import EmitContext, GuardKind
from ..compiler.values import show
from ..errors import GuardKindError
from . import adapter_sources as adapter

__all__ = [
    "AutogradSavedTensorsHooks",
    "DefaultDevice",
    "DictVersion",
    "DimensionMarking",
    "DispatchKeySetMatch",
    "DualLevel",
    "FunctorchStackMatch",
    "MARKING_ATTRS",
    "dynamo_kinds",
]

#: The tensor attributes ``torch._dynamo.mark_dynamic`` and friends set.
MARKING_ATTRS = (
    "_dynamo_dynamic_indices",
    "_dynamo_weak_dynamic_indices",
    "_dynamo_unbacked_indices",
    "_dynamo_strict_unbacked_indices",
    "_dynamo_static_indices",
)
_MARKS = frozenset(MARKING_ATTRS)
_GATE = "_dynamo_unbacked_indices"
_DEPENDENT = ("_dynamo_shape_ids", "_dynamo_unbacked_bounds")
_MISSING = object()


class MarkingSpec(NamedTuple):
    """Per marking attribute: the set it had (a marking at run time must be a subset of it)
    or None (it must be absent); per dependent attribute: the value it had, compared only
    while the gate attribute is present."""

    attrs: tuple[tuple[str, Optional[frozenset[int]]], ...]
    dependent: tuple[tuple[str, Any], ...]


def _marks_hold(value: Any, spec: MarkingSpec) -> bool:
    for attr, allowed in spec.attrs:
        has = hasattr(value, attr)
        if allowed is None:
            if has:
                return False
        elif has and not set(getattr(value, attr, set())).issubset(allowed):
            return False
    if spec.dependent and hasattr(value, _GATE):
        for attr, expected in spec.dependent:
            if not getattr(value, attr, None) == expected:
                return False
    return True


def _all_marks_hold(specs: tuple[MarkingSpec, ...], *values: Any) -> bool:
    return all(_marks_hold(v, spec) for v, spec in zip(values, specs, strict=True))


class DimensionMarking(GuardKind):
    """The tensor's dimension markings (``mark_dynamic``, ``maybe_mark_dynamic``,
    ``mark_unbacked``, ``mark_static``) allow the entry: a marking attribute absent at
    compile time is still absent, one present holds a subset of what it held. Part of
    Dynamo's TENSOR_MATCH (its DIMENSION_DYNAMIC_MARKING leaf).

    The generated check takes the common cases without a call (an empty instance
    ``__dict__``) or in one C call: a tensor whose instance
    ``__dict__`` holds none of the marking attributes passes whatever it was compiled with
    (an absent marking is always allowed). Only a tensor that carries a marking runs the
    full test. (Markings are instance attributes; a class attribute of that name on a
    tensor type is not looked for.)"""

    name = "DIMENSION_DYNAMIC_MARKING"
    batches = True
    cost = 7  # after TENSOR_MATCH (6) on the same source: the value is then a tensor

    def expect(self, value: Any, guard: Any, **options: Any) -> MarkingSpec:
        super().expect(value, guard, **options)
        attrs: list[tuple[str, Optional[frozenset[int]]]] = []
        for attr in MARKING_ATTRS:
            if hasattr(value, attr):
                attrs.append((attr, frozenset(getattr(value, attr))))
            else:
                attrs.append((attr, None))
        dependent: tuple[tuple[str, Any], ...] = ()
        if hasattr(value, _GATE):
            dependent = tuple((a, getattr(value, a, None)) for a in _DEPENDENT)
        return MarkingSpec(tuple(attrs), dependent)

    def holds(self, value: Any, params: MarkingSpec) -> bool:
        return _marks_hold(value, params)

    def sample_options(self, value: Any) -> list[dict[str, Any]]:
        # Only ever guarded after TENSOR_MATCH (its check reads the instance ``__dict__``):
        # the differential fuzz builds it on tensors only.
        return [{}] if isinstance(value, torch.Tensor) else []

    def emit(self, var: str, params: MarkingSpec, ctx: EmitContext) -> str:
        full = f"{ctx.const(_marks_hold, 'marks_hold')}({var}, {ctx.const(params, 'marks')})"
        # an empty instance dict (the usual tensor and parameter) is tested first: no call
        return (f"(not {var}.__dict__ or "
                f"{ctx.const(_MARKS, 'marking_attrs')}.isdisjoint({var}.__dict__) or {full})")

    def emit_batch(self, vars: Sequence[str], params: Sequence[MarkingSpec],
                   ctx: EmitContext) -> str:
        # [Note: Batched leaves]: one call over every tensor (C when built) for the common
        # case, no marking attribute in any instance dict; else the full test of each
        values = ", ".join(vars)
        fast = f"{ctx.const(bulk.dicts_lack, 'dicts_lack')}({ctx.const(MARKING_ATTRS, 'marking_attrs')}, {values})"
        full = f"{ctx.const(_all_marks_hold, 'marks_all')}({ctx.const(tuple(params), 'marks')}, {values})"
        return f"({fast} or {full})"

    def code(self, name: str, params: MarkingSpec) -> str:
        parts = []
        for attr, allowed in params.attrs:
            if allowed is None:
                parts.append(f"hasattr({name}, {attr!r}) == False")
            else:
                shown = "{" + ", ".join(map(str, sorted(allowed))) + "}" if allowed else "set()"
                parts.append(
                    f"((getattr({name}, {attr!r}, set()).issubset({shown})) if "
                    f"hasattr({name}, {attr!r}) else True)"
                )
        for attr, expected in params.dependent:
            parts.append(
                f"((getattr({name}, {attr!r}, None) == {expected!r}) if hasattr({name}, "
                f"{_GATE!r}) else True)"
            )
        return " and ".join(parts)

    def reason(self, name: str, value: Any, params: MarkingSpec) -> str:
        for attr, allowed in params.attrs:
            has = hasattr(value, attr)
            if allowed is None and has:
                return (
                    f"hasattr({name}, {attr!r}) == False failed: it is set to "
                    f"{show(getattr(value, attr, None))} (marked after compiling)"
                )
            if allowed is not None and has:
                now = set(getattr(value, attr, set()))
                if not now.issubset(allowed):
                    return (
                        f"getattr({name}, {attr!r}).issubset({sorted(allowed)}) failed: got "
                        f"{sorted(now)}"
                    )
        return f"{self.code(name, params)} failed"


# [Note: Skipping structure guards by version tags]: a tensor whose instance dict and
# classes hold no marking attribute passes while they still hold none (a mark_dynamic
# stores into that dict and changes its tag).
coverage.cover(DimensionMarking, coverage.absent_from_instance_dict(_MARKS))


class DictVersion(GuardKind):
    """The dict's PEP 509 version tag is unchanged: no write of any kind since compile."""

    name = "DICT_VERSION"
    cost = 3

    def expect(self, value: Any, guard: Any, **options: Any) -> int:
        super().expect(value, guard, **options)
        if not isinstance(value, dict):
            raise GuardKindError(f"DICT_VERSION on {guard.name}: expected a dict, found {show(value)}")
        return adapter.dict_version(value)

    def holds(self, value: Any, params: int) -> bool:
        return isinstance(value, dict) and adapter.dict_version(value) == params

    def emit(self, var: str, params: int, ctx: EmitContext) -> str:
        return f"{ctx.const(adapter.dict_version, 'dict_version')}({var}) == {ctx.const(params, 'version')}"

    def code(self, name: str, params: int) -> str:
        return f"___dict_version({name}) == {params}"

    def reason(self, name: str, value: Any, params: int) -> str:
        return f"{self.code(name, params)} failed: the dict was written to since compiling"


class DispatchKeySetMatch(GuardKind):
    """The value is a ``DispatchKeySet`` equal to the one at compile time."""

    name = "DISPATCH_KEY_SET_MATCH"
    cost = 3

    def expect(self, value: Any, guard: Any, **options: Any) -> tuple[int, str]:
        super().expect(value, guard, **options)
        if not isinstance(value, torch._C.DispatchKeySet):
            raise GuardKindError(
                f"DISPATCH_KEY_SET_MATCH on {guard.name}: expected a DispatchKeySet, found "
                f"{show(value)}"
            )
        return (value.raw_repr(), str(value))

    def holds(self, value: Any, params: tuple[int, str]) -> bool:
        return isinstance(value, torch._C.DispatchKeySet) and value.raw_repr() == params[0]

    def emit(self, var: str, params: tuple[int, str], ctx: EmitContext) -> str:
        return f"{var}.raw_repr() == {ctx.const(params[0], 'keys')}"

    def code(self, name: str, params: tuple[int, str]) -> str:
        return f"{name}.raw_repr() == {params[1]}.raw_repr()"

    def reason(self, name: str, value: Any, params: tuple[int, str]) -> str:
        return f"{self.code(name, params)} failed: got {value}"


class _Ambient(GuardKind):
    """A kind over ambient state: no frame value (its source is ``GlobalStateSource()``);
    the params are the state at compile time, read by ``_read``."""

    reads_value = False
    cost = 8

    def _read(self) -> Any:
        raise NotImplementedError

    def expect(self, value: Any, guard: Any, **options: Any) -> Any:
        super().expect(value, guard, **options)
        return self._read()

    def holds(self, value: Any, params: Any) -> bool:
        try:
            return bool(self._read() == params)
        except Exception:
            return False

    def reason(self, name: Any, value: Any, params: Any) -> str:
        try:
            now = repr(self._read())
        except Exception as e:
            now = f"reading it raised {type(e).__name__}: {e}"
        return f"{self.code(name, params)} failed: got {now}"


class DualLevel(_Ambient):
    """The forward-mode AD level is the one at compile time."""

    name = "DUAL_LEVEL"

    def _read(self) -> int:
        return adapter.forward_ad_level()

    def emit(self, var: Any, params: int, ctx: EmitContext) -> str:
        return f"{ctx.const(adapter.forward_ad_level, 'forward_ad_level')}() == {ctx.const(params, 'level')}"

    def code(self, name: Any, params: int) -> str:
        return f"torch.autograd.forward_ad._current_level == {params}"


class FunctorchStackMatch(_Ambient):
    """The functorch interpreter stack (vmap, grad, jvp, functionalize levels) is the one
    at compile time."""

    name = "FUNCTORCH_STACK_MATCH"

    def _read(self) -> Any:
        return adapter.functorch_states()

    def holds(self, value: Any, params: Any) -> bool:
        try:
            return adapter.functorch_states_match(params)
        except Exception:
            return False

    def emit(self, var: Any, params: Any, ctx: EmitContext) -> str:
        return f"{ctx.const(adapter.functorch_states_match, 'functorch_match')}({ctx.const(params, 'states')})"

    def code(self, name: Any, params: Any) -> str:
        return f"torch._functorch.pyfunctorch.compare_functorch_state({params})"


class AutogradSavedTensorsHooks(_Ambient):
    """The innermost saved-tensors hooks are the ones at compile time (by id, when Dynamo
    could inline them; else none that it could)."""

    name = "AUTOGRAD_SAVED_TENSORS_HOOKS"

    def _read(self) -> Any:
        return adapter.saved_tensors_hooks_ids()

    def emit(self, var: Any, params: Any, ctx: EmitContext) -> str:
        read = f"{ctx.const(adapter.saved_tensors_hooks_ids, 'saved_tensors_hooks_ids')}()"
        if params is None:
            # No hooks at all is the common case: one C call decides it.
            fn, arg = adapter.top_saved_tensors_hooks_read()
            top = f"{ctx.const(fn, 'top_saved_tensors_hooks')}({arg!r})"
            return f"({top} is None or {read} is None)"
        return f"{read} == {ctx.const(params, 'hooks')}"

    def code(self, name: Any, params: Any) -> str:
        return f"torch._functorch.aot_autograd.utils.top_saved_tensors_hooks ids == {params}"

    def fact(self, params: Any) -> Optional[tuple[str, Hashable]]:
        return None


class DefaultDevice(_Ambient):
    """``torch.utils._device.CURRENT_DEVICE`` (the device ``torch.device(...)`` as a context
    manager or ``set_default_device`` put in force) is the one at compile time."""

    name = "DEFAULT_DEVICE"
    cost = 2

    def _read(self) -> Any:
        return adapter.current_default_device()

    def emit(self, var: Any, params: Any, ctx: EmitContext) -> str:
        module, name = adapter.default_device_home()
        read = f"{ctx.const(module, 'utils_device')}.{name}"
        if params is None:
            return f"{read} is None"
        return f"{read} == {ctx.const(params, 'device')}"

    def code(self, name: Any, params: Any) -> str:
        return f"utils_device.CURRENT_DEVICE == {params!r}"


def dynamo_kinds() -> tuple[GuardKind, ...]:
    """One instance of each kind here, for ``install()`` to register."""
    return (
        DimensionMarking(),
        DictVersion(),
        DispatchKeySetMatch(),
        DualLevel(),
        FunctorchStackMatch(),
        AutogradSavedTensorsHooks(),
        DefaultDevice(),
    )
