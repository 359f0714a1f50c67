"""The specializing cache of one function (``FunctionCache``) and its miss path;
``cache.decorators`` holds ``specialize`` and ``cache_of``, its public face, ``cache.miss``
the part of the miss path that falls back, refuses or compiles, and ``cache.inspection``
its inspection API (``CacheInspection``, a base class).

May import: everything in ``jitguard._src`` except ``torch``; every ``cache`` module.

# [Note: The call path]
# A call runs the generated dispatcher ([Note: Dispatch by facts]): key, slot, residual
# check, artifact. Everything else goes to ``_miss``, which first walks the call's
# candidates with full checks, lock-free, on the current snapshot. Only when no entry
# accepts the call does it take the function's compile lock, look again (another thread
# may just have compiled what this call needs: it then waits for that compile and uses
# it, so a compile happens once), and then (``cache.miss.MissPath.serve``) decide between
# compiling, falling back and raising ([Note: Recompile limits]), record why the entries
# closest to the call rejected it ([Note: Recompile reasons]: explained when read), and
# compile:
#   1. a ``CompileId`` (``<frame id>/<compile count>``; the frame id is taken at the
#      function's first compile), ``compile_context(CompileContext(id))``;
#   2. per attempt: ``tracing(TracingContext(None))`` with ``fn``'s frame as the user
#      frame, the default guards of the arguments ([Note: Argument rules]); then
#      ``compiler(request)``; then, when any guarded global state is registered (by now:
#      the compile may have loaded an integration), GLOBAL_STATE, the aliasing guards
#      ([Note: Aliasing guards]) and the check that the compiler left the arguments as
#      they were ([Note: Arguments changed by the compiler]: else no entry is kept).
#      ``RestartCompile`` starts the next attempt ([Note: The compiler contract]);
#   3. ``compile_guards`` over the tracing context's guards, environment expressions and
#      the request's shape guards, in positional mode; a new ``CacheEntry``, added to the
#      snapshot in place or in a new snapshot, published ([Note: Updating a snapshot in
#      place]); past ``maxsize``, the least recently used entry evicted ([Note: maxsize]).
# The artifact (or ``fn``, on a fallback) is called after the lock is released. An
# exception from the compiler, a rule or ``compile_guards`` propagates unchanged (the
# ``tracing`` block attaches ``real_stack``); entries, dynamic markings and the limit are
# as before (the compile id it used is not reused). A call made from inside the function's
# own compile (the compiler calling the function) runs ``fn`` uncompiled.
"""

from __future__ import annotations

import functools
import logging
import threading
import types
from collections.abc import Callable, Iterable
from typing import Any, Generic, Optional, ParamSpec, TypeVar, Union

from .._util import wrapped_chain
from ..dispatch.dispatcher import Dispatcher
from ..dispatch.entry import CacheEntry
from ..dispatch.layout import note_static_types
from ..dispatch.lru import Lru
from ..dispatch.signature import Signature
from ..dispatch.table import EntryTable
from ..guards import Source
from .inspection import CacheInspection
from .job import CompileJob, identity_compiler, where_and_frame
from .loading import load_stored
from .miss import MissPath, in_own_compile
from .observe import dispatch_log
from .persist import Persistence, open_persistence
from .policy import ArgPolicy, root_name
from .presets import resolve_policy
from .reasons import HISTORY, RecompileHistory, log
from .request import CompileRequest, SourceLike, as_source
from .scope import LocalScope, Scope
from .stance import OnLimit, check_on_limit
from .stats import Counters, track

__all__ = ["FunctionCache", "identity_compiler"]

Compiler = Callable[[CompileRequest], Callable[..., Any]]
_P = ParamSpec("_P")  # the wrapped function's parameters and result (see cache.decorators)
_R = TypeVar("_R")
_DEFAULT_LIMIT = 8
_UNSET: Any = object()


