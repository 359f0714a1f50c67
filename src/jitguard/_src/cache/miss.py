"""The miss path of a ``FunctionCache`` past its lock-free look: no entry accepts the call,
so fall back, refuse or compile, and publish what was compiled ([Note: The call path] in
cache.specialize, from "decide between compiling"). ``FunctionCache._miss`` calls it under
the function's compile lock; it reads and updates the cache's private state.

May import: everything in ``jitguard._src`` except ``torch``; every ``cache`` module except
cache.specialize and cache.decorators; cache.specialize for types only (its ``FunctionCache``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional

from ..dispatch.entry import CacheEntry
from ..guards import Source
from .advice import announce, limit_advice
from .job import int_value_sources
from .observe import dispatch_log
from .reasons import (
    EXPLAINED,
    RecompileRecord,
    format_recompile,
    keepable,
    log,
    recompile_logger,
)
from .stance import refuse

if TYPE_CHECKING:
    from .specialize import FunctionCache

__all__ = ["in_own_compile", "serve_miss"]

# The ids of the caches compiling on this thread now ([Note: The call path]: a call made
# from inside a function's own compile runs it uncompiled).
_tls = threading.local()


def _compiling() -> set[int]:
    compiling: Optional[set[int]] = getattr(_tls, "compiling", None)
    if compiling is None:
        compiling = _tls.compiling = set()
    return compiling


def in_own_compile(cache: FunctionCache[Any, Any]) -> bool:
    """Whether this thread is inside ``cache``'s own compile (its compiler calling it)."""
    compiling = getattr(_tls, "compiling", None)
    return compiling is not None and id(cache) in compiling


def serve_miss(cache: FunctionCache[Any, Any], values: tuple[Any, ...]) -> Callable[..., Any]:
    """Under ``cache``'s lock, no entry accepts ``values``: what to call instead."""
    cache._counters.bump("misses")
    recompile = cache._compiles > 0
    # Loaded entries that reject the call are explained like compiled ones, but the
    # first compile of this process is not a recompile ([Note: Persistent entries]).
    explained = recompile or bool(cache._table)
    reached = cache.scope.limit_reached(cache)  # [Note: Scopes]
    past_limit = reached is not None
    if past_limit and cache.on_limit == "fallback" and cache._warned:
        cache._counters.bump("fallbacks")
        dispatch_log.info("%s: miss past the recompile limit: runs the fallback", cache.where)
        return cache.fallback
    if dispatch_log.isEnabledFor(logging.INFO):
        size = len(cache._table.snapshot)
        dispatch_log.info("%s: miss: %s", cache.where,
                          f"{size} entries rejected the call" if size else "no entry yet")
    covered: list[CacheEntry] = []
    unexplained = 0
    if explained:
        covered, unexplained = cache.scope.closest(cache, values, EXPLAINED)
    refused = refuse(
        cache.where, covered, values, unexplained=unexplained, recompile=recompile,
        past_limit=past_limit, forbidden=cache.error_on_recompile, limit=reached,
        on_limit=cache.on_limit,
        fallback=cache.fallback if cache.fallback is not cache.fn else None,
        torch_names=cache.torch_names,
        advice=limit_advice(cache),
    )
    if refused is not None:  # past the limit, falling back: warned once, now
        cache._warned = True
        cache._history.add(refused)
        announce(cache, None)  # [Note: Recompile advice]
        cache._counters.bump("fallbacks")
        return cache.fallback
    record: Optional[RecompileRecord] = None
    if explained:
        # [Note: Recompile reasons]: explained when read, unless the values may change.
        if keepable(values):
            record = RecompileRecord(None, pending=covered, values=values,
                                     unexplained=unexplained, torch_names=cache.torch_names)
        else:
            record = RecompileRecord.explained_now(None, covered, values,
                                                   unexplained=unexplained,
                                                   torch_names=cache.torch_names)
    made_dynamic: frozenset[Source] = frozenset()
    if record is not None and cache.automatic_dynamic:
        made_dynamic = int_value_sources(covered, record.entries, values,
                                         cache.signature.params, cache._job.f_globals,
                                         cache._static)
    compile_id = cache._new_compile_id()
    names = tuple(sorted(s.name() for s in made_dynamic))
    if record is not None:
        record.made_dynamic = names
        logger, verbose = recompile_logger()
        if logger is not None:
            logger.info("%s", format_recompile(cache.where, compile_id, record.entries, names,
                                               unexplained, user_stack=True,
                                               fn_frame=cache._job.frame, verbose=verbose,
                                               torch_names=cache.torch_names))
    compiling = _compiling()
    compiling.add(id(cache))
    cache_size = len(cache._table.snapshot)
    started = time.perf_counter()
    try:
        done = cache._job.run(
            compile_id, values, dynamic=cache._dynamic | cache._auto | made_dynamic,
            static=cache._static, recompile=recompile,
            on_restart=lambda: cache._counters.bump("restarts"), fn=cache._compile_target(),
        )
    except BaseException as e:
        cache._counters.bump("failures")
        cache._compile_log.failed(compile_id, started, e, cache_size=cache_size,
                                  record=record)
        raise
    finally:
        compiling.discard(id(cache))
    return _keep(cache, done, compile_id, started, values, record, cache_size)


def _keep(cache: FunctionCache[Any, Any], done: Any, compile_id: Any, started: float,
          values: tuple[Any, ...], record: Optional[RecompileRecord],
          cache_size: int) -> Callable[..., Any]:
    """After a compile: the entry joins the cache (unless the compiler changed the call's
    arguments), is counted, recorded, saved and logged; returns what serves the call."""
    if done.mutated:
        # [Note: Arguments changed by the compiler]: the artifact serves this call only.
        cache._compiles += 1
        cache._counters.bump("compiles")
        cache._auto = done.dynamic - cache._dynamic
        cache._static = done.static
        log.warning(
            "%s: the compiler of %s changed its arguments (a visited part now holds "
            "another object); its artifact serves this call, no entry is kept",
            cache.where, compile_id,
        )
        cache._compile_log.compiled(compile_id, started, values, None,
                                    cache_size=cache_size, record=record)
        return done.artifact
    assert done.check is not None
    entry = cache._join(compile_id, done.artifact, done.check, done.request.dynamic_sources)
    dynamic, static = done.dynamic, done.static
    cache._compiles += 1
    cache._counters.bump("compiles")
    cache._auto = dynamic - cache._dynamic
    cache._static = static
    if record is not None:
        record.compile_id = compile_id
        cache._history.add(record)
    if cache._persist is not None:
        cache._persist.save(entry)
    # [Note: Compile events]; the compile log and the guards log say the rest.
    cache._compile_log.compiled(compile_id, started, values, entry, cache_size=cache_size,
                                record=record)
    if record is not None:
        announce(cache, compile_id)  # [Note: Recompile advice]
    if cache.maxsize is not None:
        cache._evict_over(cache.maxsize)
    return entry.artifact
