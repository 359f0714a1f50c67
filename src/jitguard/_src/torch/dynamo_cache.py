"""The compiler of the cache behind ``jitguard.torch.compile``: ``TorchCompiler`` (one
TorchDynamo capture per entry, its guards converted or delegated). The cache itself is a
plain ``FunctionCache`` whose scope is torch's (``dynamo_scope``, [Note: Scopes]).
([Note: jitguard.torch.compile on Dynamo] is in ``compile``, the public face.)

May import: jitguard._src.* (the cache, the compiler, the torch integration below it),
jitguard._src.torch.adapter and adapter_runtime (the only way to torch's internals),
torch's public API.

# [Note: Capture failures]
# A graph break, an unsupported construct or an internal error of Dynamo (anything but a
# user error or a backend failure: ``adapter.is_capture_failure``): with ``fullgraph=True``
# the call raises ``CaptureError`` naming it; otherwise the function is served by Dynamo's
# own frame path ([Note: Graph breaks]). Other errors propagate, as in torch, and no entry
# is made: a marked dynamic dim that got specialized, and an operation of the function that
# failed on fake tensors (``adapter.FAKE_RUN_ERRORS``: torch's TorchRuntimeError, a
# RuntimeError; the function's own error, which the frame path would only log at length
# and raise again from an eager run). The next call captures afresh.
#
# [Note: Graph breaks]
# A function Dynamo cannot capture as one graph gets the graphs ``torch.compile`` makes of
# it: the entry made for the failed capture runs the function through one
# ``torch.compile`` wrapper of it (same backend, mode, options, dynamic and recompile
# limit), so Dynamo's frame path splits it at each break (the graph before it, a resume
# function after it), and torch's guards, in torch's cache on the code objects, pick each
# piece's graph and recompile it. The entry has no guards of its own: every later call
# takes it (a capture that broke once would break again), so calls cost what they cost
# under ``torch.compile`` plus one guardless dispatch. It is exactly as sound as
# ``torch.compile``, no more: none of jitguard's stricter checks (GLOBAL_STATE over every
# state, the empty hook dicts, [Note: Autocast dtypes a capture did not read]) apply to
# it, and nothing claims they do: ``EntryInfo.guard_layer`` is ``FRAME_PATH``,
# ``stats().frame_path`` counts such entries, ``explain`` says so per entry, and the
# warning logged once per function says torch's guards decide. Each graph torch compiles
# there is recorded (``EntryInfo.pieces``: torch's compile id and the graph), through a
# backend wrapper named like the user's backend. Entries made before the break (a call
# whose capture did not break) keep jitguard's guards and are tried first. A full-graph
# capture traces ``Tensor.item()`` into the graph (Dynamo turns scalar outputs on for one
# graph); ``torch.compile`` breaks there, so unless the user asked for ``fullgraph=True`` or
# set ``capture_scalar_outputs``, such a capture is a break too (``adapter.ScalarBreak``),
# and the function gets torch's graphs, not one graph torch would not have made.
#
# [Note: Backend failures]
# The backend is called by ``adapter.capture``, apart from the tracing: what it raises
# (or a result that is not callable) comes out as ``adapter.BackendRaised``, never as a
# capture failure, except the fake-tensor exceptions torch itself turns into a graph
# break (``adapter.BACKEND_GRAPH_BREAKS``). The call then raises
# ``BackendCompilerFailed`` (jitguard's, a subclass of torch's of that name and of
# ``JitGuardError``) naming the backend and the function, the backend's exception chained
# as its cause; nothing is cached, so the next call compiles (and fails) again, as with
# ``torch.compile``; ``stats().backend_failures`` counts it, apart from
# ``capture_failures``. With ``torch._dynamo.config.suppress_errors=True`` (read at the
# failure) the function runs eagerly from then on, as torch skips the frame, and a warning
# says so once; with ``fullgraph=True`` the failure always raises, and never as a graph
# break.
"""

