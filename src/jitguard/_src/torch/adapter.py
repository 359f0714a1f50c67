"""The capture side of the torch adapter: TorchDynamo's full-graph capture, the guard
filter hook, backend lookup, the compile stance, torch's config knobs and exception types.
The other adapters (every torch internal jitguard uses sits in one of them):
``adapter_stored`` (serializing a capture and loading it back), ``adapter_runtime``
(torch's guard tree, the frame's locals, function modes, module hooks, reset) and
``adapter_sources`` (Dynamo's Source objects and ``GuardFilterEntry`` fields, for the
conversion).

May import: torch (its private modules too: that is what this module is for), the standard
library, jitguard._src.torch.adapter_stored, adapter_runtime, adapter_fast and
adapter_autocast. Nothing else from jitguard: the compiler above calls in, never the other
way.

tests/torch/test_adapter.py holds a test per internal used here, so a torch upgrade that
moves one breaks that test, loudly, and nothing else needs reading.

# [Note: Capturing with Dynamo]
# ``capture`` does what ``torch._dynamo.aot_compile.aot_compile_fullgraph`` does, minus the
# serialization: ``convert_frame.fullgraph_capture`` traces the function's bytecode (one
# graph or an error), the user's backend compiles the graph, and the guards are built by
# ``GraphCaptureOutput.build_guards(save=False)`` with our ``guard_filter_fn``. That hook
# sees every guard (a ``GuardFilterEntry``) and says which to keep in torch's guard
# manager: jitguard keeps there exactly the guards it could not convert, so that tree is
# the delegated part of the entry's check ([Note: Delegating to torch's guard tree]).
# aot_compile_fullgraph itself would serialize the kept guards, and some kinds refuse
# ("MODULE_MATCH guard cannot be serialized"); ``save=False`` serializes nothing, so any
# kind can be delegated. The capture runs with Dynamo's metrics context and function-mode
# handling, as aot_compile_fullgraph does; a second, complete tree (every guard kept) is
# built only for verify mode.
#
# The program that runs on a hit is the transformed bytecode over the function's *live*
# globals (Dynamo installed the compiled graph, its imports and builtins dicts there, under
# names of its own, as ``torch.compile`` does) and its live closure cells:
# aot_compile_fullgraph's ``fn`` runs over a copy of the globals taken at compile time,
# which would read a stale global after the user reassigned it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import Any, Optional

import torch
import torch._dynamo
import torch._dynamo.config as dynamo_config
import torch._dynamo.eval_frame as eval_frame
import torch._guards
from torch._dynamo import convert_frame
from torch._dynamo.backends.registry import lookup_backend
from torch._dynamo.exc import (
    BackendCompilerFailed,
    TorchRuntimeError,
    UncapturedHigherOrderOpError,
    Unsupported,
    UserError,
    exceptions_allowed_to_be_fallback,
)
from torch._dynamo.hooks import Hooks
from torch._dynamo.utils import dynamo_timed, get_metrics_context
from torch._dynamo.variables.torch_function import torch_function_mode_stack_state_mgr
from torch.fx.experimental.symbolic_shapes import (
    ConstraintViolationError,
    GuardOnDataDependentSymNode,
)

from .adapter_autocast import reads_autocast, recording_folds
from .adapter_fast import FAST_UTILS_NAME as FAST_UTILS_NAME
from .adapter_fast import UTILS_ALIAS as UTILS_ALIAS
from .adapter_fast import fast_helpers
from .adapter_runtime import without_function_modes
from .adapter_stored import SavedCapture, _saved
from .adapter_stored import saving as _saving

__all__ = [
    "BACKEND_GRAPH_BREAKS",
    "FAKE_RUN_ERRORS",
    "GRAPH_BREAKS",
    "BackendCompilerFailed",
    "BackendRaised",
    "Captured",
    "ScalarBreak",
    "backend_name",
    "capture",
    "capture_scalar_outputs",
    "current_compile_id",
    "current_torch_compile_id",
    "default_backend",
    "graph_sizes",
    "new_frame_id",
    "readable_graph",
    "reads_scalars",
    "recompile_limit",
    "resolve_backend",
    "stance",
    "suppress_errors",
    "suppressing_errors",
    "torch_backend",
]

#: What a capture raises for a graph break or an unsupported construct.
GRAPH_BREAKS: tuple[type[BaseException], ...] = (Unsupported, UncapturedHigherOrderOpError)
#: What a capture raises that must reach the caller as torch.compile raises it: a user
#: error (a marked dynamic dim that got specialized, a bad mark).
USER_ERRORS: tuple[type[BaseException], ...] = (UserError, ConstraintViolationError)
#: What a capture raises when an operation of the function failed on fake tensors (adding
#: a (4,) to a (3,)): the function's own error, which torch.compile raises as it is.
FAKE_RUN_ERRORS: tuple[type[BaseException], ...] = (TorchRuntimeError,)


class BackendRaised(Exception):
    """What ``capture`` raises when the backend itself failed: it raised ``cause`` (which
    torch.compile would report as ``BackendCompilerFailed``), or returned something that is
    not callable (``cause`` is then a TypeError saying what). Never a capture failure: the
    graph was captured, the backend could not compile it ([Note: Backend failures])."""

    def __init__(self, backend: Any, cause: BaseException) -> None:
        super().__init__(f"backend={backend_name(backend)!r} raised:\n"
                         f"{type(cause).__name__}: {cause}")
        self.backend = backend
        self.cause = cause


#: What a backend may raise that torch.compile turns into a graph break rather than a
#: ``BackendCompilerFailed`` (fake-tensor exceptions of an operator the backend cannot run).
BACKEND_GRAPH_BREAKS: tuple[type[BaseException], ...] = tuple(exceptions_allowed_to_be_fallback)


class ScalarBreak(Exception):
    """What ``capture`` raises (``scalars=False``) for a graph that reads a tensor's value as
    a Python scalar: a full-graph capture traces ``Tensor.item()`` (Dynamo turns on scalar
    outputs for one graph), where ``torch.compile`` without ``fullgraph`` breaks the graph
    there unless ``capture_scalar_outputs`` is set. A capture failure: the frame path breaks
    it as torch does ([Note: Graph breaks])."""


_SCALAR_METHODS = frozenset({"item", "tolist"})


def reads_scalars(gm: Optional[torch.fx.GraphModule]) -> bool:
    """Whether a captured graph (or one nested in it) reads a tensor's value as a Python
    scalar: a ``Tensor.item()``/``tolist()`` call or ``aten._local_scalar_dense`` that binds
    an unbacked symbol (Dynamo's record of a data-dependent value)."""
    if gm is None:
        return False
    dense = torch.ops.aten._local_scalar_dense
    for sub in gm.modules():
        graph = getattr(sub, "graph", None)
        if not isinstance(graph, torch.fx.Graph):
            continue
        for node in graph.nodes:
            # an unbacked symbol: a value read at run time (Dynamo's own ``item()`` of a
            # float it passes as a tensor, under dynamic shapes, gives a backed one)
            if not node.meta.get("unbacked_bindings"):
                continue
            if node.op == "call_method" and node.target in _SCALAR_METHODS:
                return True
            if node.op == "call_function" and (
                node.target is dense or getattr(node.target, "overloadpacket", None) is dense
            ):
                return True
    return False


def capture_scalar_outputs() -> bool:
    """``torch._dynamo.config.capture_scalar_outputs``: ``Tensor.item()`` stays in the graph."""
    return bool(dynamo_config.capture_scalar_outputs)


def new_frame_id() -> int:
    """A frame id from torch's own counter (``convert_frame.FRAME_COUNTER``), so a jitguard
    function's compiles never share a frame id with a frame torch compiles
    ([Note: torch's tools])."""
    frame_id = int(convert_frame.FRAME_COUNTER)
    convert_frame.FRAME_COUNTER += 1
    return frame_id


@contextlib.contextmanager
def _compile_id(ids: Optional[tuple[int, int]]) -> Iterator[None]:
    """The full-graph capture on this thread runs under torch compile id ``ids`` (frame id,
    frame compile id) instead of a fresh frame id per capture: ``fullgraph_capture`` asks
    ``convert_frame.get_compile_id`` for one with an empty frame state."""
    if ids is None:
        yield
        return
    original = convert_frame.get_compile_id
    thread = threading.get_ident()

    def ours(frame_state: Any) -> Any:
        if threading.get_ident() != thread or frame_state:
            return original(frame_state)
        prior = torch._guards.CompileContext.current_compile_id()
        return torch._guards.CompileId(
            compiled_autograd_id=prior.compiled_autograd_id if prior is not None else None,
            frame_id=ids[0], frame_compile_id=ids[1])

    convert_frame.get_compile_id = ours
    try:
        yield
    finally:
        convert_frame.get_compile_id = original


def graph_sizes(gm: torch.fx.GraphModule) -> dict[str, Any]:
    """What torch's ``dynamo_output_graph`` record holds as metadata: each node's tensor
    sizes (a symbolic size as its text)."""
    sizes: dict[str, Any] = {}
    for node in gm.graph.nodes:
        value = node.meta.get("example_value")
        if isinstance(value, torch.Tensor):
            sizes[node.name] = [s if isinstance(s, int) else str(s) for s in value.shape]
    return sizes


def readable_graph(gm: torch.fx.GraphModule) -> str:
    """The graph as torch's ``dynamo_output_graph`` payload prints it."""
    return str(gm.print_readable(print_output=False, include_stride=True, include_device=True))


def current_torch_compile_id() -> Any:
    """torch's ``CompileId`` being compiled now (``frame_id``, ``frame_compile_id``), or None."""
    return torch._guards.CompileContext.current_compile_id()


def current_compile_id() -> Optional[str]:
    """The compile id torch is compiling now (``"0/1"``), as a backend sees it; None outside
    a compile."""
    cid = torch._guards.CompileContext.current_compile_id()
    return None if cid is None else str(cid)


def suppress_errors() -> bool:
    """``torch._dynamo.config.suppress_errors``: a failed compile runs the frame eagerly."""
    return bool(dynamo_config.suppress_errors)


def suppressing_errors() -> Any:
    """A context in which ``torch._dynamo.config.suppress_errors`` is True: a frame Dynamo
    fails to convert (an internal error of Dynamo, raised before any of the frame's code
    runs) runs eagerly instead of raising, with torch's warning."""
    return dynamo_config.patch(suppress_errors=True)


def _call_backend(backend: Backend, gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
    """The backend's compiled callable for ``gm``, or ``BackendRaised``."""
    try:
        compiled = backend(gm, inputs)
    except BACKEND_GRAPH_BREAKS:
        raise  # a capture failure: torch's frame path breaks the graph there
    except Exception as e:
        raise BackendRaised(backend, e) from e
    if not callable(compiled):
        cause = TypeError(f"the backend returned {compiled!r}, which is not callable (a "
                          f"backend must return a callable that runs the graph)")
        raise BackendRaised(backend, cause) from cause
    return compiled


def is_capture_failure(error: BaseException) -> bool:
    """Whether Dynamo's frame path can serve the function instead: anything but a user error,
    an operation that failed on fake tensors (``FAKE_RUN_ERRORS``, raised as torch.compile
    raises it) or a backend failure (so: a graph break, an unsupported construct, an
    internal error of Dynamo). A branch on a data-dependent value
    (``if x.item() > 3``) is one too: the full-graph capture traces ``item()`` (as
    ``torch.compile(fullgraph=True)`` does) and Dynamo reports the guard it cannot make as
    a UserError, where ``torch.compile`` without fullgraph breaks the graph at ``item()``."""
    if not isinstance(error, Exception) or isinstance(error, (BackendRaised, *FAKE_RUN_ERRORS)):
        return False
    if isinstance(error, UserError) and any(
        isinstance(e, GuardOnDataDependentSymNode) for e in (error.__cause__, error.__context__)
    ):
        return True
    return not isinstance(error, USER_ERRORS)

Backend = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]


def resolve_backend(backend: Any) -> Backend:
    """A backend as ``torch.compile`` takes it (a registered name or a callable
    ``(gm, example_inputs) -> callable``) as the callable."""
    if isinstance(backend, str):
        return lookup_backend(backend)
    if not callable(backend):
        raise TypeError(f"backend must be a name or a callable (gm, example_inputs), got {backend!r}")
    return backend


def default_backend() -> str:
    """torch.compile's backend when given None (``get_default_backend()``: "inductor")."""
    from torch._dynamo.backends.registry import get_default_backend

    return str(get_default_backend())


def torch_backend(backend: Any, mode: Optional[str], options: Optional[dict[str, Any]],
                  dynamic: Optional[bool], name: Optional[str] = None) -> Backend:
    """The callable ``torch.compile(backend=, mode=, options=, dynamic=, name=)`` hands to
    Dynamo: torch's inductor wrapper for "inductor" (``mode`` picks inductor's mode,
    ``options`` its config), torch's generic wrapper otherwise (``mode``/``options`` passed
    to the backend as keyword arguments, only when given). A backend that is neither a name
    nor a callable raises TypeError."""
    if not isinstance(backend, str) and not callable(backend):
        raise TypeError(f"backend must be a name or a callable (gm, example_inputs), got {backend!r}")
    if backend == "inductor":
        return torch._TorchCompileInductorWrapper(mode, options, dynamic, name)
    return torch._TorchCompileWrapper(backend, mode, options, dynamic)


def backend_name(backend: Any) -> str:
    if isinstance(backend, str):
        return backend
    name = getattr(backend, "compiler_name", None) or getattr(backend, "__name__", None)
    return str(name or type(backend).__name__)


def stance() -> str:
    """torch's compile stance now (``torch.compiler.set_stance``): "default",
    "force_eager", "eager_on_recompile", "fail_on_recompile", ..."""
    return eval_frame._stance.stance


def recompile_limit() -> int:
    """``torch._dynamo.config.recompile_limit`` (``cache_size_limit`` is its alias)."""
    return int(dynamo_config.recompile_limit)


def accumulated_recompile_limit() -> int:
    """``torch._dynamo.config.accumulated_recompile_limit``: the cap on one function's
    entries over all its wrappers, isolated or not."""
    return int(dynamo_config.accumulated_recompile_limit)


def fail_on_recompile_limit_hit() -> bool:
    return bool(dynamo_config.fail_on_recompile_limit_hit)


@dataclasses.dataclass
class Captured:
    """One capture: ``fn`` (the program: same signature as the function captured; no guard
    check), ``entries`` (every guard as a ``GuardFilterEntry``, in Dynamo's order), ``kept``
    (which of them torch's ``tree`` checks; ``tree`` is None when none), ``full_tree``
    (every guard; verify mode only), ``graph_module`` (None when no graph was made), the
    code captured, and the names and cells of its free variables (torch's trees read them
    as locals)."""

    fn: Callable[..., Any]
    entries: list[Any]
    kept: list[bool]
    tree: Optional[Any]
    full_tree: Optional[Any]
    graph_module: Optional[torch.fx.GraphModule]
    code: types.CodeType
    freevars: tuple[str, ...]
    closure: tuple[Any, ...]
    installed: tuple[str, ...] = ()  # the globals that hold this capture's compiled graph
    # whether the capture could have baked in an autocast dtype
    # ([Note: Autocast dtypes a capture did not read])
    reads_autocast: bool = True
    saved: Optional[SavedCapture] = None  # with saving=True: what serializing needs
    unsaved: Optional[str] = None  # with saving=True: why it cannot be serialized


def _capture_contexts(stack: ExitStack, dynamic: Optional[bool], specialize_float: bool) -> None:
    stack.enter_context(get_metrics_context())
    stack.enter_context(dynamo_timed("fullgraph_capture"))
    stack.enter_context(torch._functorch.config.patch(strict_autograd_cache=True))
    # no profiler bracket around the graph's argument reads ([Note: A hit's cost])
    stack.enter_context(dynamo_config.patch(record_runtime_overhead=False))
    if specialize_float:  # every float a constant ([Note: Float facts a symbolic guard cannot see])
        stack.enter_context(dynamo_config.patch(specialize_float=True))
    if dynamic is not None:
        stack.enter_context(eval_frame.set_enable_dynamic(dynamic))
    stack.enter_context(torch_function_mode_stack_state_mgr)


def capture(
    fn: types.FunctionType,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    backend: Backend,
    keep: Callable[[Sequence[Any]], Sequence[bool]],
    *,
    dynamic: Optional[bool] = None,
    full_tree: bool = False,
    saving: bool = False,
    scalars: bool = True,
    compile_id: Optional[tuple[int, int]] = None,
    specialize_float: bool = False,
) -> Captured:
    """Capture ``fn(*args, **kwargs)`` as one graph, compile it with ``backend`` and build
    its guards ([Note: Capturing with Dynamo]). ``keep(entries)`` says which guards torch's
    tree keeps. Raises one of ``GRAPH_BREAKS`` when there is no single graph. ``saving``:
    compile the graph as ``aot_compile_fullgraph`` does, so that it can be serialized
    (``Captured.saved``, or ``Captured.unsaved`` saying why not). ``scalars=False``: a graph
    that reads a tensor's value as a Python scalar raises ``ScalarBreak`` (before the
    backend sees it). ``compile_id`` (frame id, frame compile id): torch's id for the
    capture ([Note: torch's tools]); None: a fresh frame id, as ``fullgraph_capture`` gives.
    ``specialize_float``: Dynamo makes no float symbolic.

    Over 80 lines: one Dynamo capture, its steps in the order torch needs them."""
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"capture needs a Python function, got {fn!r}")
    seen: list[Any] = []
    kept: list[bool] = []

    def filter_fn(entries: Sequence[Any]) -> Sequence[bool]:
        seen[:] = list(entries)
        kept[:] = [bool(k) for k in keep(entries)]
        return kept

    folded: list[Any] = []
    with ExitStack() as stack:
        _capture_contexts(stack, dynamic, specialize_float)
        if compile_id is not None:
            # the backend and the guards too run under it (torch's metrics record, written
            # as the metrics context exits, stays outside, as it is today)
            stack.enter_context(torch._guards.compile_context(torch._guards.CompileContext(
                torch._guards.CompileId(frame_id=compile_id[0], frame_compile_id=compile_id[1]))))
        stack.enter_context(recording_folds(folded))
        with _compile_id(compile_id):
            out = convert_frame.fullgraph_capture(fn, args, kwargs)
        gco = out.graph_capture_output
        bi = out.backend_input
        gm = None
        saved: Optional[SavedCapture] = None
        unsaved: Optional[str] = None
        if bi is not None:
            gm = bi.graph_module
            if not scalars and reads_scalars(gm):
                raise ScalarBreak(
                    "the graph reads a tensor's value as a Python scalar (Tensor.item(), "
                    "float(t), int(t), t.tolist()): torch.compile breaks the graph there "
                    "unless torch._dynamo.config.capture_scalar_outputs is set")
            tc = torch._guards.TracingContext(bi.fake_mode)
            tc.tensor_to_context = bi.tensor_to_context
            with torch._guards.tracing(tc), ExitStack() as saving_config:
                if saving:
                    saving_config.enter_context(_saving())
                compiled = _call_backend(backend, gm, bi.example_inputs)
            if saving:
                saved, unsaved = _saved(gco, bi, gm, compiled)
            if torch_function_mode_stack_state_mgr.stack:  # [Note: A hit's cost]
                compiled = without_function_modes(compiled)
            # Dynamo installed the graph module under this name; the backend's callable
            # runs instead.
            gco.f_globals[bi.backend_id] = compiled
        with ExitStack() as restore:
            if torch_function_mode_stack_state_mgr.stack:
                restore.enter_context(torch_function_mode_stack_state_mgr.temp_restore_stack())
            check = gco.build_guards(fn.__code__, hooks=Hooks(guard_filter_fn=filter_fn), save=False)
            full = None
            if full_tree:
                full = gco.build_guards(
                    fn.__code__,
                    hooks=Hooks(guard_filter_fn=lambda es: [True] * len(es)),
                    save=False,
                ).guard_manager
    if saving and bi is None:
        unsaved = "the capture made no graph"
    program = types.FunctionType(fast_helpers(gco.bytecode, gco.f_globals), gco.f_globals,
                                 fn.__name__, gco.argdefs, gco.closure)
    if gco.kwdefaults:
        program.__kwdefaults__ = dict(gco.kwdefaults)
    program.__qualname__ = fn.__qualname__
    return Captured(
        fn=program,
        entries=seen,
        kept=kept,
        tree=check.guard_manager if any(kept) else None,
        full_tree=full,
        graph_module=gm,
        code=fn.__code__,
        freevars=fn.__code__.co_freevars,
        closure=tuple(fn.__closure__ or ()),
        installed=(bi.backend_id,) if bi is not None else (),
        reads_autocast=reads_autocast(folded, gm),
        saved=saved,
        unsaved=unsaved,
    )
