"""TORCH_GUARD_TREE: the part of an entry's check that jitguard hands to torch's own guard
tree (the guards it could not convert).

May import: jitguard._src.compiler.kinds, jitguard._src.errors. No torch: the tree comes in
as a ``Delegation`` whose callables the compiler on Dynamo made (``torch.compile``).

# [Note: Delegating to torch's guard tree]
# A Dynamo guard jitguard cannot convert is not dropped: the capture keeps it in torch's
# guard manager (built with a guard filter that keeps exactly the unconverted guards, see
# [Note: Capturing with Dynamo]), and the entry gets one TORCH_GUARD_TREE guard over every
# parameter. It holds when torch's tree accepts the frame's locals (the parameters, plus
# the captured function's free variables, read from its cells at each call). Sound (torch
# checks what it would check), slower than a converted guard, and visible: its ``code``
# lists the delegated kinds, and each entry's count of delegated guards is kept
# (``jitguard.torch.compile`` reports them per kind).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

from ..compiler.kinds import EmitContext, RelationalKind
from ..errors import GuardKindError

__all__ = ["Delegation", "TorchGuardTree"]


@dataclasses.dataclass(frozen=True, eq=False)
class Delegation:
    """What TORCH_GUARD_TREE checks: ``check(*values)`` (True when torch's tree accepts the
    parameters' values), ``explain(*values)`` (torch's failing parts), the delegated guards'
    kinds and names (for display)."""

    check: Callable[..., bool]
    explain: Callable[..., list[str]]
    kinds: tuple[str, ...]
    names: tuple[str, ...]

    def summary(self) -> str:
        counts = Counter(self.kinds)
        return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(counts.items()))


class TorchGuardTree(RelationalKind):
    """``functools.partial(TORCH_GUARD_TREE, delegation=Delegation(...), others=(...))`` on
    the first parameter's source, ``others`` the rest: torch's guard tree accepts the call
    ([Note: Delegating to torch's guard tree])."""

    name = "TORCH_GUARD_TREE"
    cost = 50

    def extra_sources(self, guard: Any, **options: Any) -> tuple[Any, ...]:
        return tuple(options.get("others", ()))

    def expect(self, value: Any, guard: Any, **options: Any) -> Delegation:
        delegation = options.pop("delegation", None)
        options.pop("others", None)
        if not isinstance(delegation, Delegation) or options:
            raise GuardKindError(
                f"TORCH_GUARD_TREE on {guard.name} takes delegation= (a Delegation) and "
                f"others= (the other parameters' sources), got {sorted(options)}"
            )
        return delegation

    def holds(self, value: Any, params: Delegation) -> bool:
        try:
            return bool(params.check(*value))
        except Exception:
            return False

    def emit(self, var: Any, params: Delegation, ctx: EmitContext) -> str:
        return f"{ctx.const(params.check, 'torch_guard_tree')}({', '.join(var)})"

    def code(self, name: Any, params: Delegation) -> str:
        return f"torch's guard tree holds ({len(params.kinds)} delegated: {params.summary()})"

    def reason(self, name: Any, value: Any, params: Delegation) -> str:
        try:
            parts = params.explain(*value)
        except Exception as e:  # torch raised while explaining: say so
            parts = [f"explaining raised {type(e).__name__}: {e}"]
        first = parts[0] if parts else "(torch gave no reason)"
        more = f" (+{len(parts) - 1} more)" if len(parts) > 1 else ""
        return f"{first}{more} [torch's guard tree, delegated]"
