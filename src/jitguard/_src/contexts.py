"""The per-thread tracing state: ``GuardsSet``/``GuardsContext`` (the guards installed so far),
``CompileContext`` (one compile, across restarts), ``TracingContext`` (one attempt), the
``compile_context``/``tracing`` context managers, the higher-order-op caches, and fake-mode
detection.

May import: errors, _util, stacks, weak, integrations, ids, guards, checkpoints.

# [Note: Context threading]
# Both current contexts live in one ``threading.local``; each thread sees only the contexts
# it entered itself, and a thread that never entered one sees None from ``try_get()``.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from abc import abstractmethod
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Iterator
from types import CodeType
from typing import Any, Optional

from ._util import OrderedSet
from .checkpoints import Checkpointable, GlobalContext, GuardsCheckpointState, ModuleContext
from .errors import NoCompileContextError, NoTracingContextError
from .guards import Guard, GuardEnvExpr, Source
from .ids import CompileId, TraceId
from .integrations import ensure_loaded
from .stacks import CapturedStack
from .weak import WeakIdKeyDictionary

__all__ = [
    "CompileContext",
    "GuardsContext",
    "GuardsSet",
    "HopDispatchSetCache",
    "HopSubgraphCache",
    "InvokeSubgraphCache",
    "TracingContext",
    "active_fake_mode",
    "compile_context",
    "detect_fake_mode",
    "integration_hooks",
    "tracing",
]


class _Hooks:
    """What an integration (torch) plugs in here; see [Note: Lazy integrations]."""

    # () -> {higher-order op: its cache}, for HopDispatchSetCache
    hop_caches: Optional[Callable[[], dict[Any, HopSubgraphCache]]] = None
    # (inputs, tracing-context fake mode or None) -> fake mode or None
    detect_fake_mode: Optional[Callable[[Any, Any], Any]] = None
    # () -> the innermost active fake mode or None
    active_fake_mode: Optional[Callable[[], Any]] = None


integration_hooks = _Hooks()


class GuardsSet:
    """A set of guards that records, on each guard, where it was installed: the framework
    stack (cheaply, see [Note: Cheap stack capture]) and the user stack of the trace."""

    def __init__(self, inner: Optional[Iterable[Guard]] = None) -> None:
        self.inner: Any = OrderedSet() if inner is None else inner

    def __iter__(self) -> Iterator[Guard]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)

    def __sub__(self, other: GuardsSet) -> GuardsSet:
        """The guards added since ``other`` was taken (used with checkpoints)."""
        return GuardsSet(OrderedSet(g for g in self.inner if g not in other.inner))

    def __bool__(self) -> bool:
        return bool(self.inner)

    def add(self, guard: Guard, *, collect_debug_stack: bool = True, skip: int = 0) -> None:
        """Add ``guard`` unless an equal one is present, recording its stacks first."""
        if guard in self.inner:
            return
        if collect_debug_stack and guard.stack is None:
            guard.stack = CapturedStack.extract(skip=1 + skip)
        if guard.user_stack is None:
            guard.user_stack = TracingContext.extract_stack()
        self.inner.add(guard)

    def update(self, *others: Iterable[Guard]) -> None:
        for other in others:
            for guard in other:
                self.add(guard, skip=1)

    def clear(self) -> None:
        self.inner = OrderedSet()

    def get_guards_for_source(self, source: Source) -> list[Guard]:
        """The guards whose originating source is ``source``."""
        return [g for g in self.inner if g.originating_source == source]

    def remove_guards_with_source(self, source: Source) -> None:
        """Delete all guards on ``source`` or on anything derived from it."""
        self.inner = OrderedSet(
            g for g in self.inner if source not in g.originating_source.chain()
        )


class GuardsContext(Checkpointable[GuardsCheckpointState]):
    """All guards of the current trace: ``dynamo_guards`` (guards on sources) and
    ``aotautograd_guards`` (environment expressions found after tracing). Bound 1:1 to a
    ``TracingContext``."""

    def __init__(self) -> None:
        self.dynamo_guards: GuardsSet = GuardsSet()
        self.aotautograd_guards: list[GuardEnvExpr] = []

    def copy_graphstate(self) -> GuardsCheckpointState:
        return GuardsCheckpointState(OrderedSet(self.dynamo_guards.inner))

    def restore_graphstate(self, state: GuardsCheckpointState) -> None:
        """Adopt the snapshot's guards (the snapshot's set is taken over, not copied)."""
        if not isinstance(state, GuardsCheckpointState):
            raise AssertionError(f"expected a GuardsCheckpointState, got {state!r}")
        self.dynamo_guards = GuardsSet(state.dynamo_guards)


class HopSubgraphCache:
    """What a higher-order op caches about the subgraphs it traced (interface)."""

    @abstractmethod
    def add_dynamo_installed_submodule(self, fn_id: int, identifier: str) -> None: ...

    @abstractmethod
    def get_dynamo_installed_submodules(self, fn_id: int) -> list[str]: ...

    @abstractmethod
    def add_autograd_key_entry(self, identifier: str, key: Callable[..., Any]) -> None: ...

    @abstractmethod
    def get_autograd_key_entry(self, identifier: str) -> Optional[Callable[..., Any]]: ...

    @abstractmethod
    def add_proxy_dispatch_entry(self, identifier: str, key: Callable[..., Any]) -> None: ...

    @abstractmethod
    def get_proxy_dispatch_entry(self, identifier: str) -> Optional[Callable[..., Any]]: ...

    @abstractmethod
    def add_lazy_bwd_entry(
        self, identifier: str, tangent_metadata: tuple[object, ...], gmod: Any
    ) -> int: ...

    @abstractmethod
    def get_lazy_bwd_entry(
        self, identifier: str, tangent_metadata: tuple[object, ...]
    ) -> tuple[Optional[Any], Optional[int]]: ...


class InvokeSubgraphCache(HopSubgraphCache):
    """The cache of ``invoke_subgraph``: autograd and proxy-dispatch entries by identifier,
    installed submodules by function id, and lazily built backward graphs."""

    def __init__(self) -> None:
        self.autograd_cache: dict[str, Callable[..., Any]] = {}
        self.proxy_dispatch_cache: dict[str, Callable[..., Any]] = {}
        self.dynamo_installed_submodules: defaultdict[int, list[str]] = defaultdict(list)
        self.lazy_bwd_cache: defaultdict[str, dict[tuple[object, ...], tuple[Any, int]]] = (
            defaultdict(dict)
        )

    def add_dynamo_installed_submodule(self, fn_id: int, identifier: str) -> None:
        self.dynamo_installed_submodules[fn_id].append(identifier)

    def get_dynamo_installed_submodules(self, fn_id: int) -> list[str]:
        return self.dynamo_installed_submodules.get(fn_id, [])

    def add_autograd_key_entry(self, identifier: str, key: Callable[..., Any]) -> None:
        self.autograd_cache[identifier] = key

    def get_autograd_key_entry(self, identifier: str) -> Optional[Callable[..., Any]]:
        return self.autograd_cache.get(identifier)

    def add_proxy_dispatch_entry(self, identifier: str, key: Callable[..., Any]) -> None:
        self.proxy_dispatch_cache[identifier] = key

    def get_proxy_dispatch_entry(self, identifier: str) -> Optional[Callable[..., Any]]:
        return self.proxy_dispatch_cache.get(identifier)

    def add_lazy_bwd_entry(
        self, identifier: str, tangent_metadata: tuple[object, ...], gmod: Any
    ) -> int:
        """Store a backward graph; returns its number among this identifier's graphs."""
        entries = self.lazy_bwd_cache[identifier]
        num = len(entries)
        entries[tangent_metadata] = (gmod, num)
        return num

    def get_lazy_bwd_entry(
        self, identifier: str, tangent_metadata: tuple[object, ...]
    ) -> tuple[Optional[Any], Optional[int]]:
        if identifier not in self.lazy_bwd_cache:
            return (None, None)
        return self.lazy_bwd_cache[identifier].get(tangent_metadata, (None, None))