class FunctionCache(CacheInspection, Generic[_P, _R]):
    """The entries of one specialized function, and everything known about them.

    Reached as ``specialized.cache`` or ``jitguard.cache_of(specialized)``. Inspection:
    ``entries()``, ``stats()``, ``recompiles`` (the last ``history`` records),
    ``recompile_counts``, ``reasons()``, ``guard_failure_counts()``, ``compile_ids()``,
    ``dynamic``, ``lookup(*args, **kwargs)``, ``dispatcher`` (its ``source``: the generated
    dispatcher), ``store_key`` and ``store_events()`` (with a store: [Note: Persistent
    entries]); ``clear()`` forgets everything (stored entries are read again on the next
    miss). See [Note: The call path].
    """

    @property
    def torch_names(self) -> bool:
        """Whether recompile reasons name locals as torch.compile does (``x``, not
        ``L['x']``): the torch frontend's scope says so ([Note: Recompile reasons])."""
        return self.scope.torch_names

    def __init__(
        self,
        fn: Callable[_P, _R],
        compiler: Optional[Compiler] = None,
        *,
        recompile_limit: Optional[int] = _UNSET,
        on_limit: str = "fallback",
        automatic_dynamic: bool = True,
        static: Iterable[SourceLike] = (),
        dynamic: Iterable[SourceLike] = (),
        error_on_recompile: bool = False,
        policy: Union[ArgPolicy, str, None] = None,
        global_state: Optional[bool] = None,
        max_restarts: int = 8,
        maxsize: Optional[int] = None,
        history: int = HISTORY,
        store: Any = None,
        fallback: Optional[Callable[..., Any]] = None,
        scope: Optional[Scope] = None,
        where: Optional[str] = None,
    ) -> None:
        """The cache of ``fn``: see the class docstring for the options.

        Over 80 lines: the wiring of one cache (options, compile job, logs, dispatcher, store,
        first snapshot), in the order its parts need each other."""
        recompile_limit = _checked(fn, compiler, maxsize, recompile_limit)
        # [Note: Scopes]: what the frontend decides (specialize's own: LocalScope)
        self.scope: Scope = scope if scope is not None else LocalScope()
        self.maxsize = maxsize
        self.fn = fn
        self.compiler: Compiler = compiler or identity_compiler
        self.signature = Signature(fn)
        self._recompile_limit: Optional[int] = recompile_limit
        self._on_limit = check_on_limit(on_limit, fallback)
        # What a miss past the limit runs ([Note: Recompile limits]).
        self.fallback: Callable[..., Any] = fallback if fallback is not None else fn
        self.automatic_dynamic = automatic_dynamic
        self.error_on_recompile = error_on_recompile
        self.policy = resolve_policy(policy)
        self.global_state = global_state
        self.max_restarts = max_restarts
        declared_static = self._declared(static, "static")
        declared_dynamic = self._declared(dynamic, "dynamic")
        if declared_static & declared_dynamic:
            raise ValueError(
                f"declared both static and dynamic: {sorted(s.name() for s in declared_static & declared_dynamic)}"
            )
        self.where, frame = where_and_frame(fn)
        job = CompileJob(
            fn=fn, compiler=self.compiler, signature=self.signature, policy=self.policy,
            f_globals=self.scope.globals_of(fn), frame=frame, where=self.where,
            global_state=global_state, max_restarts=max_restarts,
        )
        # Reentrant: a compiler that calls clear() (or anything else that locks) from inside
        # its own compile must not deadlock. Calls of the function itself from inside its
        # compile never get here ([Note: The call path]).
        self._lock = threading.RLock()
        self._counters = Counters()
        recompiles = RecompileHistory(history)
        self._lru = Lru() if maxsize is not None else None
        # [Note: A replaced __code__]: a plain Python function's code is watched, and the
        # code of each function it wraps.
        self._watched = self.scope.watch_target(fn)
        self._watch_chain: tuple[types.FunctionType, ...] = (
            () if self._watched is None else tuple(
                f for f in wrapped_chain(self._watched) if type(f) is types.FunctionType))
        self._codes = tuple(f.__code__ for f in self._watch_chain)
        self.dispatcher = Dispatcher(
            self.signature, getattr(fn, "__name__", ""), self._miss,
            tick=self._lru.tick if self._lru is not None else None, watch=self._watch_chain,
        )
        # [Note: Persistent entries]: None unless a store is on and the compiler can use it.
        self._persist: Optional[Persistence] = open_persistence(fn, self.compiler, store,
                                                                 self.where, self._watched)
        if self._persist is not None:
            self._persist.params = self.signature.params
            # a loaded entry's guards read the globals a compiled one's read (the scope's:
            # a decorated function's own under jitguard.torch.compile, not the wrapped's)
            self._persist.f_globals = job.f_globals
        self._table = EntryTable(self.dispatcher, self.signature.params, self._counters,
                                 lru=self._lru, redirect=self._redirect, history=recompiles)
        # the miss path and the state only it changes ([Note: The call path])
        self._misses = MissPath(self, job, static=declared_static, dynamic=declared_dynamic,
                                history=recompiles, table=self._table, counters=self._counters,
                                target=self._compile_target, persist=self._persist)
        functools.update_wrapper(self.dispatcher.function, fn)
        # The C Dispatch object (when the C hot path is on) shares the generated
        # function's __dict__ and names ([Note: The C hot path]).
        self.function: Callable[_P, _R] = self.dispatcher.public
        self.function.cache = self  # type: ignore[attr-defined]
        if where is not None:
            # the frontend's name for the function, in what the cache and a compile say (the
            # compile log and the store keep the function's own)
            self.where = self._misses.job.where = where
        track(self)

    @property
    def recompile_limit(self) -> Optional[int]:
        """The recompile limit in force ([Note: Recompile limits]; the scope may follow a
        frontend's own setting)."""
        return self.scope.recompile_limit(self._recompile_limit)

    @recompile_limit.setter
    def recompile_limit(self, value: Optional[int]) -> None:
        self._recompile_limit = value

    @property
    def on_limit(self) -> OnLimit:
        """What a miss past the limit does: "fallback" or "raise"."""
        return self.scope.on_limit(self._on_limit)

    @property
    def compiles(self) -> int:
        """The compiles since the last ``clear()`` (or start over)."""
        return self._misses.compiles

    def _declared(self, names: Iterable[SourceLike], what: str) -> frozenset[Source]:
        if isinstance(names, str):
            names = (names,)
        elif not isinstance(names, Iterable):
            raise TypeError(
                f"{what}= takes parameter names or sources (e.g. {what}=['n'] or "
                f"{what}=[L['x']]), got {names!r} of type {type(names).__name__}"
            )
        out = frozenset(as_source(n) for n in names)
        for source in out:
            if root_name(source) not in self.signature.params:
                raise ValueError(
                    f"{what}: {source.name()} is not (under) a parameter of {self.fn!r}; "
                    f"parameters: {list(self.signature.params)}"
                )
        return out

    # ---- the miss path ----------------------------------------------------------------
    # [Note: A replaced __code__]
    # Entries are compiled from ``fn`` as it was (a compiler may read its code: trace it,
    # hand it to numba). Assigning ``fn.__code__`` makes every one of them stale, and no
    # guard names ``fn`` itself, so the dispatchers watch it: every call first compares
    # ``fn.__code__`` with the code the entries were compiled from (an attribute read and
    # an ``is`` in the generated dispatcher, a pointer compare in the C hot path, which
    # forwards the call when they differ) and goes to the miss path when it was replaced.
    # There the cache starts over as ``clear()`` does (entries, counts, records), under the
    # new code, with the new code's store key (the old code's stored entries stay under the
    # old key, never loaded for the new code), and the call compiles; so the entries in use
    # always come from the code ``fn`` has now (as torch.compile's cache lives on the code
    # object). The specialized function keeps the signature it was made with. Only a plain
    # Python function is watched (not a ``functools.partial`` or a callable object); a
    # subclass may watch another function (a torch module call's cache watches ``forward``),
    # whose code is then part of the store key too. A ``functools.wraps`` wrapper is what
    # runs, and it runs what it wraps (a compiler may inline it): the code of every plain
    # function of its ``__wrapped__`` chain (as it was when specialized) is watched too, and
    # is part of the store key ([Note: Store keys]); replacing any of them starts over.
    # A compile is given (``request.fn``) not ``fn`` but a copy of it holding the code the
    # cache holds when the compile starts: a swap of ``fn.__code__`` while a compile is in
    # progress (A -> B -> A) cannot make the compiler read B for an entry kept under A. A
    # call of the function from inside its own compile runs ``fn`` uncompiled and never
    # starts the cache over (the entry being compiled is kept under the code it was compiled
    # from; the next call sees the swap). What a wrapper wraps is not copied: a swap of its
    # code put back within one compile is not seen.
    def code_replaced(self) -> bool:
        """Whether ``fn.__code__`` (or a wrapped function's) is not the code the entries
        were compiled from."""
        for f, code in zip(self._watch_chain, self._codes, strict=True):
            if f.__code__ is not code:
                return True
        return False

    def _start_over(self) -> None:
        """[Note: A replaced __code__]: forget the entries of the old code."""
        with self._lock:
            if not self.code_replaced():
                return
            codes = tuple(f.__code__ for f in self._watch_chain)
            if self._persist is not None:
                self._persist.rekey()  # the old code's stored entries are not this code's
            self.clear()
            self._codes = codes
            self.dispatcher.watch_code(codes)
            log.info("%s: its __code__ was replaced: the cache starts over", self.where)

    def _miss(self, *values: Any) -> Any:
        other = self.scope.elsewhere(self, values)  # [Note: Scopes]
        if other is not None:
            other.slow_hits += 1
            return self.signature.forward(other.artifact, *values)
        if self.code_replaced():
            if in_own_compile(self):  # the compile in progress keeps the code it started with
                return self._uncompiled(values)
            self._start_over()
        note_static_types(values)  # [Note: Static types in the generated dispatcher]
        table = self._table
        entry = table.snapshot.lookup(values)
        if entry is not None:
            entry.slow_hits += 1
            table.touch(entry)
            if dispatch_log.isEnabledFor(logging.DEBUG):
                dispatch_log.debug("%s: hit %s off the fast path", self.where, entry.compile_id)
            return self.signature.forward(entry.artifact, *values)
        if in_own_compile(self):
            return self._uncompiled(values)
        with self._lock:
            if table.dirty:
                self._drop_dead()
            entry = table.snapshot.lookup(values)
            if entry is None and self._persist is not None and self._persist.pending:
                entry = load_stored(self._persist, self._misses, values)
            if entry is not None:
                entry.slow_hits += 1
                table.touch(entry)
                target = entry.artifact
            else:
                target = self._misses.serve(values)
        return self.signature.forward(target, *values)

    def _uncompiled(self, values: tuple[Any, ...]) -> Any:
        """A call made from inside the function's own compile ([Note: The call path])."""
        return self.signature.forward(self._misses.uncompiled(), *values)

    def _compile_target(self) -> Callable[..., Any]:
        """The ``request.fn`` of a compile: for a watched plain function, a copy of it whose
        code is the one the entries are compiled from ([Note: A replaced __code__])."""
        fn = self.fn
        if self._watched is not fn:
            return fn
        assert isinstance(fn, types.FunctionType)
        pinned = types.FunctionType(self._codes[0], fn.__globals__, fn.__name__,
                                    fn.__defaults__, fn.__closure__)
        pinned.__kwdefaults__ = fn.__kwdefaults__
        pinned.__qualname__, pinned.__module__ = fn.__qualname__, fn.__module__
        pinned.__doc__, pinned.__dict__ = fn.__doc__, fn.__dict__  # its attributes, shared
        pinned.__annotations__ = fn.__annotations__
        if hasattr(fn, "__type_params__"):  # Python 3.12
            pinned.__type_params__ = fn.__type_params__  # type: ignore[attr-defined]
        return pinned

    def closest(self, values: tuple[Any, ...], limit: int) -> tuple[list[CacheEntry], int]:
        """This cache's entries whose failures explain a miss of ``values`` ([Note: Recompile
        reasons]), and how many others were left out (the miss asks its scope, which may add
        other caches')."""
        return self._table.snapshot.closest(values, limit)

    def find(self, values: tuple[Any, ...]) -> Optional[CacheEntry]:
        """The entry the published snapshot serves for these parameter values (None: a
        miss, as every call is once the function's code object was replaced)."""
        if self.code_replaced():
            return None
        return self._table.snapshot.lookup(values)

    def _redirect(self, *args: Any, **kwargs: Any) -> Any:
        """What a dead entry's slots call instead of its artifact: the careful path."""
        return self._miss(*self.signature.bind(*args, **kwargs))

    def _drop_dead(self) -> None:
        for entry in self._table.drop_dead():
            log.info("%s: dropped entry %s: %s", self.where, entry.compile_id,
                     entry.invalid_reason)

    # ---- inspection (the rest: cache.inspection) ----------------------------------------
    def lookup(self, *args: Any, **kwargs: Any) -> Optional[CacheEntry]:
        """The entry a call with these arguments would use (None: it would miss, as every
        call does once the function's code object was replaced)."""
        values = self.signature.bind(*args, **kwargs)
        if self.code_replaced():
            return None
        found = self._table.snapshot.lookup(values)
        return found if found is not None else self.scope.elsewhere(self, values)

    def clear(self) -> None:
        """Forget every entry, record, count and automatic-dynamic marking."""
        with self._lock:
            with self._counters.lock:  # stats() sees the counts before or after, not between
                self._misses.reset()
                self._table.reset()
                self._counters.reset()
            if self._persist is not None:
                self._persist.reset()
            self._table.publish([])


def _checked(fn: Any, compiler: Any, maxsize: Any, recompile_limit: Any) -> Optional[int]:
    """The recompile limit of a new cache (``recompile_limit`` unless not given), once its
    options are checked."""
    if not callable(fn):
        raise TypeError(f"specialize needs a callable, got {fn!r}")
    if compiler is not None and not callable(compiler):
        raise TypeError(f"compiler must be callable, got {compiler!r}")
    if maxsize is not None and (
        not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 1
    ):
        raise ValueError(f"maxsize must be None or an int >= 1, got {maxsize!r}")
    if recompile_limit is _UNSET:  # [Note: maxsize]: a bounded cache keeps compiling
        recompile_limit = _DEFAULT_LIMIT if maxsize is None else None
    if recompile_limit is not None and (
        not isinstance(recompile_limit, int) or isinstance(recompile_limit, bool)
        or recompile_limit < 1
    ):
        raise ValueError(
            f"recompile_limit must be None or an int >= 1, got {recompile_limit!r}"
        )
    return recompile_limit
