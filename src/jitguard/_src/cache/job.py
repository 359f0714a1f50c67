"""Compiling one entry: the attempts (default guards, the user's compiler, aliasing guards,
restarts) and the check function; and which sources a recompile makes dynamic.

May import: errors, guards, ids, sources, global_state, contexts, compiler.*,
dispatch.signature, dispatch.entry, cache.policy, cache.request, cache.reasons.

See [Note: The call path] (steps 1-3) in ``specialize``.

# [Note: Automatic dynamic]
# When an existing entry rejects a call only because int parameters (or ints inside
# them: ``L['t'][0]``) have other values, i.e. every failure is an EQUALS_MATCH on an int
# that is an int again, those sources become dynamic for this function: the new entry
# guards them by type (``request.dynamic`` / ``request.dynamic_sources`` tell the
# compiler), and the old entry, more specific, keeps its own value. Declared ``static``
# parameters never become dynamic; ``automatic_dynamic=False`` turns this off.
#
# [Note: Arguments changed by the compiler]
# The argument rules run before the compiler and decide which parts to guard (the items of
# a list of 2); ``compile_guards`` runs after it and reads what each guard expects from
# the values as they are then. A compiler that mutates the arguments (one that runs ``fn``
# on them, and ``fn`` appends to a list) would make an entry that expects the new state
# (a list of 3, its third item unguarded) for an artifact made for the old one. So after
# the compiler the arguments are visited again, guards discarded: if any visited source
# now holds another object, or the parts differ, the compile is ``mutated``: no guards are
# built (they might not even build: a popped item), its artifact serves this call, and no
# entry is kept (the compile still counts towards the limit).
"""

from __future__ import annotations

import functools
import inspect
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Optional

from ..compiler import snapshot
from ..compiler.builder import GuardBuilder
from ..compiler.check import CheckFunction, compile_guards
from ..compiler.kinds import FACT_VALUE
from ..contexts import CompileContext, TracingContext, compile_context, tracing
from ..dispatch.entry import CacheEntry
from ..dispatch.signature import Signature
from ..errors import JitGuardError, RestartCompile
from ..global_state import global_states
from ..guards import Source
from ..ids import CompileId
from ..sources import GlobalStateSource, LocalSource
from .policy import ArgContext, ArgPolicy, root_name
from .reasons import EntryFailures
from .request import CompileRequest, as_source

__all__ = ["CompileJob", "Compiled", "covered", "identity_compiler", "int_value_sources",
           "pins_taker", "where_and_frame"]


def pins_taker(compiler: Any, artifact: Any, values: tuple[Any, ...]) -> Any:
    """What ``snapshot.install`` runs once a check has a front check: the compiler's
    ``pin_inputs(artifact, pins, values)``, where it has one ([Note: Inputs read from the
    pins]); None where it has none."""
    pin_inputs = getattr(compiler, "pin_inputs", None)
    if pin_inputs is None:
        return None
    return lambda pins: pin_inputs(artifact, pins, values)


def identity_compiler(request: CompileRequest) -> Callable[..., Any]:
    """The default compiler: the artifact is ``fn`` itself (the cache then only remembers
    which specializations were seen, and dispatches to them). Its entries can be stored:
    the artifact's bytes are empty, and ``fn`` is the artifact again on load."""
    return request.fn


def _identity_serialize(artifact: Callable[..., Any]) -> bytes:
    return b""


