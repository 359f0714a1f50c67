"""What the user's compiler is given (``CompileRequest``) and how it asks to start over
(``RestartCompile``, which lives in ``errors``).

May import: errors, global_state, guards, ids, sources, contexts, dispatch.signature,
cache.policy.

# [Note: The compiler contract]
# ``compiler(request) -> artifact``: the artifact is a callable taking the same arguments as
# ``fn``. The compiler runs inside ``compile_context`` and ``tracing`` with a fresh
# ``TracingContext`` whose ``guards_context.dynamo_guards`` already holds the default guards
# of the arguments ([Note: Argument rules]). Whatever the artifact relies on beyond those,
# the compiler guards itself: ``TracingContext.get().guards_context.dynamo_guards.add(
# source.make_guard(GuardBuilder.X))`` (``request.add_guard`` is the same),
# ``guards_context.aotautograd_guards.append(env_expr)``, and shape guards with the map from
# their symbols to sources through ``request.add_shape_guards``. Raising ``RestartCompile``
# starts the attempt again (``CompileContext.attempt`` counts up, so ``request.trace_id``
# reads ``0/1_1``) from a fresh tracing context, optionally with some arguments now
# dynamic or static. Any other exception reaches the caller of the specialized function
# unchanged, and the cache stays as it was.
#
# [Note: Global states a compiler leaves out]
# Every entry is guarded by GLOBAL_STATE over every guarded state of the registry, because
# the cache cannot know which of them the artifact reads. A compiler that does know may say
# so: ``request.ignore_global_states("autocast_cpu_dtype", guard_instead=[...])`` leaves a
# state out of the entry's GLOBAL_STATE guard, and may name a weaker state to check in its
# place. That is a claim about the artifact, and only as sound as the compiler's knowledge
# (jitguard.torch.compile makes it for the autocast dtypes of a capture that read none:
# [Note: Autocast dtypes a capture did not read]).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn, Optional, Union

from ..contexts import CompileContext, TracingContext
from ..dispatch.signature import Signature
from ..errors import JitGuardError, RestartCompile
from ..global_state import global_states
from ..guards import GuardEnvExpr, Source
from ..ids import CompileId, TraceId
from ..sources import LocalSource
from .policy import ArgContext, root_name

__all__ = ["CompileRequest", "RestartCompile"]

SourceLike = Union[str, Source]


def as_source(what: SourceLike) -> Source:
    """A parameter name as its ``LocalSource``; a source as itself; anything else is a
    TypeError naming it (it failed later, as an AttributeError of the value)."""
    if isinstance(what, str):
        return LocalSource(what, is_input=True)
    if not isinstance(what, Source):
        raise TypeError(
            f"expected a parameter name (str) or a Source, got {type(what).__name__} "
            f"{what!r}: name the parameter, as dynamic=['x'], or pass a source such as "
            f"AttrSource(LocalSource('x'), 'n')"
        )
    return what


class CompileRequest:
    """One compile of a specialized function, as its compiler sees it.

    ``fn``: the function (for a plain Python function, a copy of it holding the code the
    compile is for, so that replacing the function's code during the compile changes
    nothing; its globals, closure, defaults and ``__dict__`` are the function's);
    ``arguments``: parameter name -> value for this call (defaults
    applied); ``args``/``kwargs``: the same as a call (``fn(*args, **kwargs)``);
    ``sources``: parameter name -> its ``LocalSource``; ``compile_id``; ``trace_id`` (with
    the current attempt); ``tracing_context``; ``dynamic``/``static``: the parameter names
    guarded loosely / by value; ``dynamic_sources``: every source guarded as dynamic
    (nested ones too). See [Note: The compiler contract].
    """

    def __init__(
        self,
        *,
        fn: Callable[..., Any],
        signature: Signature,
        values: tuple[Any, ...],
        compile_id: CompileId,
        tracing_context: TracingContext,
        arg_context: ArgContext,
        static: frozenset[Source],
        recompile: bool,
    ) -> None:
        self.fn = fn
        self.signature = signature
        self.values = values
        self.compile_id = compile_id
        self.tracing_context = tracing_context
        self.arg_context = arg_context
        self.arguments: dict[str, Any] = dict(zip(signature.params, values, strict=True))
        self.sources: dict[str, LocalSource] = {
            n: LocalSource(n, is_input=True) for n in signature.params
        }
        self.recompile = recompile
        self.dynamic_sources: frozenset[Source] = frozenset(arg_context.dynamic_sources)
        self.dynamic: frozenset[str] = frozenset(
            s.local_name for s in self.dynamic_sources if isinstance(s, LocalSource)
        )
        self.static: frozenset[str] = frozenset(
            n for n in (root_name(s) for s in static) if n is not None
        )
        self.shape_guards: list[Any] = []
        self.symbol_sources: dict[Any, Source] = {}
        self.aliasing_allowed: set[Source] = set()
        self.ignored_states: dict[str, tuple[str, ...]] = {}

    @property
    def args(self) -> tuple[Any, ...]:
        return self.signature.split(self.values)[0]

    @property
    def kwargs(self) -> dict[str, Any]:
        return self.signature.split(self.values)[1]

    @property
    def trace_id(self) -> TraceId:
        ctx = CompileContext.try_get()
        return TraceId(self.compile_id, ctx.attempt if ctx is not None else 0)

    @property
    def attempt(self) -> int:
        return self.trace_id.attempt

    def source(self, name: str) -> LocalSource:
        """The source of parameter ``name``."""
        try:
            return self.sources[name]
        except KeyError:
            raise KeyError(f"{name!r} is not a parameter of {self.fn!r}") from None

    def is_dynamic(self, what: SourceLike) -> bool:
        return as_source(what) in self.dynamic_sources

    def add_guard(self, source: SourceLike, create_fn: Callable[..., Any]) -> None:
        """Guard ``source`` with ``create_fn`` (the same as adding to the tracing context's
        ``dynamo_guards``)."""
        self.tracing_context.guards_context.dynamo_guards.add(
            as_source(source).make_guard(create_fn), skip=1
        )

    def add_env_expr(self, expr: GuardEnvExpr) -> None:
        self.tracing_context.guards_context.aotautograd_guards.append(expr)

    def add_shape_guards(
        self, shape_guards: Iterable[Any], symbol_sources: Optional[Mapping[Any, Source]] = None
    ) -> None:
        """Shape guards (``ShapeGuard``s or sympy booleans) for the entry, and the source each
        of their symbols stands for."""
        self.shape_guards.extend(shape_guards)
        if symbol_sources:
            self.symbol_sources.update(symbol_sources)

    def allow_aliasing(self, *sources: SourceLike) -> None:
        """Say the artifact does not care whether these arguments are the same object as
        another: no aliasing guards are made for them ([Note: Aliasing guards])."""
        self.aliasing_allowed.update(as_source(s) for s in sources)

    def ignore_global_states(self, *names: str, guard_instead: Iterable[str] = ()) -> None:
        """Say the artifact does not depend on these global states: the entry's GLOBAL_STATE
        guard leaves them out, and checks the states ``guard_instead`` names (registered,
        guarded or not: a weaker state that still matters) in their place. The compiler
        answers for this being true ([Note: Global states a compiler leaves out])."""
        instead = tuple(guard_instead)
        for name in (*names, *instead):
            if name not in global_states:
                raise JitGuardError(
                    f"ignore_global_states: no global state named {name!r}; registered: "
                    f"{sorted(s.name for s in global_states.states())}"
                )
        for name in names:
            self.ignored_states[name] = instead

    def global_state_names(self) -> Optional[tuple[str, ...]]:
        """The states the entry's GLOBAL_STATE guard checks: None for every guarded state
        (nothing ignored), else the guarded ones not ignored and those guarded instead."""
        if not self.ignored_states:
            return None
        kept = [s.name for s in global_states.guarded() if s.name not in self.ignored_states]
        extra = [n for i in self.ignored_states.values() for n in i]
        return tuple(dict.fromkeys([*kept, *extra]))

    def restart(
        self, reason: str = "", *, dynamic: Iterable[SourceLike] = (),
        static: Iterable[SourceLike] = (),
    ) -> NoReturn:
        """Start this compile again (raises ``RestartCompile``)."""
        raise RestartCompile(reason, dynamic=dynamic, static=static)

    def __repr__(self) -> str:
        return f"<CompileRequest {self.trace_id} for {getattr(self.fn, '__qualname__', self.fn)}>"
