"""GLOBAL_STATE: the guard kind on ambient process state (grad mode and the like), read
from the global-state registry. Like SHAPE_ENV (``compiler.shape``) it reads no frame value.
Registered by ``builtin_kinds``.

May import: errors, global_state, compiler.kinds.
"""

from __future__ import annotations

from typing import Any

from ..errors import GuardKindError, JitGuardError
from ..global_state import global_states
from .kinds import EmitContext, GuardKind

__all__ = ["GlobalStateKind"]


class GlobalStateKind(GuardKind):
    """Every guarded state of the global-state registry still has its build-time value; with
    ``states=`` (names), exactly those states, guarded or not: a compiler whose artifact does
    not read some state leaves it out (see ``CompileRequest.ignore_global_states``).

    The params are a ``GlobalStateSnapshot``. ``holds`` (the reference) and ``reason`` read
    each state; the generated check calls each group's fast checker and reads only the
    states no group covers ([Note: Global-state groups]): the same meaning, cheaper.
    """

    name = "GLOBAL_STATE"
    specificity = 0  # every entry has the same
    cost = 8
    reads_value = False

    def expect(self, value: Any, guard: Any, **options: Any) -> Any:
        states = options.pop("states", None)
        super().expect(value, guard, **options)
        if isinstance(states, str):
            raise GuardKindError(
                f"GLOBAL_STATE states= takes an iterable of state names, got the string "
                f"{states!r}; write states=[{states!r}]"
            )
        try:
            return global_states.snapshot(states)
        except JitGuardError as e:
            raise GuardKindError(f"GLOBAL_STATE on {guard.name}: {e}") from None

    def holds(self, value: Any, params: Any) -> bool:
        # A read that raises is a changed state (the generated code fails on it too); holding
        # instead of raising lets ``reason`` say which state could not be read.
        for state, expected in params.values:
            try:
                if not state.read() == expected:
                    return False
            except Exception:
                return False
        return True

    def emit(self, var: Any, params: Any, ctx: EmitContext) -> str:
        terms = []
        for group, check in params.checks:
            inline = getattr(check, "terms", None)
            if inline is None:
                terms.append(f"{ctx.const(check, 'check_' + group.name)}()")
                continue
            # the checker's own reads in line ([Note: Global-state groups])
            for read, expected in inline:
                named = getattr(read, "func", read)  # a functools.partial: its function's
                name = str(getattr(named, "__name__", "read")).strip("_") or "read"
                hint = f"{group.name}_{name}"
                call = f"{ctx.const(read, hint)}()"
                if expected is None or expected is True or expected is False:
                    terms.append(f"{call} is {expected!r}")
                else:
                    terms.append(f"{call} == {ctx.const(expected, hint + '_was')}")
        terms += [
            f"{ctx.const(s.read, 'read_' + s.name)}() == {ctx.const(v, s.name)}"
            for s, v in params.rest
        ]
        return " and ".join(terms) or "True"

    def code(self, name: Any, params: Any) -> str:
        names = ", ".join(s.name for s, _ in params.values)
        return f"GLOBAL_STATE unchanged: {names or '(no states)'}"

    def reason(self, name: Any, value: Any, params: Any) -> str:
        changed = []
        for state, expected in params.values:
            try:
                now = state.read()
            except Exception as e:
                changed.append(f"{state.name} (reading it raised {type(e).__name__}: {e})")
                continue
            if not now == expected:
                changed.append(
                    f"{state.name} (expected {state.describe(expected)}, got {state.describe(now)})"
                )
        if not changed:
            # Only a group checker that breaks its contract gets here.
            failed = []
            for group, check in params.checks:
                try:
                    ok = check()
                except Exception:
                    ok = False
                if not ok:
                    failed.append(group.name)
            changed.append(
                f"group {', '.join(failed) or '(none)'} failed with every member unchanged"
            )
        return "GLOBAL_STATE changed: " + ", ".join(changed)