class HopDispatchSetCache:
    """The subgraph caches of the higher-order ops, by op. With torch imported it knows
    ``invoke_subgraph``; without torch it is empty."""

    def __init__(self) -> None:
        ensure_loaded()
        factory = integration_hooks.hop_caches
        self.hop_cache_map: dict[Any, HopSubgraphCache] = factory() if factory else {}

    def get_cache(self, op: Any) -> Optional[HopSubgraphCache]:
        return self.hop_cache_map.get(op)


_TLS = threading.local()


class CompileContext:
    """One compile of one frame, across restarts of its analysis (``attempt`` counts them)."""

    @staticmethod
    def get() -> CompileContext:
        """The current compile context; raises ``NoCompileContextError`` (an
        ``AssertionError``, as the specification's) outside one.

        The specification fails here with an unrelated ``AttributeError`` on a thread that
        never entered ``compile_context``; jitguard says what is wrong on every thread.
        """
        ctx = getattr(_TLS, "compile_context", None)
        if ctx is None:
            raise NoCompileContextError(
                "CompileContext.get() must be called within `with compile_context(ctx):` "
                "on this thread; use CompileContext.try_get() to get None instead"
            )
        return ctx

    @staticmethod
    def try_get() -> Optional[CompileContext]:
        return getattr(_TLS, "compile_context", None)

    def __init__(self, compile_id: Optional[CompileId]) -> None:
        if compile_id is not None and not isinstance(compile_id, CompileId):
            raise AssertionError(f"compile_id must be a CompileId or None, got {compile_id!r}")
        self.compile_id: Optional[CompileId] = compile_id
        self.attempt = 0
        self.shape_env_guards: list[str] = []

    @staticmethod
    def current_compile_id() -> Optional[CompileId]:
        ctx = CompileContext.try_get()
        return None if ctx is None else ctx.compile_id

    @staticmethod
    def current_trace_id() -> Optional[TraceId]:
        ctx = CompileContext.try_get()
        if ctx is None or ctx.compile_id is None:
            return None
        return TraceId(ctx.compile_id, ctx.attempt)


