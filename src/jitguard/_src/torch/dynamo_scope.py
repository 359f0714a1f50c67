"""The cache behind ``jitguard.torch.compile``, by composition ([Note: Scopes]): a
``FunctionCache`` whose ``DynamoScope`` follows torch's recompile limit when the user gave
none, counts it over the function's shared caches, lets an isolated cache look in the shared
one, and counts capture failures and delegated entries ([Note: Shared entries]); ``Regions``
holds a function's caches; ``dynamo_cache`` makes one.

May import: jitguard._src.* (the cache, the torch integration below it),
jitguard._src.torch.dynamo_cache, compiled, convert and adapter, adapter_runtime (the only
way to torch's internals).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any, Optional

from ..cache.scope import plain_function
from ..cache.specialize import FunctionCache
from ..cache.stance import OnLimit
from ..cache.stats import CacheStats
from ..dispatch.entry import CacheEntry
from ..sources import GlobalSource
from ..store.tiers import StoreLike
from . import adapter, adapter_runtime, stored
from .compiled import FRAME_PATH
from .convert import GLOBALS_SELF
from .dynamo_cache import _NO_RULES, TorchCompiler, _converter

__all__ = ["DynamoScope", "Regions", "dynamo_cache"]


class Regions:
    """The caches of one function ([Note: Shared entries]): the shared ones, one per option
    set (``key``), and the isolated ones. Held weakly: the wrappers hold the caches. Wrappers
    of one function may be made on several threads at once (a module's hooked call is made
    on its first call): making a cache and reading the isolated ones hold ``_lock``; finding
    a live shared cache does not. A cache's place (``regions``, ``key``, ``isolated``) is
    its scope's."""

    def __init__(self) -> None:
        self.shared: dict[Any, weakref.ref[Any]] = {}
        self.isolated: weakref.WeakSet[Any] = weakref.WeakSet()
        # reentrant: ``make`` runs under it, and a cache's construction may ask for another
        self._lock = threading.RLock()

    def shared_caches(self) -> list[Any]:
        return [c for c in (r() for r in list(self.shared.values())) if c is not None]

    def isolated_caches(self) -> list[Any]:
        """The live isolated caches (a WeakSet's iteration is a generator: another thread's
        ``add`` during it raised RuntimeError)."""
        with self._lock:
            return list(self.isolated)

    def _live_shared(self, key: Any) -> Any:
        ref = self.shared.get(key)
        return ref() if ref is not None else None

    def cache_for(self, key: Any, isolate: bool, make: Callable[[], Any]) -> Any:
        """The shared cache of ``key`` (made once, whichever threads ask at once), or a new
        isolated cache."""
        if not isolate:
            found = self._live_shared(key)
            if found is not None:
                return found
        with self._lock:
            if not isolate:
                found = self._live_shared(key)
                if found is not None:
                    return found
            cache = make()
            # complete before it is published: a lock-free reader may take it at once
            scope = cache.scope
            scope.regions, scope.key, scope.isolated = self, key, isolate
            if isolate:
                self.isolated.add(cache)
            else:
                self.shared[key] = weakref.ref(cache)
        return cache

    def fallbacks(self, cache: Any) -> list[Any]:
        """The shared caches an isolated ``cache`` also looks in: the one of its options."""
        if not cache.scope.isolated:
            return []
        ref = self.shared.get(cache.scope.key)
        found = ref() if ref is not None else None
        return [found] if found is not None else []


