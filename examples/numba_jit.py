"""A Numba-backed JIT written on ``jitguard.specialize``: ``@myjit`` compiles one Numba
overload per argument types and calls its C entry point directly; jitguard keeps the
entries, picks the right one on each call, and says why it recompiles.

Run: ``python examples/numba_jit.py`` (needs the ``numba`` extra: numba and numpy).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

import jitguard as jg

GB = jg.GuardBuilder


def array_rule(ctx: jg.ArgContext, source: jg.Source, value: Any) -> None:
    """What Numba's type of an array depends on (exact type, dtype, ndim, layout,
    writeable), and alignment: one ARRAY_MATCH guard, one exact dispatch fact."""
    ctx.guard(source, functools.partial(GB.ARRAY_MATCH, aligned=True))


def scalar_rule(ctx: jg.ArgContext, source: jg.Source, value: Any) -> None:
    """Numba compiles scalars by type, not value."""
    ctx.guard(source, GB.TYPE_MATCH)


POLICY = jg.ArgPolicy()
for tp in (bool, int, float, complex, np.generic):
    POLICY.register(tp, scalar_rule)
POLICY.register(np.ndarray, array_rule, subclasses=False)


def myjit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Compile ``fn`` with Numba, one overload per argument types."""
    dispatcher = numba.njit(fn)

    def compiler(request: jg.CompileRequest) -> Callable[..., Any]:
        sig = tuple(numba.typeof(v) for v in request.args)
        dispatcher.compile(sig)
        return dispatcher.overloads[sig].entry_point  # the overload's C entry point

    return jg.specialize(fn, compiler=compiler, policy=POLICY, recompile_limit=32)


@myjit
def axpy(a: Any, x: Any) -> Any:
    return a * x + 1


def main() -> None:
    print(axpy(2, 3), axpy(2, 3.5), axpy(2.0, np.arange(3.0)))  # three entries
    print(axpy(3, 4), axpy(0.5, np.ones(2)))  # hits: same types, other values
    print(axpy(2.0, np.arange(3, dtype=np.float32)))  # a new dtype: one recompile
    print(axpy(2.0, np.ones((2, 2))[:, ::2]))  # a strided 2-d array: one more
    cache = jg.cache_of(axpy)
    print(f"{len(cache.entries())} entries; the last recompile:")
    print(" ", cache.reasons()[-1])


if __name__ == "__main__":
    main()