class TracingContext:
    """Everything one attempt at tracing accumulates: guards, modules, ambient state, the
    fake mode, the user's frame stack, and what later stages report back. A restart gets a
    fresh one; the ``CompileContext`` spans restarts."""

    @staticmethod
    def try_get() -> Optional[TracingContext]:
        return getattr(_TLS, "tracing_context", None)

    @staticmethod
    def get() -> TracingContext:
        ctx = TracingContext.try_get()
        if ctx is not None:
            return ctx
        raise NoTracingContextError("TracingContext.get() must be called within an ongoing trace.")

    def __init__(self, fake_mode: Optional[Any]) -> None:
        self.guards_context = GuardsContext()
        self.module_context = ModuleContext()
        self.global_context = GlobalContext()
        self.previously_inlined_functions: dict[Any, Any] = {}
        self.previously_cleaned_instructions: dict[Any, Any] = {}
        self.fake_mode: Optional[Any] = fake_mode
        self.frame_summary_stack: list[traceback.FrameSummary] = []
        # The line being traced in the innermost frame, as (filename, lineno, name); turned
        # into a FrameSummary only when a stack is extracted.
        self.loc_in_frame: Optional[tuple[str, int, str]] = None
        self.fw_metadata: Optional[Any] = None
        self.ddp_optimizer_ctx: Optional[Any] = None
        self.aot_graph_name: Optional[list[str]] = None
        self.params_flat: Optional[list[Any]] = None
        self.params_flat_unwrap_subclasses: Optional[list[Any]] = None
        self.params_unwrapped_to_flat_index: Optional[list[Any]] = None
        # Per output, the stride a backend promised, or None where unknown.
        self.output_strides: Optional[list[Optional[tuple[int, ...]]]] = None
        self.force_unspec_int_unbacked_size_like = False
        # Keyed by tensor identity, held weakly: tensors compare elementwise.
        self.tensor_to_context: WeakIdKeyDictionary[Any, Any] = WeakIdKeyDictionary()
        self.fakify_first_call = False
        self.hop_dispatch_set_cache = HopDispatchSetCache()
        self.traced_code: list[CodeType] = []

    def clear(self) -> None:
        """Forget the saved global state and the inlining caches."""
        self.global_context.global_state = {}
        self.previously_inlined_functions.clear()
        self.previously_cleaned_instructions.clear()

    @staticmethod
    @contextlib.contextmanager
    def patch(**kwargs: Any) -> Generator[None, None, None]:
        """Set fields of the current tracing context for the duration of the block."""
        ctx = TracingContext.get()
        prior = {}
        for key in kwargs:
            if not hasattr(ctx, key):
                raise AttributeError(f"TracingContext has no field {key!r} to patch")
            prior[key] = getattr(ctx, key)
        for key, val in kwargs.items():
            setattr(ctx, key, val)
        try:
            yield
        finally:
            for key, val in prior.items():
                setattr(ctx, key, val)

    @staticmethod
    def extract_stack() -> traceback.StackSummary:
        """The user stack being traced (empty outside a trace)."""
        ctx = TracingContext.try_get()
        if ctx is None:
            return traceback.StackSummary()
        stack = ctx.frame_summary_stack
        if ctx.loc_in_frame is not None:
            stack = [*stack, ctx._populate_loc_in_frame_summary()]
        return traceback.StackSummary.from_list(stack)

    def _populate_loc_in_frame_summary(self) -> traceback.FrameSummary:
        if self.loc_in_frame is None:
            raise AssertionError("no current location in frame")
        filename, lineno, frame_name = self.loc_in_frame
        return traceback.FrameSummary(filename, lineno, frame_name, lookup_line=False)

    @staticmethod
    @contextlib.contextmanager
    def clear_frame() -> Generator[None, None, None]:
        """Run a block with an empty user stack, e.g. when calling into a user compiler.

        An exception leaving the block gets ``real_stack = None`` unless it already carries
        one, so outer frames do not attach a stack that is not where it was raised.
        """
        tc = TracingContext.get()
        saved = (tc.frame_summary_stack, tc.loc_in_frame)
        tc.frame_summary_stack, tc.loc_in_frame = [], None
        try:
            yield
        except Exception as e:
            if not hasattr(e, "real_stack"):
                e.real_stack = None  # type: ignore[attr-defined]
            raise
        finally:
            tc.frame_summary_stack, tc.loc_in_frame = saved

    @staticmethod
    @contextlib.contextmanager
    def current_frame(
        frame_summary: Optional[traceback.FrameSummary],
    ) -> Generator[None, None, None]:
        """Push a user frame for the block (None pushes nothing but still attaches
        ``real_stack`` to an escaping exception)."""
        tc = TracingContext.get()
        if frame_summary is not None:
            tc.frame_summary_stack.append(frame_summary)
        old = tc.loc_in_frame
        tc.loc_in_frame = None
        try:
            yield
        except Exception as e:
            if not hasattr(e, "real_stack"):
                e.real_stack = tc.extract_stack()  # type: ignore[attr-defined]
            raise
        finally:
            if frame_summary is not None:
                tc.frame_summary_stack.pop()
            tc.loc_in_frame = old

    @staticmethod
    @contextlib.contextmanager
    def report_output_strides() -> Generator[Optional[list[Optional[tuple[int, ...]]]], None, None]:
        """Collect output strides a backend reports during the block (None outside a trace)."""
        tc = TracingContext.try_get()
        if tc is None:
            yield None
            return
        old = tc.output_strides
        tc.output_strides = []
        try:
            yield tc.output_strides
        finally:
            tc.output_strides = old

    @staticmethod
    def set_current_loc(filename: str, lineno: int, frame_name: str) -> None:
        """Record the line being traced; the FrameSummary is built only when needed."""
        TracingContext.get().loc_in_frame = (filename, lineno, frame_name)

    @staticmethod
    def get_traced_code() -> Optional[list[CodeType]]:
        tc = TracingContext.try_get()
        return None if tc is None else tc.traced_code