def _identity_deserialize(data: bytes, fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


identity_compiler.serialize = _identity_serialize  # type: ignore[attr-defined]
identity_compiler.deserialize = _identity_deserialize  # type: ignore[attr-defined]


def covered(source: Source, marked: frozenset[Source]) -> bool:
    """True if ``source`` or a source it is derived from is in ``marked``."""
    return not marked.isdisjoint(source.chain())


class Compiled:
    """The outcome of a compile: the artifact, its check, the request it answered, and the
    dynamic/static markings in force at the end (restarts may have added some)."""

    def __init__(self, artifact: Callable[..., Any], check: Optional[CheckFunction],
                 request: CompileRequest, dynamic: frozenset[Source],
                 static: frozenset[Source], mutated: bool = False) -> None:
        self.artifact = artifact
        self.check = check
        self.request = request
        self.dynamic = dynamic
        self.static = static
        # The compiler changed the arguments ([Note: Arguments changed by the compiler]);
        # ``check`` is then None (no guards are built).
        self.mutated = mutated


class CompileJob:
    """What stays the same across the compiles of one function."""

    def __init__(
        self, *, fn: Callable[..., Any], compiler: Callable[[CompileRequest], Any],
        signature: Signature, policy: ArgPolicy, f_globals: Optional[dict[str, Any]],
        frame: Optional[traceback.FrameSummary], where: str, global_state: Optional[bool],
        max_restarts: int,
    ) -> None:
        self.fn = fn
        self.compiler = compiler
        self.signature = signature
        self.policy = policy
        self.f_globals = f_globals
        self.frame = frame
        self.where = where
        self.global_state = global_state
        self.max_restarts = max_restarts

    def run(
        self, compile_id: CompileId, values: tuple[Any, ...], *, dynamic: frozenset[Source],
        static: frozenset[Source], recompile: bool, on_restart: Callable[[], None],
        fn: Optional[Callable[..., Any]] = None,
    ) -> Compiled:
        """Compile an entry for ``values`` (the request's ``fn``: ``fn``, else the job's).
        Exceptions propagate unchanged."""
        params = self.signature.params
        target = self.fn if fn is None else fn
        ctx = CompileContext(compile_id)
        with compile_context(ctx):
            while True:
                tc = TracingContext(None)
                try:
                    with tracing(tc), TracingContext.current_frame(self.frame):
                        artifact, request, mutated = self._attempt(
                            tc, compile_id, values, dynamic, static, recompile, target
                        )
                    break
                except RestartCompile as restart:
                    on_restart()
                    if ctx.attempt >= self.max_restarts:
                        raise JitGuardError(
                            f"{self.where}: the compiler restarted {ctx.attempt + 1} times "
                            f"(max_restarts={self.max_restarts}); last: {restart.reason}"
                        ) from restart
                    ctx.attempt += 1
                    static = static | frozenset(as_source(s) for s in restart.static)
                    dynamic = (dynamic | frozenset(as_source(s) for s in restart.dynamic)) - static
            if mutated:  # no entry: its guards would describe the changed arguments
                return Compiled(artifact, None, request, dynamic, static, mutated)
            gc = tc.guards_context
            check = compile_guards(
                list(gc.dynamo_guards),
                env_exprs=list(gc.aotautograd_guards),
                shape_guards=request.shape_guards,
                symbol_sources=request.symbol_sources,
                f_locals=dict(zip(params, values, strict=True)),
                f_globals=self.f_globals,
                arg_names=params,
                name=f"{getattr(self.fn, '__qualname__', 'fn')} {compile_id}",
            )
            # a front check for large structure guard sets
            # ([Note: Skipping structure guards by version tags]); a compiler whose
            # artifact can take its inputs from what it pinned is told
            # ([Note: Inputs read from the pins])
            snapshot.install(check, values, then=pins_taker(self.compiler, artifact, values))
        return Compiled(artifact, check, request, dynamic, static, mutated)

    def _in_play(self, values: tuple[Any, ...],
                 names: Optional[tuple[str, ...]]) -> Optional[tuple[str, ...]]:
        """The states to guard when ``global_state`` is None: the application's, and those
        of the owners in play ([Note: Global states in play]); None: every one of ``names``
        (every guarded state when ``names`` is None)."""
        says = getattr(self.compiler, "reads_global_states", False)
        if says is True:
            return names
        owners = set(global_states.owners_in_play(values))
        if says:
            owners.update(says if not isinstance(says, str) else (says,))
        chosen = names if names is not None else tuple(s.name for s in global_states.guarded())
        kept = tuple(n for n in chosen if global_states.get(n).owner in (None, *owners))
        return None if names is None and len(kept) == len(chosen) else kept

    def _attempt(
        self, tc: TracingContext, compile_id: CompileId, values: tuple[Any, ...],
        dynamic: frozenset[Source], static: frozenset[Source], recompile: bool,
        fn: Callable[..., Any],
    ) -> tuple[Callable[..., Any], CompileRequest, bool]:
        def add(guard: Any) -> None:
            tc.guards_context.dynamo_guards.add(guard, skip=1)

        def visit_arguments(add: Callable[[Any], None]) -> ArgContext:
            ctx = ArgContext(
                self.policy, add,
                is_dynamic=lambda s: covered(s, dynamic),
                is_static=lambda s: covered(s, static),
                fresh=self.signature.fresh(), receiver=self.signature.receiver,
            )
            for name, value in zip(self.signature.params, values, strict=True):
                ctx.visit(LocalSource(name, is_input=True), value)
            return ctx

        argctx = visit_arguments(add)
        before = argctx.identities()  # the compiler may visit more (globals it read)
        request = CompileRequest(
            fn=fn, signature=self.signature, values=values, compile_id=compile_id,
            tracing_context=tc, arg_context=argctx, static=static, recompile=recompile,
        )
        argctx.request = request
        artifact = self.compiler(request)
        if not callable(artifact):
            raise TypeError(
                f"the compiler of {self.where} returned {artifact!r}, not a callable artifact"
            )
        # After the compiler: a state registered while it ran (an integration loaded by an
        # import in the traced code) is guarded too.
        if self.global_state is not False and global_states.guarded():
            names = request.global_state_names()
            if self.global_state is None:  # [Note: Global states in play]
                names = self._in_play(values, names)
            kind = GuardBuilder.GLOBAL_STATE
            if names is not None:
                kind = functools.partial(GuardBuilder.GLOBAL_STATE, states=names)
            if names is None or names:
                add(GlobalStateSource().make_guard(kind))
        for guard in argctx.aliasing_guards(request.aliasing_allowed):
            add(guard)
        again = visit_arguments(lambda guard: None)
        return artifact, request, again.identities() != before


def int_value_sources(
    entries: Sequence[CacheEntry], per_entry: Sequence[EntryFailures], values: tuple[Any, ...],
    params: tuple[str, ...], f_globals: Any, static: frozenset[Source],
) -> frozenset[Source]:
    """The sources [Note: Automatic dynamic] makes dynamic after these failures."""
    f_locals = dict(zip(params, values, strict=True))
    found: set[Source] = set()
    for entry, item in zip(entries, per_entry, strict=True):
        found |= _int_value_failures(entry, item.failures, f_locals, f_globals)
    return frozenset(s for s in found if not covered(s, static))


def _int_value_failures(
    entry: CacheEntry, failures: Any, f_locals: dict[str, Any], f_globals: Any
) -> set[Source]:
    """The sources of ``failures`` if every one is a guard pinning an int's value (its kind's
    ``fact`` is the "value" fact: EQUALS_MATCH's) on (something under) a parameter whose
    value is an int again; else nothing."""
    leaves = {id(leaf.guard): leaf for leaf in entry.check.leaves if leaf.guard is not None}
    out: set[Source] = set()
    for failure in failures:
        guard = failure.guard
        leaf = leaves.get(id(guard)) if guard is not None else None
        if leaf is None or type(leaf.params) is not int:
            return set()
        fact = leaf.kind.fact(leaf.params)
        if fact is None or fact[0] != FACT_VALUE.name:
            return set()
        source = leaf.sources[0]
        if root_name(source) not in f_locals:
            return set()
        try:
            now = source.get_value(f_locals, f_globals)
        except Exception:
            return set()
        if type(now) is not int:
            return set()
        out.add(source)
    return out


def where_and_frame(fn: Any) -> tuple[str, Optional[traceback.FrameSummary]]:
    """How messages name ``fn`` (``qualname in file:line``), and its frame for stacks."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    qualname = getattr(fn, "__qualname__", type(fn).__qualname__)
    if code is None:
        return qualname, None
    return (f"{qualname} in {code.co_filename}:{code.co_firstlineno}",
            traceback.FrameSummary(code.co_filename, code.co_firstlineno, code.co_name,
                                   lookup_line=False))
