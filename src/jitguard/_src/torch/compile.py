"""``jitguard.torch.compile``: a reference compiler on top of ``jitguard.specialize``. Each
entry is a ``make_fx`` trace of the function over fake inputs, guarded by the tensors'
layouts and the ShapeEnv's shape guards; ``mark_dynamic`` and automatic dynamic shapes.

May import: jitguard._src.guards, jitguard._src.sources, jitguard._src.contexts,
jitguard._src.global_state, jitguard._src.compiler.*, jitguard._src.cache.*,
jitguard._src.torch.*, torch.

# Which dims are symbolic: [Note: Dynamic shapes in jitguard.torch.compile] (``automatic``).
#
# [Note: What jitguard.torch.compile guards]
# Beyond the cache's guards (GLOBAL_STATE; the argument rules: tensors: TENSOR_MATCH;
# modules: identity, structure, state, parameters; scalars: by value; containers: type,
# length, keys; the aliasing guards), each entry:
#   * replaces the traced tensors' TENSOR_MATCH guards with one TENSORS_MATCH (torch's C++
#     tensor checker, ~0.1 us a tensor instead of ~0.8 us in Python) checking exactly the
#     sizes and strides the trace kept static ([Note: From a ShapeEnv to shape guards]),
#     and adds the shape guards;
#   * guards by value the attributes of argument objects (and of their submodules) that
#     the trace read ([Note: Watching attribute reads]), and every global the function's
#     own code names that holds a constant (by value) or a tensor (by identity and
#     TENSOR_MATCH): the trace bakes them in; the same for the globals named by the helpers
#     that ran in the trace, where a source reaches their module ([Note: Globals read by
#     helpers]). Others are not seen: keep what the function depends on in its arguments;
#   * guards by value any argument the cache made dynamic that the trace cannot take
#     symbolically (a float, a string);
#   * leaves out of GLOBAL_STATE the autocast dtypes the trace did not read
#     ([Note: Autocast dtypes a trace did not read]).
# When the function cannot be traced ([Note: What a trace assumes]) the entry runs the
# function eagerly (``fullgraph=True`` raises instead); its reason is kept.
#
# [Note: Compiling a callable with state]
# What a call of ``fn`` reads must be guarded, and the cache guards arguments: so a callable
# whose call reads state of its own, an ``nn.Module`` (parameters, submodules, ``training``,
# hooks), a bound method (its ``__self__``), a closure (its cells), is compiled as the first
# argument of ``_invoke(callable, *args, **kwargs)``, and ``compile`` returns a function that
# passes it. The module rule then pins the module, the method rule the method's ``__self__``
# and ``__func__``, the function rule the closure's code and cell identities; each cell's
# contents are also guarded by the rule for their type (an int by value, a list by its
# items), and the attributes read of a method's ``__self__`` are watched like those of an
# argument. A plain function is specialized directly.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import types
from collections.abc import Callable
from typing import Any, Optional

import torch

from .._util import is_scalar_type
from ..cache.compile import covered
from ..cache.request import CompileRequest
from ..cache.specialize import FunctionCache, cache_of, specialize
from ..compiler.builder import GuardBuilder
from ..compiler.kinds import get_guard_kind
from ..contexts import CompileContext
from ..global_state import global_states
from ..guards import Guard, Source
from ..sources import (
    AttrSource,
    CellContentsSource,
    ClosureSource,
    GetItemSource,
    TypeSource,
)
from .autocast_reads import UNKNOWN, autocast_dtype_reads
from .automatic import marked_dims, size_only_changes
from .global_reads import (
    GlobalsRoot,
    HelperGlobals,
    codes_run_with,
    guard_baked,
    unwrap,
    watchable,
)
from .reads import ALL
from .state import DTYPE_STATES
from .trace import ArgLeaf, Traced, TraceError, flatten_args, trace

__all__ = ["CompiledEntryInfo", "TorchCompiler", "compile", "traced_info"]

log = logging.getLogger("jitguard.torch")



@dataclasses.dataclass
class CompiledEntryInfo:
    """What the compiler made for one entry: the trace (None when it ran eagerly), the dims
    it asked to be symbolic (``dynamic_dims``; a dim of size 0 or 1, or one the trace
    specialized, stays static: ``symbolic_dims()`` says which are), the ints made SymInts,
    and why it fell back to eager (None when traced)."""

    compile_id: Any
    traced: Optional[Traced]
    dynamic_dims: dict[Source, frozenset[int]]
    dynamic_ints: frozenset[Source]
    fallback_reason: Optional[str] = None

    @property
    def graph_module(self) -> Optional[torch.fx.GraphModule]:
        return None if self.traced is None else self.traced.graph_module

    def shape_guards(self) -> list[str]:
        return [] if self.traced is None else self.traced.shapes.describe()

    def symbolic_dims(self) -> dict[Source, frozenset[int]]:
        """Per tensor source, the dims whose size the entry leaves to its shape guards."""
        if self.traced is None:
            return {}
        out = {}
        for source, layout in self.traced.shapes.layouts.items():
            if layout.dynamic_dims:
                out[source] = layout.dynamic_dims
        return out


# What ``nn.Module.__init__`` puts in every module's ``__dict__``: the machinery that calling
# a module reads (hook dicts, ``_parameters``/``_buffers``/``_modules``, ``training``), which
# the module rule pins already ([Note: Guarding an nn.Module]).
_MODULE_MACHINERY = frozenset(vars(torch.nn.Module()))
# nn.Module's own class attributes (``_compiled_call_impl``, ``call_super_init``): the
# module rule pins what of them matters.
_MODULE_CLASS_MACHINERY = frozenset(vars(torch.nn.Module))
_MISSING = object()


def _batched_checker() -> bool:
    from .batched import checker_available

    return checker_available()


def _is_tensor_match(guard: Guard) -> bool:
    try:
        kind, _ = get_guard_kind(guard.create_fn)
    except Exception:
        return False
    return kind.name == "TENSOR_MATCH"


class TorchCompiler:
    """The ``compiler=`` of ``jitguard.specialize`` behind ``jitguard.torch.compile``."""

    def __init__(self, dynamic: Optional[bool] = None, fullgraph: bool = False) -> None:
        if dynamic not in (None, True, False):
            raise ValueError(f"dynamic must be None, True or False, got {dynamic!r}")
        self.dynamic = dynamic
        self.fullgraph = fullgraph
        self.cache: Optional[FunctionCache] = None
        # automatic dynamic: per tensor source, the dims made dynamic so far
        self.auto_dims: dict[Source, set[int]] = {}
        self.infos: dict[Any, CompiledEntryInfo] = {}

    # ---- which dims are symbolic ------------------------------------------------------
    def _automatic(self, request: CompileRequest, leaves: list[ArgLeaf]) -> None:
        """[Note: Dynamic shapes in jitguard.torch.compile]: dims of tensors that an existing
        entry rejected only for their sizes."""
        if self.cache is None:
            return
        tensors = {leaf.source: leaf.value for leaf in leaves if leaf.is_tensor}
        for source, dims in size_only_changes(self.cache.entries(), request.values, tensors).items():
            self.auto_dims.setdefault(source, set()).update(dims)

    def _dims_for(self, request: CompileRequest, leaf: ArgLeaf) -> frozenset[int]:
        t = leaf.value
        ndim = t.dim()
        if self.dynamic is False:
            return frozenset()
        if self.dynamic is True or covered(leaf.source, request.dynamic_sources):
            return frozenset(range(ndim))
        dims = set(marked_dims(t)) | self.auto_dims.get(leaf.source, set())
        return frozenset(d for d in dims if d < ndim)

    # ---- the compiler -----------------------------------------------------------------
    def __call__(self, request: CompileRequest) -> Callable[..., Any]:
        sig = request.signature
        names = sig.params
        values = request.values
        leaves = flatten_args(names, values)
        if request.recompile and self.dynamic is None:
            self._automatic(request, leaves)
        dyn_dims = {leaf.source: self._dims_for(request, leaf) for leaf in leaves if leaf.is_tensor}
        dyn_ints = frozenset(
            leaf.source for leaf in leaves
            if type(leaf.value) is int and covered(leaf.source, request.dynamic_sources)
        )
        for leaf in leaves:
            # dynamic in the cache but constant to the trace: guard by value after all
            if (
                not leaf.is_tensor
                and leaf.source not in dyn_ints
                and is_scalar_type(type(leaf.value))
                and covered(leaf.source, request.dynamic_sources)
            ):
                request.add_guard(leaf.source, GuardBuilder.CONSTANT_MATCH)
        watch = [(leaf.source, leaf.value) for leaf in leaves if watchable(leaf.value)]
        more, helpers = self._guard_callable(request, leaves)
        watch += more + helpers.watch()
        info = CompiledEntryInfo(request.compile_id, None, {s: d for s, d in dyn_dims.items() if d}, dyn_ints)
        self.infos[request.compile_id] = info
        try:
            with autocast_dtype_reads() as autocast, codes_run_with(*helpers.dicts()) as codes_run:
                traced = trace(
                    request.fn, names, values,
                    dynamic_dims=dyn_dims, dynamic_ints=dyn_ints,
                    name=f"{getattr(request.fn, '__qualname__', 'fn')} {request.compile_id}",
                    forward=sig.forward, header=sig.header, defaults=sig.namespace, watch=watch,
                )
            if autocast.direct_writes:
                raise TraceError(
                    f"the function sets autocast state directly ({autocast.direct_writes[0]}), "
                    f"which a make_fx graph cannot record; use a torch.autocast block"
                )
        except TraceError as e:
            if self.fullgraph:
                raise
            info.fallback_reason = str(e)
            log.info("%s: cannot trace, entry %s runs eagerly: %s", request.fn, request.compile_id, e)
            return request.fn
        info.traced = traced
        helpers.after_trace(request, codes_run)
        self._relax_autocast_dtypes(request, autocast.dtypes)
        # A watched global that no code named, whose reads could not be watched, is left
        # alone (it was watched in case a helper read it).
        self._guard_attributes(request, traced, helpers.unread())
        self._guard_tensors(request, traced)
        request.add_shape_guards(traced.shapes.shape_guards, traced.shapes.symbol_sources)
        compile_ctx = CompileContext.try_get()
        if compile_ctx is not None:
            compile_ctx.shape_env_guards.extend(traced.shapes.describe())
        return traced.run

    @staticmethod
    def _relax_autocast_dtypes(request: CompileRequest, read: set[str]) -> None:
        """[Note: Autocast dtypes a trace did not read]: a device's dtype the trace did not
        read is guarded only while that device's autocast is on."""
        if UNKNOWN in read:
            return
        for device, (dtype, weak) in DTYPE_STATES.items():
            if device not in read and dtype in global_states and weak in global_states:
                request.ignore_global_states(dtype, guard_instead=[weak])

    def _guard_tensors(self, request: CompileRequest, traced: Traced) -> None:
        """[Note: What jitguard.torch.compile guards]: the traced tensors' TENSOR_MATCH
        guards from the argument rules become one TENSORS_MATCH (torch's C++ checker) with
        the sizes and strides the trace kept static; a tensor that is not strided keeps a
        TENSOR_MATCH of its own with them."""
        guards = request.tracing_context.guards_context.dynamo_guards
        tensors = [leaf for leaf in traced.inputs if leaf.is_tensor]
        traced_sources = {leaf.source for leaf in tensors}
        guards.inner = type(guards.inner)(
            g for g in guards.inner
            if not (g.originating_source in traced_sources and _is_tensor_match(g))
        )
        batch: list[ArgLeaf] = []
        seen: set[Source] = set()
        batched_ids: set[int] = set()
        for leaf in tensors:
            if leaf.source in seen:
                continue
            seen.add(leaf.source)
            layout = traced.shapes.layouts[leaf.source]
            # torch's checker also fails on one tensor passed twice: an object met again
            # is checked on its own
            if (
                leaf.value.layout is torch.strided
                and _batched_checker()
                and id(leaf.value) not in batched_ids
            ):
                batched_ids.add(id(leaf.value))
                batch.append(leaf)
                continue
            request.add_guard(
                leaf.source,
                functools.partial(GuardBuilder.TENSOR_MATCH, sizes=layout.sizes, strides=layout.strides),
            )
        if batch:
            layouts = [traced.shapes.layouts[leaf.source] for leaf in batch]
            request.add_guard(
                batch[0].source,
                functools.partial(
                    GuardBuilder.TENSORS_MATCH,
                    others=tuple(leaf.source for leaf in batch[1:]),
                    sizes=tuple(lt.sizes for lt in layouts),
                    strides=tuple(lt.strides for lt in layouts),
                ),
            )

    def _guard_attributes(
        self, request: CompileRequest, traced: Traced, skip_unwatched: set[Source]
    ) -> None:
        """[Note: What jitguard.torch.compile guards]: the attributes of argument objects
        (and of modules under them) that the trace read, by the argument rules (a module's
        own machinery, ``training`` and the hook dicts, is pinned by the module rule); every
        constant
        attribute of an object whose reads could not be watched (its other attributes are
        not guarded)."""
        reads = traced.attribute_reads
        for source in reads.unwatched:
            if source in skip_unwatched:
                continue
            obj = reads.objects[source]
            for attr, value in list(getattr(obj, "__dict__", {}).items()):
                if is_scalar_type(type(value)):
                    guard_baked(request, AttrSource(source, attr), value)
        for source, names in reads.by_source.items():
            obj = reads.objects[source]
            attrs = getattr(obj, "__dict__", {})
            chosen = list(attrs) if ALL in names else [n for n in names if n in attrs]
            is_module = isinstance(obj, torch.nn.Module)
            for attr in chosen:
                if is_module and attr in _MODULE_MACHINERY:
                    continue
                guard_baked(request, AttrSource(source, attr), attrs[attr])
            if ALL in names:
                continue
            for attr in names:
                # read off the class (no instance attribute): a constant class attribute
                # is baked in like an instance one (methods are pinned by the type)
                if attr not in attrs and not (is_module and attr in _MODULE_CLASS_MACHINERY):
                    value = inspect.getattr_static(obj, attr, _MISSING)
                    if is_scalar_type(type(value)):
                        guard_baked(request, AttrSource(source, attr), value)

    def _guard_callable(
        self, request: CompileRequest, leaves: list[ArgLeaf]
    ) -> tuple[list[tuple[Source, Any]], HelperGlobals]:
        """What the called function reads besides its arguments: its globals and, for a
        callable passed through ``_invoke``, its closure cells and ``__self__``
        ([Note: Compiling a callable with state], [Note: Globals read by helpers]).
        Returns the objects whose attribute reads to watch, and the helper globals to
        guard after the trace."""
        done: set[str] = set()
        watch: list[tuple[Source, Any]] = []
        if request.fn is not _invoke:
            root = GlobalsRoot.of_function(request.fn, None)
        else:
            head = leaves[0]  # the callable
            fn, src = head.value, head.source
            if inspect.ismethod(fn):
                if watchable(fn.__self__):
                    watch.append((AttrSource(src, "__self__"), fn.__self__))
                src, fn = AttrSource(src, "__func__"), fn.__func__
            elif isinstance(fn, torch.nn.Module):
                # the module is watched as an argument; its class's forward reads globals
                src, fn = AttrSource(TypeSource(src), "forward"), getattr(type(fn), "forward", None)
            if not isinstance(fn, types.FunctionType):
                return watch, HelperGlobals(None, done, {})
            for f, f_src in unwrap(fn, src):
                watch += self._guard_cells(request, f, f_src)
            root = GlobalsRoot.of_function(fn, src)
        if root is None:
            return watch, HelperGlobals(None, done, {})
        more, speculative = root.before_trace(request, done)
        return watch + more, HelperGlobals(root, done, speculative)

    @staticmethod
    def _guard_cells(request: CompileRequest, fn: Any, src: Source) -> list[tuple[Source, Any]]:
        """Guard a function's closure cells; return the watchable objects among them."""
        watch: list[tuple[Source, Any]] = []
        if not isinstance(fn, types.FunctionType):
            return watch
        for i, cell in enumerate(fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            cell_src = CellContentsSource(GetItemSource(ClosureSource(src), i))
            guard_baked(request, cell_src, value)
            if watchable(value):
                watch.append((cell_src, value))
        return watch


def _invoke(__jitguard_callable: Any, *args: Any, **kwargs: Any) -> Any:
    return __jitguard_callable(*args, **kwargs)


def _needs_invoke(fn: Any) -> bool:
    """Whether ``fn`` carries state its call reads that is not an argument: a module (its
    parameters, submodules, ``training``), a bound method (its ``__self__``), a closure (its
    cells). Such an ``fn`` is compiled as the first argument of ``_invoke``, so the cache's
    argument rules guard it ([Note: Compiling a callable with state])."""
    if isinstance(fn, torch.nn.Module) or inspect.ismethod(fn):
        return True
    return isinstance(fn, types.FunctionType) and bool(fn.__closure__)


def compile(
    fn: Optional[Callable[..., Any]] = None,
    /,
    *,
    dynamic: Optional[bool] = None,
    fullgraph: bool = False,
    **options: Any,
) -> Any:
    """Compile ``fn`` with jitguard's reference torch compiler: each cache entry is a
    ``make_fx`` trace over fake inputs, run on real inputs on a hit. ``dynamic``: see
    [Note: Dynamic shapes in jitguard.torch.compile]; ``fullgraph=True`` raises when ``fn``
    cannot be traced instead of running it eagerly. Other options go to
    ``jitguard.specialize`` (``recompile_limit``, ``on_limit``, ``static``, ``dynamic`` is
    taken, ``automatic_dynamic`` for ints, ...). ``fn`` may be an ``nn.Module``, a bound
    method or a closure ([Note: Compiling a callable with state]). Usable as a decorator."""
    if fn is None:
        return lambda f: compile(f, dynamic=dynamic, fullgraph=fullgraph, **options)
    if "compiler" in options:
        raise TypeError("jitguard.torch.compile brings its own compiler")
    compiler = TorchCompiler(dynamic, fullgraph)
    if dynamic is False:
        options.setdefault("automatic_dynamic", False)
    target: Callable[..., Any] = _invoke if _needs_invoke(fn) else fn
    if dynamic is True:
        options["dynamic"] = tuple(inspect.signature(target).parameters)
    compiled = specialize(target, compiler=compiler, **options)
    compiler.cache = cache_of(compiled)
    if target is _invoke:
        inner = compiled

        def compiled(*args: Any, **kwargs: Any) -> Any:
            return inner(fn, *args, **kwargs)

        compiled.cache = compiler.cache  # type: ignore[attr-defined]
        compiled.__wrapped__ = fn  # type: ignore[attr-defined]
    compiled.compiler = compiler
    return compiled


def traced_info(compiled: Any) -> dict[Any, CompiledEntryInfo]:
    """Per compile id, what ``jitguard.torch.compile`` made for the entries of ``compiled``."""
    compiler = getattr(compiled, "compiler", None)
    if not isinstance(compiler, TorchCompiler):
        raise TypeError(f"{compiled!r} was not made by jitguard.torch.compile")
    return dict(compiler.infos)