from __future__ import annotations

import functools
import logging
import types
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Optional

import torch

from .. import structured
from ..cache.policy import ArgContext, ArgPolicy
from ..cache.request import CompileRequest
from ..cache.specialize import FunctionCache
from ..errors import ArtifactError, CaptureError, GuardMismatchError, JitGuardError
from ..guards import Source
from ..sources import GlobalSource, GlobalStateSource, LocalSource
from . import adapter, pinned_inputs, stored
from .adapter_stored import by_id_global
from .compiled import FRAME_PATH, RUNS_EAGERLY, EntryInfo, Piece
from .delegated import Delegation
from .state import DTYPE_STATES

__all__ = ["BackendCompilerFailed", "TorchCompiler"]

log = logging.getLogger("jitguard.torch")

# [Note: jitguard.torch.compile on Dynamo]: the cache's argument rules guard nothing.
_NO_RULES = ArgPolicy(base=None)


def _no_guards(ctx: ArgContext, source: Source, value: Any) -> None:
    ctx.ignore_aliasing(source)


_NO_RULES.register(object, _no_guards)


def _converter() -> Callable[..., Any]:
    """The guard conversion (``convert.convert_guards``). Imported here, not at the top: a
    broken ``convert`` fails the first compile loudly, never silently sends every guard to
    torch's tree."""
    from .convert import convert_guards

    return convert_guards


class BackendCompilerFailed(JitGuardError, adapter.BackendCompilerFailed):
    """The backend failed to compile a captured graph ([Note: Backend failures]): it raised
    (the exception is ``__cause__`` and ``inner_exception``) or returned something that is
    not callable. Also torch's ``BackendCompilerFailed`` (a RuntimeError), so code that
    catches torch's catches this. ``backend_name`` and ``where`` (the function) name them."""

    def __init__(self, where: str, backend: Any, cause: BaseException) -> None:
        adapter.BackendCompilerFailed.__init__(self, backend, cause,  # type: ignore[arg-type]
                                               None)
        self.backend_name = adapter.backend_name(backend)
        self.where = where
        self.args = (
            f"{where}: backend={self.backend_name!r} raised:\n{type(cause).__name__}: {cause}\n"
            f"Fix the backend, or set torch._dynamo.config.suppress_errors = True to run the "
            f"function eagerly where its backend fails",
        )


BackendCompilerFailed.__module__ = "jitguard.torch"  # [Note: Public submodules]


