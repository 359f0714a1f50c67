"""A Numba-backed JIT written on ``jitguard.specialize``: ``@myjit`` compiles one Numba
overload per argument types and calls its C entry point directly; jitguard keeps the
entries, picks the right one on each call, and says why it recompiles.

Run: ``python examples/numba_jit.py`` (needs the ``numba`` extra: numba and numpy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np

import jitguard as jg


def myjit(fn: Callable[..., Any], *, limit: int = 32) -> Callable[..., Any]:
    """Compile ``fn`` with Numba, one overload per argument types. ``policy="types"``
    guards what Numba's types depend on: scalars by exact type, arrays by ARRAY_MATCH
    (type, dtype, ndim, layout, writeable, aligned: one exact dispatch fact). Past the
    recompile limit (``limit`` entries), calls go to Numba's own dispatcher (with a
    warning, once)."""
    dispatcher = numba.njit(fn)

    def compiler(request: jg.CompileRequest) -> Callable[..., Any]:
        sig = tuple(numba.typeof(v) for v in request.args)
        dispatcher.compile(sig)
        return dispatcher.overloads[sig].entry_point  # the overload's C entry point

    return jg.specialize(fn, compiler=compiler, policy="types", recompile_limit=limit,
                         fallback=dispatcher)


@myjit
def axpy(a: Any, x: Any) -> Any:
    return a * x + 1


def main() -> None:
    print(axpy(2, 3), axpy(2, 3.5), axpy(2.0, np.arange(3.0)))  # three entries
    print(axpy(3, 4), axpy(0.5, np.ones(2)))  # hits: same types, other values
    print(axpy(2.0, np.arange(3, dtype=np.float32)))  # a new dtype: one recompile
    print(axpy(2.0, np.ones((2, 2))[:, ::2]))  # a strided 2-d array: one more
    cache = jg.cache_of(axpy)
    print(f"{len(cache.entries())} entries; why the last one was compiled:")
    for reason in cache.recompiles[-1].reasons()[:2]:  # the closest entries first
        print(" ", reason)


if __name__ == "__main__":
    main()
