"""Limits and stances: how many entries a function may make, and what happens past that,
or when recompiling is forbidden.

May import: errors, dispatch.entry, cache.reasons.

``RecompileError``, ``RecompileLimitError`` and ``RecompileLimitWarning`` live in ``errors``
(imported here under their old names too).

# [Note: Recompile limits]
# A function may compile ``recompile_limit`` entries (default 8; entries later dropped
# because an object died still count, so a function fed fresh objects cannot compile
# forever). A miss past the limit does not compile: with ``on_limit="fallback"`` (the
# default) the call runs the original function uncompiled, or ``specialize(...,
# fallback=g)``'s ``g`` (numba's generic dispatcher, say), and the first time this happens
# a ``RecompileLimitWarning`` with the reasons is issued (and logged, at INFO, on
# ``jitguard.recompiles``); with ``on_limit="raise"`` every such call raises
# ``RecompileLimitError`` with the reasons. Existing entries keep serving their calls.
# ``no_recompiles()`` (a context manager, process-wide and nestable) or
# ``specialize(..., error_on_recompile=True)`` turn every recompile (a miss of a function
# that has compiled before) into ``RecompileError``; first compiles are allowed, so a test
# can warm up, then assert that nothing recompiles.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Optional, Union

from ..dispatch.entry import CacheEntry
from ..errors import RecompileError, RecompileLimitError, RecompileLimitWarning
from .reasons import RecompileRecord, format_recompile, log

__all__ = [
    "OnLimit",
    "RecompileError",
    "RecompileLimitError",
    "RecompileLimitWarning",
    "check_on_limit",
    "no_recompiles",
    "recompiles_forbidden",
    "refuse",
]

OnLimit = Literal["fallback", "raise"]


def check_on_limit(on_limit: str, fallback: Any = None) -> OnLimit:
    """``on_limit`` checked, with the ``fallback`` target that goes with it (None: ``fn``)."""
    if on_limit not in ("fallback", "raise"):
        raise ValueError(f"on_limit must be 'fallback' or 'raise', got {on_limit!r}")
    if fallback is not None:
        if not callable(fallback):
            raise TypeError(f"fallback must be callable, got {fallback!r}")
        if on_limit != "fallback":
            raise ValueError(
                "fallback= names what a call past the recompile limit runs; it needs "
                f"on_limit='fallback', got on_limit={on_limit!r}"
            )
    return on_limit  # type: ignore[return-value]


def callable_name(fn: Any) -> str:
    """``module.qualname`` of a function, else its type's name (``CPUDispatcher object``)."""
    qualname = getattr(fn, "__qualname__", None)
    if isinstance(qualname, str):
        module = getattr(fn, "__module__", None)
        return f"{module}.{qualname}" if isinstance(module, str) else qualname
    return f"{type(fn).__qualname__} object"


_forbid = 0
_forbid_lock = threading.Lock()


@contextlib.contextmanager
def no_recompiles() -> Iterator[None]:
    """Within the block, any recompile of any specialized function raises
    ``RecompileError`` (see [Note: Recompile limits])."""
    global _forbid
    with _forbid_lock:
        _forbid += 1
    try:
        yield
    finally:
        with _forbid_lock:
            _forbid -= 1


def recompiles_forbidden() -> bool:
    return _forbid > 0


def limit_message(what: str, limit: Union[int, str, None], reasons: Sequence[str], on_limit: OnLimit,
                  fallback: Any = None, advice: Sequence[str] = ()) -> str:
    if on_limit == "raise":
        then = "the call raises (on_limit='raise')"
    elif fallback is not None:
        then = f"a miss now calls the fallback {callable_name(fallback)}"
    else:
        then = "it now runs uncompiled on a miss"
    lines = [f"{what} hit its recompile limit ({limit}); {then}. Last reasons:"]
    lines += [f"    - {r}" for r in reasons] or ["    (none)"]
    if advice:
        lines += ["Advice:", *advice]
    return "\n".join(lines)


def refuse(
    where: str, covered: Sequence[CacheEntry], values: tuple[Any, ...], *, unexplained: int,
    recompile: bool, past_limit: bool, forbidden: bool, limit: Union[int, str, None],
    on_limit: OnLimit,
    fallback: Any = None, torch_names: bool = False,
    advice: Optional[Callable[[RecompileRecord], Sequence[str]]] = None,
) -> Optional[RecompileRecord]:
    """Decide a miss before compiling: raise ``RecompileError`` where recompiling is
    forbidden, ``RecompileLimitError`` past the limit with ``on_limit="raise"``; past the
    limit with ``"fallback"``, warn (the caller does this once) and return the record of the
    refused recompile; else None (compile). The reasons cover ``covered`` (the entries
    closest to the call, see [Note: Recompile reasons]), explained here: this path is
    taken once per function, or raises. ``advice(record)`` gives the lines of advice that end
    the limit's message ([Note: Recompile advice])."""
    if recompile and (forbidden or recompiles_forbidden()):
        record = RecompileRecord.explained_now(None, covered, values, unexplained=unexplained,
                                               outcome="forbidden", torch_names=torch_names)
        raise RecompileError(
            format_recompile(where, None, record.entries, unexplained=unexplained, verbose=True,
                             torch_names=torch_names)
            + "\n    but recompiling is forbidden here (no_recompiles / error_on_recompile)",
            record,
        )
    if not past_limit:
        return None
    record = RecompileRecord.explained_now(None, covered, values, unexplained=unexplained,
                                           outcome="limit", torch_names=torch_names)
    reasons = record.reasons()
    if unexplained:
        reasons.append(f"(and {unexplained} other entries, not explained)")
    message = limit_message(where, limit, reasons, on_limit, fallback,
                            advice(record) if advice is not None else ())
    if on_limit == "raise":
        raise RecompileLimitError(message, record)
    # Logged at INFO: the warning is what users see; at WARNING, logging's last-resort
    # handler would print the same text a second time where no logging is configured.
    log.info("%s", message)
    # stacklevel: refuse, miss.serve_miss, _miss, the dispatcher, then the caller's line.
    warnings.warn(message, RecompileLimitWarning, stacklevel=5)
    return record