class TorchCompiler:
    """The ``compiler=`` of the cache behind ``jitguard.torch.compile``: one Dynamo capture
    per entry ([Note: jitguard.torch.compile on Dynamo])."""

    def __init__(self, *, backend: Any, fullgraph: bool, dynamic: Optional[bool],
                 verify: bool, where: str, recompile_limit: Optional[int] = None,
                 mode: Optional[str] = None, options: Optional[dict[str, Any]] = None,
                 name: Optional[str] = None) -> None:
        if backend is None:  # [Note: torch.compile's parameters]: torch's default
            backend = adapter.default_backend()
        self.backend = backend
        self.mode = mode
        self.options = dict(options) if options else None
        # the backend as torch.compile hands it to Dynamo (mode, options, dynamic bound)
        self.backend_fn = adapter.torch_backend(backend, mode, self.options, dynamic, name)
        self.recompile_limit = recompile_limit
        self.backend_failures = 0
        # [Note: Graph breaks]: the torch.compile wrapper that serves what did not capture
        self._frame_path: Optional[Callable[..., Any]] = None
        self.pieces: list[Piece] = []
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        self.verify = verify
        self.where = where
        self.infos: dict[Any, EntryInfo] = {}
        self.capture_failures = 0
        self.cache: Optional[FunctionCache] = None
        # globals installed in the function's module (compiled graphs, the function itself
        # for closure guards), removed when the cache dies ([Note: Shared entries])
        self.installed: list[str] = []
        self.function_source: Optional[Source] = None
        self.fn: Optional[Callable[..., Any]] = None
        # [Note: Stored captures]: with a store, each capture is compiled to be serialized;
        # ``saved`` maps an artifact to what serializing it needs, or why it cannot be
        self.saving = False
        self.saved: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    # ---- verify mode, on a miss -----------------------------------------------------------
    def _verify_miss(self, request: CompileRequest) -> None:
        """[Note: Verify mode]: every entry jitguard rejected, torch's tree rejects too."""
        if self.cache is None:
            return
        for entry in self.cache.entries():
            info = self.infos.get(entry.compile_id)
            if info is None or info.full_tree is None:
                continue
            if info.torch_accepts(request.values) and not _only_own_guards(entry, info, request.values):
                raise GuardMismatchError(
                    f"{self.where}: jitguard rejected entry {entry.compile_id} but torch's guard "
                    f"tree for the same capture accepts the call.\n"
                    f"  jitguard: {'; '.join(info.jitguard_reasons(entry, request.values)) or '(no reason)'}\n"
                    f"  torch: accepts"
                )

    # ---- the compiler -------------------------------------------------------------------
    def __call__(self, request: CompileRequest) -> Callable[..., Any]:
        if self.verify and request.recompile:
            self._verify_miss(request)
        args, kwargs = request.args, request.kwargs
        convert = _converter()
        converted: list[Any] = []

        def keep(entries: Sequence[Any]) -> list[bool]:
            result = convert(entries, function=request.fn,
                             function_source=self.function_source)
            converted[:] = [result]
            left = {id(u.entry) for u in result.unconverted}
            return [id(e) in left for e in entries]

        run = functools.partial(adapter.capture, request.fn, args, kwargs,  # type: ignore[arg-type]
                                self.backend_fn, keep, dynamic=self.dynamic,
                                full_tree=self.verify, saving=self.saving,
                                scalars=self.fullgraph or adapter.capture_scalar_outputs(),
                                compile_id=_ids(request.compile_id))
        try:
            try:
                cap = run()
            except adapter.ScalarBreak:
                # [Note: Float facts a symbolic guard cannot see]: the value read may be a
                # float Dynamo made a tensor (math.copysign(1.0, k)), whose sign torch's
                # frame path would lose: with floats constants the capture may not break
                cap = run(specialize_float=True)
            if converted and converted[0].symbolic_zeros:
                # [Note: Float facts a symbolic guard cannot see]: the trace lost a zero's sign
                self.installed.extend(cap.installed)
                cap = run(specialize_float=True)
        except adapter.BackendRaised as e:
            return self._backend_failed(request, e)
        except Exception as e:
            if not adapter.is_capture_failure(e):
                raise
            return self._capture_failed(request, e)
        self.installed.extend(cap.installed)
        if cap.graph_module is not None:
            _trace_graph(cap.graph_module, request.compile_id)
        info = EntryInfo(request.compile_id, cap, request.signature.params)
        self.infos[request.compile_id] = info
        state_kind = self._global_state(request, cap)
        if converted:
            result = converted[0]
            result.guards = [
                GlobalStateSource().make_guard(state_kind) if g.create_fn is _global_state_kind()
                else g for g in result.guards
            ]
            result.add_to(request)
            info.converted = Counter(result.converted)
            info.stricter = list(result.stricter)
            info.unconverted = [str(u) for u in result.unconverted]
        guards = converted[0].guards if converted else ()
        if not any(g.create_fn is state_kind for g in guards):
            # [Note: jitguard.torch.compile on Dynamo]: every entry checks every state
            request.add_guard(GlobalStateSource(), state_kind)
        if cap.tree is not None:
            self._delegate(request, info)
        info.forget_entries()
        artifact = info.verified(self.where, request.signature.bind) if self.verify else cap.fn
        pinned_inputs.remember(artifact, cap.fn, cap.installed)  # [Note: Inputs read from the pins]
        if self.saving:
            self.saved[artifact] = (
                f"{sum(cap.kept)} of its guards are checked by torch's guard tree, which is "
                f"not stored" if cap.tree is not None
                else _by_id_read(guards, cap.saved, request.fn) or cap.saved or cap.unsaved
            )
            cap.saved = None
        return artifact

    pin_inputs = staticmethod(pinned_inputs.bind)  # [Note: Inputs read from the pins]

    # ---- the store's side ([Note: Stored captures]) ---------------------------------------
    def serialize(self, artifact: Any) -> bytes:
        """The bytes of an entry's artifact: torch's serialized program and graph. Raises
        ``ArtifactError`` saying why when this entry cannot be stored."""
        saved = self.saved.get(artifact) if _weakrefable(artifact) else None
        if saved is None:
            raise ArtifactError(f"{self.where}: this entry runs the function under torch's "
                                f"frame path or eagerly (its capture failed), or was not "
                                f"compiled for a store")
        if isinstance(saved, str):
            raise ArtifactError(f"{self.where}: {saved}")
        assert isinstance(self.fn, types.FunctionType)
        src = self.function_source
        fn_global = src.global_name if isinstance(src, GlobalSource) else None
        return stored.dump(saved, self.fn, fn_global)

    def deserialize(self, data: bytes, fn: Any) -> Callable[..., Any]:
        """The program of a stored entry, over ``fn``'s live globals (its guards are the
        store's to check). Raises ``ArtifactError`` when it cannot be used here."""
        return stored.load(data, fn, self.installed)

    def store_environment(self) -> dict[str, str]:
        """What a stored entry's key holds besides the function: torch's version, the
        backend and options, the CPU capability and any CUDA device."""
        env = {
            "torch": torch.__version__,
            "backend": adapter.backend_name(self.backend),
            **({"mode": str(self.mode)} if self.mode is not None else {}),
            **({"options": repr(sorted(self.options.items()))} if self.options else {}),
            "fullgraph": str(self.fullgraph),
            "dynamic": str(self.dynamic),
            "cpu": torch.backends.cpu.get_cpu_capability(),
        }
        if torch.cuda.is_available():
            env["cuda"] = ",".join(
                f"{torch.cuda.get_device_name(i)}:{torch.cuda.get_device_capability(i)}"
                for i in range(torch.cuda.device_count()))
        return env

    @staticmethod
    def _global_state(request: CompileRequest, cap: adapter.Captured) -> Callable[..., Any]:
        """The entry's GLOBAL_STATE kind: every torch state, the autocast dtypes only while
        their device's autocast is on unless the capture could have baked one in
        ([Note: Autocast dtypes a capture did not read])."""
        if cap.reads_autocast:
            return _global_state_kind()
        for dtype, weak in DTYPE_STATES.values():
            request.ignore_global_states(dtype, guard_instead=[weak])
        names = request.global_state_names()
        return functools.partial(_global_state_kind(), states=names)

    def _delegate(self, request: CompileRequest, info: EntryInfo) -> None:
        """[Note: Delegating to torch's guard tree]."""
        params = request.signature.params
        assert info.cap is not None
        delegated = [e for e, k in zip(info.cap.entries, info.cap.kept, strict=True) if k]
        kinds = tuple(e.guard_type for e in delegated)
        names = tuple(e.name for e in delegated)
        first: Source
        others: list[Source]
        if params:
            delegation = Delegation(info.tree_accepts, info.tree_explain, kinds, names)
            sources: list[Source] = [LocalSource(n, is_input=True) for n in params]
            first, others = sources[0], sources[1:]
        else:  # no parameter to read: anchor the guard on a global that always exists
            delegation = Delegation(lambda _anchor: info.tree_accepts(),
                                    lambda _anchor: info.tree_explain(), kinds, names)
            first, others = GlobalSource("__name__"), []
        info.delegated = Counter(kinds)
        request.add_guard(first, functools.partial(
            _tree_kind(), delegation=delegation, others=tuple(others)))

    def _capture_failed(self, request: CompileRequest, error: BaseException) -> Callable[..., Any]:
        text = str(error).strip()
        if self.fullgraph:
            raise CaptureError(
                f"{self.where}: fullgraph=True but TorchDynamo could not capture one graph:\n"
                f"{text}\nRemove the graph break, or compile with fullgraph=False to let "
                f"torch.compile's frame path split the function at its graph breaks"
            ) from error
        self.capture_failures += 1
        fn = request.fn
        if fn not in _logged_failures:
            _logged_failures.add(fn)
            first = text.splitlines()[0] if text else type(error).__name__
            log.warning("%s: TorchDynamo cannot capture one graph (%s); torch.compile's frame "
                        "path runs it, split at its graph breaks, and torch's guards (not "
                        "jitguard's) decide its calls", self.where, first)
        why = (f"TorchDynamo cannot capture one graph ({text.splitlines()[0] if text else type(error).__name__}): "
               f"torch.compile's frame path splits it at its graph breaks and torch's guards "
               f"pick each piece's graph; this entry has no guards of its own, and none of "
               f"jitguard's stricter checks apply")
        self.infos[request.compile_id] = EntryInfo(
            request.compile_id, None, request.signature.params, failure=text,
            layer=FRAME_PATH, why=why, pieces=self.pieces)
        return self.frame_path(fn)

    def frame_path(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """[Note: Graph breaks]: ``fn`` under ``torch.compile``, made once."""
        if self._frame_path is None:
            backend_fn, pieces = self.backend_fn, self.pieces

            failed: list[BaseException] = []

            def recording(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
                cid = adapter.current_torch_compile_id()
                pieces.append(Piece(None if cid is None else str(cid), gm))
                _trace_graph(gm, cid)
                try:
                    return backend_fn(gm, example_inputs)
                except Exception as e:  # the backend's own failure: raised from the call
                    failed.append(e)
                    raise

            recording.__name__ = recording.__qualname__ = adapter.backend_name(self.backend)
            extra: dict[str, Any] = {}
            if self.recompile_limit is not None:  # not in torch.compile's typed overloads
                extra["recompile_limit"] = self.recompile_limit
            compiled = torch.compile(fn, backend=recording, dynamic=self.dynamic, **extra)

            # Dynamo's frame path can fail where the function is fine (an internal error of
            # Dynamo's, or torch's own "Guard failed on the same frame it was created"):
            # such a frame runs eagerly, as it did before jitguard sent breaks to the frame
            # path, never worse. The conversion fails before the frame's code runs, so
            # nothing runs twice.
            # A failure of the backend itself is still raised, as torch's frame path raises
            # it ([Note: Backend failures]), unless the user set suppress_errors; the frame
            # has then run eagerly once.
            @functools.wraps(fn)
            def serve(*args: Any, **kwargs: Any) -> Any:
                user_suppresses = adapter.suppress_errors()
                del failed[:]
                try:
                    with adapter.suppressing_errors():
                        out = compiled(*args, **kwargs)
                    cause = failed[-1] if failed else None
                finally:
                    del failed[:]  # an exception holds its frames, and so the arguments
                if cause is not None and not user_suppresses:
                    raise BackendCompilerFailed(self.where, self.backend, cause) from cause
                return out

            self._frame_path = serve
        return self._frame_path

    def _backend_failed(self, request: CompileRequest, error: adapter.BackendRaised) -> Callable[..., Any]:
        """[Note: Backend failures]."""
        self.backend_failures += 1
        cause = error.cause
        if adapter.suppress_errors() and not self.fullgraph:
            if request.fn not in _logged_failures:
                _logged_failures.add(request.fn)
                log.warning("%s: backend=%r raised %s: %s; torch._dynamo.config.suppress_errors "
                            "is set, so the function runs eagerly, as torch.compile's would",
                            self.where, adapter.backend_name(self.backend),
                            type(cause).__name__, cause)
            self.infos[request.compile_id] = EntryInfo(
                request.compile_id, None, request.signature.params,
                failure=f"backend={adapter.backend_name(self.backend)!r} raised "
                        f"{type(cause).__name__}: {cause}",
                layer=RUNS_EAGERLY,
                why="its backend failed and torch._dynamo.config.suppress_errors is set: the "
                    "function runs eagerly, unguarded, as torch skips such a frame")
            return request.fn
        raise BackendCompilerFailed(self.where, self.backend, cause) from cause


def _ids(compile_id: Any) -> Optional[tuple[int, int]]:
    """A jitguard compile id as torch's (frame id, frame compile id) ([Note: torch's tools])."""
    frame, n = getattr(compile_id, "frame_id", None), getattr(compile_id, "frame_compile_id", None)
    return None if frame is None or n is None else (int(frame), int(n))


def _trace_graph(gm: torch.fx.GraphModule, compile_id: Any) -> None:
    """[Note: torch's tools]: the graph as torch's ``dynamo_output_graph`` record, on
    jitguard's own sinks (torch writes it into its stream itself); built only when a trace
    is on."""
    if not structured.active():
        return
    structured.emit("dynamo_output_graph", lambda intern: {"sizes": adapter.graph_sizes(gm)},
                    compile_id=compile_id, payload=lambda intern: adapter.readable_graph(gm),
                    where="jitguard/_src/torch/dynamo_cache.py:0", torch_writes=True)


def _weakrefable(obj: Any) -> bool:
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True


def _only_own_guards(entry: Any, info: EntryInfo, values: tuple[Any, ...]) -> bool:
    """Whether every guard of ``entry`` that rejects ``values`` is one jitguard checks more
    strictly than torch on purpose: GLOBAL_STATE (every registered state),
    NN_MODULE_GLOBAL_HOOKS ([Note: Global module hooks]), or one the
    conversion listed as stricter (``EntryInfo.stricter``). torch accepting is then no
    disagreement ([Note: Verify mode])."""
    from ..cache.reasons import collect_failures

    failures = collect_failures([entry], values)[0].failures

    def own(f: Any) -> bool:
        if f.kind in ("GLOBAL_STATE", "NN_MODULE_GLOBAL_HOOKS"):
            return True
        prefix = f"{f.kind} on {f.source_names[0]}:" if f.source_names else None
        return prefix is not None and any(s.startswith(prefix) for s in info.stricter)

    return bool(failures) and all(own(f) for f in failures)


def _global_state_kind() -> Callable[..., Any]:
    from ..compiler.builder import GuardBuilder

    return GuardBuilder.GLOBAL_STATE


def _tree_kind() -> Callable[..., Any]:
    from ..compiler.builder import GuardBuilder

    return GuardBuilder.TORCH_GUARD_TREE


# [Note: Capture failures]: the functions whose capture failure was logged already.
_logged_failures: weakref.WeakSet[Any] = weakref.WeakSet()


def _by_id_read(guards: Sequence[Any], saved: Any, fn: Any) -> Optional[str]:
    """Why an entry is not stored when a guard reads a global Dynamo bound by id to an
    object other than a module (bound again on load: [Note: Stored captures]); None."""
    f_globals = getattr(fn, "__globals__", None)
    if saved is None or not isinstance(f_globals, dict):
        return None
    for g in guards:
        sources = [g.originating_source]
        keywords = getattr(g.create_fn, "keywords", None) or {}
        sources += [v for v in keywords.values() if isinstance(v, Source)]
        for source in sources:
            root = source.chain()[-1]
            name = root.global_name if isinstance(root, GlobalSource) else None
            if (name is not None and name not in saved.module_globals and name in f_globals
                    and by_id_global(name, f_globals[name])):
                return (f"its guard on {source.name()} reads a global Dynamo bound to a "
                        f"{type(f_globals[name]).__qualname__} of this process by its id")
    return None
