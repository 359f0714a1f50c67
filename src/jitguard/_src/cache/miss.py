"""The miss path of a ``FunctionCache`` past its lock-free look: no entry accepts the call,
so fall back, refuse or compile, and publish what was compiled ([Note: The call path] in
cache.specialize, from "decide between compiling"): ``MissPath``, which ``FunctionCache``
makes in its ``__init__`` and asks (``serve``) under the function's compile lock. It owns
the state only the miss path changes: the compile count and ids, the declared and
automatic dynamic and static sources, the limit's warning, the advice given, the recompile
history, the compile log and the compile job; the cache keeps the wiring (dispatcher, entry
table, store, counters) and hands it in, and reads the rest through ``MissPath``'s public
names.

May import: everything in ``jitguard._src`` except ``torch``; every ``cache`` module except
cache.specialize and cache.decorators; cache.specialize for types only (its ``FunctionCache``).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Optional

from ..dispatch.entry import CacheEntry
from ..dispatch.table import EntryTable
from ..guards import Source
from ..ids import CompileId
from . import advice_rules  # noqa: F401  (the built-in rules register on import)
from .advice import announce, limit_advice
from .job import CompileJob, int_value_sources
from .observe import CompileLog, dispatch_log
from .persist import Persistence
from .reasons import (
    EXPLAINED,
    RecompileHistory,
    RecompileRecord,
    format_recompile,
    keepable,
    log,
    recompile_logger,
)
from .stance import refuse

if TYPE_CHECKING:
    from .specialize import FunctionCache

__all__ = ["MissPath", "in_own_compile"]

# The ids of the caches compiling on this thread now ([Note: The call path]: a call made
# from inside a function's own compile runs it uncompiled).
_tls = threading.local()
_frame_ids = itertools.count()


def _compiling() -> set[int]:
    compiling: Optional[set[int]] = getattr(_tls, "compiling", None)
    if compiling is None:
        compiling = _tls.compiling = set()
    return compiling


def in_own_compile(cache: FunctionCache[Any, Any]) -> bool:
    """Whether this thread is inside ``cache``'s own compile (its compiler calling it)."""
    compiling = getattr(_tls, "compiling", None)
    return compiling is not None and id(cache) in compiling