class DynamoScope:
    """The scope of a ``jitguard.torch.compile`` cache ([Note: Scopes], [Note: Shared
    entries]). It reads caches through their public methods only."""

    regions: Optional[Regions] = None
    key: Any = None
    isolated = False
    frontend = "jitguard.torch.compile"  # [Note: Recompile advice]
    torch_names = True  # [Note: Recompile reasons]

    def __init__(self, compiler: TorchCompiler, limit: Optional[int],
                 watch: Optional[types.FunctionType] = None) -> None:
        self.compiler = compiler
        self.fixed_limit = limit
        # [Note: A replaced __code__]: the function whose code the entries come from, when
        # it is not ``fn`` (a module call's caller inlines ``forward``)
        self.watch = watch

    def frame_id(self) -> Optional[int]:
        """[Note: torch's tools]: the function's frame id is one of torch's."""
        return adapter.new_frame_id()

    def watch_target(self, fn: Any) -> Optional[types.FunctionType]:
        return self.watch if self.watch is not None else plain_function(fn)

    def globals_of(self, fn: Any) -> Any:
        # Dynamo traces ``fn`` itself, so its guards read ``fn``'s globals, not those of
        # what it wraps (``specialize`` unwraps ``__wrapped__``; a ``@torch.no_grad()``
        # function is torch's wrapper, whose globals are torch.utils._contextlib's)
        return getattr(fn, "__globals__", None)

    def recompile_limit(self, configured: Optional[int]) -> Optional[int]:
        return self.fixed_limit or adapter.recompile_limit()

    def on_limit(self, configured: OnLimit) -> OnLimit:
        fullgraph = self.compiler.fullgraph
        return "raise" if fullgraph or adapter.fail_on_recompile_limit_hit() else "fallback"

    def limit_reached(self, cache: FunctionCache[Any, Any]) -> Optional[str]:
        regions = self.regions
        limit = cache.recompile_limit
        if regions is None:
            return str(limit) if limit is not None and cache.compiles >= limit else None
        region = [cache] if self.isolated else regions.shared_caches()
        if limit is not None and sum(c.compiles for c in region) >= limit:
            return str(limit)
        limit_all = adapter.accumulated_recompile_limit()
        total = sum(len(c.entries()) for c in (*regions.shared_caches(), *regions.isolated_caches()))
        if total >= limit_all:
            return f"accumulated_recompile_limit={limit_all}"
        return None

    def closest(self, cache: FunctionCache[Any, Any], values: tuple[Any, ...],
                limit: int) -> tuple[list[CacheEntry], int]:
        covered, left = cache.closest(values, limit)
        if self.regions is not None:
            for shared in self.regions.fallbacks(cache):
                more, more_left = shared.closest(values, limit)
                covered, left = covered + more, left + more_left
        return covered, left

    def elsewhere(self, cache: FunctionCache[Any, Any],
                  values: tuple[Any, ...]) -> Optional[CacheEntry]:
        if self.regions is not None and self.isolated:
            for shared in self.regions.fallbacks(cache):
                entry = shared.find(values)  # None once its __code__ was replaced
                if entry is not None:
                    return entry
        return None

    def stats(self, cache: FunctionCache[Any, Any], stats: CacheStats) -> CacheStats:
        live = {e.compile_id for e in cache.entries()}
        compiler = self.compiler
        infos = compiler.infos
        return dataclasses.replace(
            stats,
            capture_failures=compiler.capture_failures,
            backend_failures=compiler.backend_failures,
            delegated=sum(1 for cid in live if infos.get(cid) and infos[cid].delegated),
            frame_path=sum(1 for cid in live
                           if infos.get(cid) and infos[cid].guard_layer == FRAME_PATH))

    def guard_layer(self, cache: FunctionCache[Any, Any],
                    entry: CacheEntry) -> Optional[dict[str, str]]:
        """Which guards decide ``entry``'s calls, and why ([Note: Graph breaks])."""
        info = self.compiler.infos.get(entry.compile_id)
        if info is None:
            return None
        out = {"layer": info.guard_layer, "why": info.why}
        if info.pieces:
            out["pieces"] = ", ".join(f"{p.compile_id} (torch's guards)" for p in info.pieces)
        return out


def dynamo_cache(fn: Callable[..., Any], compiler: TorchCompiler, limit: Optional[int],
                 store: StoreLike = None, *, watch: Optional[types.FunctionType] = None,
                 where: Optional[str] = None) -> FunctionCache[Any, Any]:
    """The cache of ``fn`` under ``compiler`` ([Note: jitguard.torch.compile on Dynamo]):
    the cache's argument rules guard nothing, automatic dynamic is Dynamo's."""
    compiler.fn = fn
    # the conversion's source classes must be loaded before stored guards are read
    _converter()
    scope = DynamoScope(compiler, limit, watch)
    cache: FunctionCache[Any, Any] = FunctionCache(
        fn, compiler, recompile_limit=limit or adapter.recompile_limit(),
        automatic_dynamic=False, policy=_NO_RULES, global_state=False, store=store,
        scope=scope, where=where)
    compiler.cache = cache
    # [Note: Stored captures]: with a store, captures are compiled to be serialized
    compiler.saving = cache.has_store
    f_globals = scope.globals_of(fn)
    if isinstance(f_globals, dict):
        # bound here too, not only by a conversion that needs it: an entry loaded from a
        # store reads it ([Note: Builtins a global may shadow])
        f_globals.setdefault(GLOBALS_SELF, f_globals)
        if getattr(fn, "__closure__", None):
            # closure guards read the cells through the function, found as a global
            # ([Note: The compiled function's global])
            name = _bind_function(f_globals, fn)
            if name is None:  # another function of its name holds the portable global
                name = f"__jitguard_fn_{next(_fn_ids)}"
                f_globals[name] = fn
                compiler.installed.append(name)
            else:
                weakref.finalize(cache, _unbind_function, f_globals, name)
            compiler.function_source = GlobalSource(name)
        weakref.finalize(cache, _uninstall, f_globals, compiler.installed)
    _live.add(cache)
    return cache


def _uninstall(f_globals: dict[str, Any], names: list[str]) -> None:
    for name in names:
        f_globals.pop(name, None)


_fn_ids = itertools.count()
# caches reading a function through its portable global, by (globals, name): the global
# goes when the last of them does
_fn_users: dict[tuple[int, str], int] = {}
_fn_lock = threading.Lock()


def _bind_function(f_globals: dict[str, Any], fn: Any) -> Optional[str]:
    """Bind ``fn`` to its portable global (``stored.function_global``) and return that
    name, or None when another object holds it ([Note: The compiled function's global])."""
    name = stored.function_global(fn)
    with _fn_lock:
        if f_globals.setdefault(name, fn) is not fn:
            return None
        key = (id(f_globals), name)
        _fn_users[key] = _fn_users.get(key, 0) + 1
    return name


def _unbind_function(f_globals: dict[str, Any], name: str) -> None:
    with _fn_lock:
        key = (id(f_globals), name)
        left = _fn_users.pop(key, 1) - 1
        if left:
            _fn_users[key] = left
        else:
            f_globals.pop(name, None)


_live: weakref.WeakSet[FunctionCache[Any, Any]] = weakref.WeakSet()


def _clear_all() -> None:
    """After ``torch._dynamo.reset()``: every cache forgets its entries, as torch's do."""
    for cache in list(_live):
        cache.clear()


adapter_runtime.on_reset(_clear_all)