@contextlib.contextmanager
def compile_context(
    context: Optional[CompileContext],
) -> Generator[Optional[CompileContext], None, None]:
    """Make ``context`` this thread's current compile context for the block."""
    old = getattr(_TLS, "compile_context", None)
    _TLS.compile_context = context
    try:
        yield context
    finally:
        _TLS.compile_context = old


@contextlib.contextmanager
def tracing(context: Optional[TracingContext]) -> Generator[Optional[TracingContext], None, None]:
    """Make ``context`` this thread's current tracing context for the block.

    An exception leaving the block gets the user stack as ``real_stack`` (unless it has one),
    and the fake mode's shape env, if any, is cleaned up on the way out.
    """
    old = getattr(_TLS, "tracing_context", None)
    _TLS.tracing_context = context
    try:
        yield context
    except Exception as e:
        if not hasattr(e, "real_stack") and context is not None:
            e.real_stack = context.extract_stack()  # type: ignore[attr-defined]
        raise
    finally:
        if context is not None and context.fake_mode is not None:
            shape_env = getattr(context.fake_mode, "shape_env", None)
            if shape_env is not None:
                shape_env.cleanup()
        _TLS.tracing_context = old


def detect_fake_mode(inputs: Any = None) -> Optional[Any]:
    """The fake mode in use: the tracing context's, the active one on the dispatch stack, or
    the one of fake tensors among ``inputs`` (nested containers allowed); all found must be
    the same object (``AssertionError`` otherwise). None when there is none, and always
    None without torch (beyond a tracing context's own fake mode)."""
    ctx = TracingContext.try_get()
    ctx_mode = ctx.fake_mode if ctx is not None else None
    ensure_loaded()
    hook = integration_hooks.detect_fake_mode
    if hook is None:
        return ctx_mode
    return hook(inputs, ctx_mode)


def active_fake_mode() -> Optional[Any]:
    """The innermost fake mode on the dispatch mode stack, or None (always None without
    torch)."""
    ensure_loaded()
    hook = integration_hooks.active_fake_mode
    return None if hook is None else hook()