class MissPath:
    """The miss path of one ``FunctionCache`` and the state only it changes ([Note: The call
    path]). ``cache`` gives the options (``where``, ``scope``, ``fallback``, ...); ``table``,
    ``counters``, ``persist`` and ``target`` (what a compile gets as ``request.fn``) are the
    cache's wiring, handed in (the cache owns them); ``history`` is shared with the table."""

    def __init__(self, cache: FunctionCache[Any, Any], job: CompileJob, *,
                 static: frozenset[Source], dynamic: frozenset[Source], history: RecompileHistory,
                 table: EntryTable, counters: Any, target: Callable[[], Callable[..., Any]],
                 persist: Optional[Persistence]) -> None:
        self._cache = cache
        self.job = job
        self._table = table
        self._counters = counters
        self._target = target
        self._persist = persist
        self._declared_static = static
        self._declared_dynamic = dynamic
        self.history = history  # the entry table adds the failures of dropped entries
        self.compile_log = CompileLog(cache.fn, cache.where, job.frame, history.size)
        self._frame_id: Optional[int] = None
        self._next_compile = 0
        self.reset()

    def reset(self) -> None:
        """Forget the compiles, records and automatic markings (``clear()``); compile ids go
        on counting."""
        self.compiles = 0
        self._auto: frozenset[Source] = frozenset()
        self._static = self._declared_static
        self.history.clear()
        self.compile_log.clear()
        self._warned = False
        # (source, rule, at the limit) of each advice logged ([Note: Recompile advice])
        self.advised: set[tuple[str, str, bool]] = set()

    @property
    def dynamic(self) -> frozenset[Source]:
        """The sources guarded as dynamic now (declared, or made so by a recompile)."""
        return self._declared_dynamic | self._auto

    @property
    def static(self) -> frozenset[Source]:
        """The sources guarded as static now (declared, or kept so by the compiler)."""
        return self._static

    def new_compile_id(self) -> CompileId:
        """The next compile id of this function (the frame id is taken on first use)."""
        if self._frame_id is None:  # the scope may number it ([Note: Scopes])
            frame_id = self._cache.scope.frame_id()
            self._frame_id = next(_frame_ids) if frame_id is None else frame_id
        compile_id = CompileId(frame_id=self._frame_id, frame_compile_id=self._next_compile)
        self._next_compile += 1
        return compile_id

    def join(self, compile_id: CompileId, artifact: Callable[..., Any], check: Any,
             dynamic: frozenset[Source]) -> CacheEntry:
        """A new entry (compiled or loaded) joins the table and is published."""
        return self._table.join(compile_id, artifact, check, dynamic)

    def evict_over(self) -> None:
        """Past ``maxsize``: evict least recently used entries until at most ``maxsize`` are
        live ([Note: maxsize])."""
        maxsize = self._cache.maxsize
        if maxsize is None:
            return
        for victim in self._table.evict_over(maxsize):
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s: evicted entry %s (least recently used, maxsize=%d)",
                          self._cache.where, victim.compile_id, maxsize)

    def lookup(self, values: tuple[Any, ...]) -> Optional[CacheEntry]:
        """The entry the published snapshot serves for ``values`` (None: a miss)."""
        return self._table.snapshot.lookup(values)

    def uncompiled(self) -> Callable[..., Any]:
        """A call made from inside the function's own compile ([Note: The call path])."""
        self._counters.bump("misses")
        self._counters.bump("fallbacks")
        dispatch_log.info("%s: called from inside its own compile: runs uncompiled",
                          self._cache.where)
        return self._cache.fn

    def serve(self, values: tuple[Any, ...]) -> Callable[..., Any]:
        """Under the cache's lock, no entry accepts ``values``: what to call instead."""
        cache = self._cache
        self._counters.bump("misses")
        recompile = self.compiles > 0
        # Loaded entries that reject the call are explained like compiled ones, but the
        # first compile of this process is not a recompile ([Note: Persistent entries]).
        explained = recompile or bool(self._table)
        reached = cache.scope.limit_reached(cache)  # [Note: Scopes]
        past_limit = reached is not None
        if past_limit and cache.on_limit == "fallback" and self._warned:
            self._counters.bump("fallbacks")
            dispatch_log.info("%s: miss past the recompile limit: runs the fallback", cache.where)
            return cache.fallback
        if dispatch_log.isEnabledFor(logging.INFO):
            size = len(self._table.snapshot)
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
            self._warned = True
            self.history.add(refused)
            announce(cache, None, self.advised)  # [Note: Recompile advice]
            self._counters.bump("fallbacks")
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
                                             cache.signature.params, self.job.f_globals,
                                             self._static)
        compile_id = self.new_compile_id()
        names = tuple(sorted(s.name() for s in made_dynamic))
        if record is not None:
            record.made_dynamic = names
            logger, verbose = recompile_logger()
            if logger is not None:
                logger.info("%s", format_recompile(cache.where, compile_id, record.entries, names,
                                                   unexplained, user_stack=True,
                                                   fn_frame=self.job.frame, verbose=verbose,
                                                   torch_names=cache.torch_names))
        compiling = _compiling()
        compiling.add(id(cache))
        cache_size = len(self._table.snapshot)
        started = time.perf_counter()
        try:
            done = self.job.run(
                compile_id, values, dynamic=self.dynamic | made_dynamic,
                static=self._static, recompile=recompile,
                on_restart=lambda: self._counters.bump("restarts"), fn=self._target(),
            )
        except BaseException as e:
            self._counters.bump("failures")
            self.compile_log.failed(compile_id, started, e, cache_size=cache_size,
                                      record=record)
            raise
        finally:
            compiling.discard(id(cache))
        return self._keep(done, compile_id, started, values, record, cache_size)


    def _keep(self, done: Any, compile_id: Any, started: float, values: tuple[Any, ...],
              record: Optional[RecompileRecord], cache_size: int) -> Callable[..., Any]:
        """After a compile: the entry joins the cache (unless the compiler changed the call's
        arguments), is counted, recorded, saved and logged; returns what serves the call."""
        cache = self._cache
        if done.mutated:
            # [Note: Arguments changed by the compiler]: the artifact serves this call only.
            self.compiles += 1
            self._counters.bump("compiles")
            self._auto = done.dynamic - self._declared_dynamic
            self._static = done.static
            log.warning(
                "%s: the compiler of %s changed its arguments (a visited part now holds "
                "another object); its artifact serves this call, no entry is kept",
                cache.where, compile_id,
            )
            self.compile_log.compiled(compile_id, started, values, None,
                                        cache_size=cache_size, record=record)
            return done.artifact
        assert done.check is not None
        entry = self.join(compile_id, done.artifact, done.check, done.request.dynamic_sources)
        dynamic, static = done.dynamic, done.static
        self.compiles += 1
        self._counters.bump("compiles")
        self._auto = dynamic - self._declared_dynamic
        self._static = static
        if record is not None:
            record.compile_id = compile_id
            self.history.add(record)
        if self._persist is not None:
            self._persist.save(entry)
        # [Note: Compile events]; the compile log and the guards log say the rest.
        self.compile_log.compiled(compile_id, started, values, entry, cache_size=cache_size,
                                    record=record)
        if record is not None:
            announce(cache, compile_id, self.advised)  # [Note: Recompile advice]
        self.evict_over()
        return entry.artifact
