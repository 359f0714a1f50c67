"""What the specializing cache asks of the frontend it serves: a ``Scope``.

May import: dispatch.entry, cache.stance, cache.stats; cache.specialize for types only.

# [Note: Scopes]
# A ``FunctionCache`` is the same machine under every frontend; what differs is asked of its
# ``scope`` (composition: a frontend never subclasses the cache, tests/test_layering.py holds
# it). ``specialize`` uses ``LocalScope``: the limits the user gave, one cache's entries. The
# torch frontend (``jitguard.torch.compile``) gives its own (torch/dynamo_scope.py): limits
# that follow ``torch._dynamo.config``, counted over the caches of one function, isolated
# caches that also look in the shared one, stats that count capture failures. The methods:
#   * ``frontend``: the name the recompile advisor is told ([Note: Recompile advice]);
#     ``torch_names``: reasons name locals as torch.compile does ([Note: Recompile reasons]);
#     ``frame_id()``: the frame id of the function's first compile (None: jitguard's own
#     count; torch's tools want torch's, [Note: torch's tools]);
#   * ``watch_target(fn)``: the function whose ``__code__`` the entries come from ([Note: A
#     replaced __code__]); ``globals_of(fn)``: the globals guards read global sources in;
#   * ``recompile_limit(configured)``, ``on_limit(configured)``: the live values of the two
#     options ([Note: Recompile limits]);
#   * ``limit_reached(cache)``: the limit a miss has reached (named), or None;
#   * ``closest(cache, values, limit)``: the entries whose failures explain a miss
#     ([Note: Recompile reasons]) and how many others were left out;
#   * ``elsewhere(cache, values)``: an entry of another cache that serves the call (None);
#   * ``stats(cache, stats)``, ``guard_layer(cache, entry)``: inspection, as the frontend
#     counts and explains it.
# A scope reads a cache through its public methods only (``compiles``, ``entries()``,
# ``closest``, ``find``); the cache passes itself in.
"""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any, Optional, Protocol

from ..dispatch.entry import CacheEntry
from .stance import OnLimit
from .stats import CacheStats

if TYPE_CHECKING:
    from .specialize import FunctionCache

__all__ = ["LocalScope", "Scope", "plain_function"]


def plain_function(fn: Any) -> Optional[types.FunctionType]:
    """``fn`` when it is a plain Python function (its ``__code__`` can be watched), else None."""
    return fn if type(fn) is types.FunctionType else None


class Scope(Protocol):
    """What the cache asks of its frontend ([Note: Scopes])."""

    frontend: str  # what the advisor's rules are told the function was compiled with
    torch_names: bool  # recompile reasons name locals as torch.compile does

    def frame_id(self) -> Optional[int]: ...

    def watch_target(self, fn: Any) -> Optional[types.FunctionType]: ...

    def globals_of(self, fn: Any) -> Any: ...

    def recompile_limit(self, configured: Optional[int]) -> Optional[int]: ...

    def on_limit(self, configured: OnLimit) -> OnLimit: ...

    def limit_reached(self, cache: FunctionCache[Any, Any]) -> Optional[str]: ...

    def closest(self, cache: FunctionCache[Any, Any], values: tuple[Any, ...],
                limit: int) -> tuple[list[CacheEntry], int]: ...

    def elsewhere(self, cache: FunctionCache[Any, Any],
                  values: tuple[Any, ...]) -> Optional[CacheEntry]: ...

    def stats(self, cache: FunctionCache[Any, Any], stats: CacheStats) -> CacheStats: ...

    def guard_layer(self, cache: FunctionCache[Any, Any],
                    entry: CacheEntry) -> Optional[dict[str, str]]: ...


class LocalScope:
    """The scope of ``specialize``: one cache, the options as given ([Note: Scopes])."""

    frontend = "specialize"
    torch_names = False

    def frame_id(self) -> Optional[int]:
        return None  # the cache's own numbering

    def watch_target(self, fn: Any) -> Optional[types.FunctionType]:
        return plain_function(fn)

    def globals_of(self, fn: Any) -> Any:
        return getattr(inspect.unwrap(fn), "__globals__", None)

    def recompile_limit(self, configured: Optional[int]) -> Optional[int]:
        return configured

    def on_limit(self, configured: OnLimit) -> OnLimit:
        return configured

    def limit_reached(self, cache: FunctionCache[Any, Any]) -> Optional[str]:
        limit = cache.recompile_limit
        return str(limit) if limit is not None and cache.compiles >= limit else None

    def closest(self, cache: FunctionCache[Any, Any], values: tuple[Any, ...],
                limit: int) -> tuple[list[CacheEntry], int]:
        return cache.closest(values, limit)

    def elsewhere(self, cache: FunctionCache[Any, Any],
                  values: tuple[Any, ...]) -> Optional[CacheEntry]:
        return None

    def stats(self, cache: FunctionCache[Any, Any], stats: CacheStats) -> CacheStats:
        return stats

    def guard_layer(self, cache: FunctionCache[Any, Any],
                    entry: CacheEntry) -> Optional[dict[str, str]]:
        return None
