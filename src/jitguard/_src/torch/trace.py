"""Trace a function with ``make_fx`` over fake inputs, and generate the Python function that
runs the traced graph on real inputs.

May import: jitguard._src.guards, jitguard._src.sources, jitguard._src.checkpoints,
jitguard._src.contexts, jitguard._src.torch.bindings, jitguard._src.torch.dynamic,
jitguard._src.torch.reads, jitguard._src.torch.symbolic, torch.

# [Note: What a trace assumes]
# Arguments are flattened through exact dicts, lists and tuples into leaves, each with a
# jitguard source (``L['d']['a'][0]``). Tensor leaves become fake tensors (dims static or
# symbolic); int leaves listed as dynamic become SymInts; every other leaf (ints, floats,
# strings, modules, ...) is a constant of the trace. The traced graph is therefore valid
# only where the caller's guards pin: the container structure, every constant leaf, and each
# tensor's type, dtype, device, requires_grad, dispatch flags and static sizes/strides, plus
# the shape guards. Parameters and buffers of modules (and any other real tensor the
# function reaches) are embedded in the graph by reference: in-place updates are seen, a
# rebinding is not, so the caller must guard them by identity.
#
# What the function reads of an input beyond that is watched while it runs (a torch-function
# mode, innermost, so reads by torch's own Python decompositions count too): a storage offset
# it reads is guarded (``Eq(L['x'].storage_offset(), 1)``); reading view-ness, ``_base``,
# ``is_leaf``, ``grad``, the version counter or the storage, or entering inference mode
# (which make_fx does not record), makes the function untraceable.
#
# The graph is traced at the pre-dispatch level (``pre_dispatch=True``): composite ops stay
# whole (``aten.linear``) and grad-mode and autocast blocks inside the function are recorded
# as calls, so the graph runs each op under the state eager code would. At run time each op
# is dispatched from the top again, so autograd records the run as it records eager code.
# Python side effects of the function happen once, while tracing. Anything the fake tensors
# cannot answer (``bool(t)`` on data, a shape error) raises ``TraceError``; the caller runs
# the function eagerly then. Values read from data with ``.item()`` stay in the graph, and
# so do the ``torch._check``s on them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import keyword
import linecache
import logging
import threading
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Optional

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

from ..checkpoints import GlobalContext
from ..contexts import TracingContext, tracing
from ..guards import Source
from ..sources import GetItemSource, LocalSource
from .bindings import op_callable
from .dynamic import ShapeGuardSet, SymbolicInputs
from .reads import AttributeReads, MetadataReads, watch_attributes
from .symbolic import register_sympy_functions

__all__ = ["ArgLeaf", "TraceError", "Traced", "flatten_args", "trace"]


class TraceError(Exception):
    """The function could not be traced over fake inputs (the message says why)."""


@dataclasses.dataclass(frozen=True)
class ArgLeaf:
    """One leaf of the flattened arguments: where it is read from (``path``: the argument
    name, then keys/indices), its source, and its value in the traced call."""

    path: tuple[Any, ...]
    source: Source
    value: Any

    @property
    def is_tensor(self) -> bool:
        return isinstance(self.value, torch.Tensor)


_CONTAINERS = (dict, list, tuple)


def flatten_args(names: Sequence[str], args: Sequence[Any]) -> list[ArgLeaf]:
    """The leaves of ``args`` (bound to ``names``) through exact dicts, lists and tuples."""
    out: list[ArgLeaf] = []

    def walk(path: tuple[Any, ...], source: Source, value: Any) -> None:
        tp = type(value)
        if tp is dict:
            for k, v in value.items():
                walk((*path, k), GetItemSource(source, k), v)
        elif tp is list or tp is tuple:
            for i, v in enumerate(value):
                walk((*path, i), GetItemSource(source, i), v)
        else:
            out.append(ArgLeaf(path, source, value))

    for name, value in zip(names, args, strict=True):
        walk((name,), LocalSource(name, is_input=True), value)
    return out


def _rebuild(value: Any, path: tuple[Any, ...], replace: Mapping[tuple[Any, ...], Any]) -> Any:
    if path in replace:
        return replace[path]
    tp = type(value)
    if tp is dict:
        return {k: _rebuild(v, (*path, k), replace) for k, v in value.items()}
    if tp is list:
        return [_rebuild(v, (*path, i), replace) for i, v in enumerate(value)]
    if tp is tuple:
        return tuple(_rebuild(v, (*path, i), replace) for i, v in enumerate(value))
    return value


@dataclasses.dataclass
class Traced:
    """A traced function: the graph, its shape guards, and ``run`` (same parameters as the
    traced function, positional) executing the graph on real inputs."""

    graph_module: torch.fx.GraphModule
    shapes: ShapeGuardSet
    inputs: list[ArgLeaf]  # the graph's placeholders, in order
    run: Callable[..., Any]
    source: str  # the Python source of ``run``
    attribute_reads: AttributeReads = dataclasses.field(default_factory=AttributeReads)


_registered: list[bool] = []


def _register_once() -> None:
    if not _registered:
        register_sympy_functions()
        _registered.append(True)


def trace(
    fn: Callable[..., Any],
    names: Sequence[str],
    args: Sequence[Any],
    *,
    dynamic_dims: Optional[Mapping[Source, Collection[int]]] = None,
    dynamic_ints: Collection[Source] = (),
    name: str = "traced",
    forward: Optional[Callable[..., Any]] = None,
    header: Optional[str] = None,
    defaults: Optional[Mapping[str, Any]] = None,
    watch: Sequence[tuple[Source, Any]] = (),
) -> Traced:
    """Trace ``fn(*args)`` with ``make_fx`` over fake inputs inside a jitguard tracing
    context (see [Note: What a trace assumes]).

    ``dynamic_dims`` maps a tensor leaf's source to the dims to make symbolic;
    ``dynamic_ints`` lists int leaves to make SymInts. With neither, every size is a
    constant and the graph is traced in "real" mode over the fake inputs; otherwise in
    "symbolic" mode.

    ``args`` are parameter values (one per name). ``forward(fn, *values)`` calls ``fn``
    with them (default: positionally); ``header`` is the parameter list of ``run`` (default:
    the names, positional), with ``defaults`` the names its default values refer to.
    ``watch``: (source, object) pairs whose attribute reads to record
    ([Note: Watching attribute reads]); ``Traced.attribute_reads`` has them.
    """
    _register_once()
    dynamic_dims = dict(dynamic_dims or {})
    dynamic_ints = set(dynamic_ints)
    leaves = flatten_args(names, args)
    sym = SymbolicInputs()
    sym.fake_mode.allow_non_fake_inputs = True
    graph_inputs: list[ArgLeaf] = []
    fakes: list[Any] = []
    for leaf in leaves:
        if leaf.is_tensor:
            fakes.append(sym.fake_tensor(leaf.value, leaf.source, dynamic_dims.get(leaf.source, ())))
            graph_inputs.append(leaf)
        elif type(leaf.value) is int and leaf.source in dynamic_ints:
            fakes.append(sym.fake_int(leaf.value, leaf.source))
            graph_inputs.append(leaf)
    paths = [leaf.path for leaf in graph_inputs]

    reads = MetadataReads({id(f): leaf.source for f, leaf in zip(fakes, graph_inputs, strict=True)
                            if isinstance(f, torch.Tensor)})

    def flat_fn(*flat: Any) -> Any:
        replace = dict(zip(paths, flat, strict=True))
        rebuilt = [_rebuild(a, (n,), replace) for n, a in zip(names, args, strict=True)]
        with reads:
            return fn(*rebuilt) if forward is None else forward(fn, *rebuilt)

    symbolic = any(dynamic_dims.values()) or bool(dynamic_ints)
    try:
        with _tracing_with(sym.fake_mode), _quiet_meta_failures():
            with sym.fake_mode, watch_attributes(watch) as attribute_reads:
                gm = make_fx(flat_fn, tracing_mode="symbolic" if symbolic else "real", pre_dispatch=True)(*fakes)
            if reads.enters_inference:
                raise TraceError(
                    "the function switches inference mode, which a make_fx graph cannot record"
                )
            if reads.unguarded:
                what, source = reads.unguarded[0]
                raise TraceError(
                    f"the function reads {what} of {source.name()}, which no guard pins"
                )
            shapes = sym.produce(offsets_read=reads.offsets)
            if any(sym.shape_env.deferred_runtime_asserts.values()):
                # checks on values read from data (torch._check(n >= 0) after .item()) are
                # not guards: they must run with the graph, as they run in eager code
                insert_deferred_runtime_asserts(gm, sym.shape_env, name)
    except TraceError:
        raise
    except Exception as e:
        raise TraceError(f"{type(e).__name__}: {e}".strip()) from e
    gm.graph.eliminate_dead_code()
    gm.recompile()
    run, src = _generate(gm, names, graph_inputs, name, header, defaults or {})
    return Traced(gm, shapes, graph_inputs, run, src, attribute_reads)


@contextlib.contextmanager
def _tracing_with(fake_mode: Any) -> Iterator[TracingContext]:
    """The current jitguard tracing context with ``fake_mode`` as its fake mode for the
    block (so guards the function adds while traced reach the entry), or a new one when
    there is none; the ShapeEnv is cleaned up on the way out either way."""
    ctx = TracingContext.try_get()
    if ctx is None:
        with tracing(TracingContext(fake_mode)) as new:
            assert new is not None
            yield new
        return
    try:
        with TracingContext.patch(fake_mode=fake_mode):
            yield ctx
    finally:
        fake_mode.shape_env.cleanup()


class _MetaFailureFilter(logging.Filter):
    """Drops torch's log of a fake kernel that raised, on one thread: the exception reaches
    the caller as a TraceError (and the function then raises the same error eagerly)."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.thread == self.thread
            and str(record.msg).startswith("failed while attempting to run meta")
        )


@contextlib.contextmanager
def _quiet_meta_failures() -> Iterator[None]:
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    flt = _MetaFailureFilter()
    logger.addFilter(flt)
    try:
        yield
    finally:
        logger.removeFilter(flt)


# ---- running the graph ---------------------------------------------------------------

_STATE_SETTERS = frozenset({
    torch._C._set_grad_enabled,
    torch.amp.autocast_mode._enter_autocast,
    torch.amp.autocast_mode._exit_autocast,
})

_counter = itertools.count()


def _prefix(names: Sequence[str]) -> str:
    prefix = "___g"
    while any(n.startswith(prefix) for n in names):
        prefix += "_"
    return prefix


def _generate(
    gm: torch.fx.GraphModule,
    names: Sequence[str],
    inputs: Sequence[ArgLeaf],
    name: str,
    header: Optional[str],
    defaults: Mapping[str, Any],
) -> tuple[Callable[..., Any], str]:
    """One straight-line Python function with the traced function's parameters: read each
    graph input from them, call each op (through torch's Python binding where that is exact,
    else the ``OpOverload``'s C++ entry point: [Note: Calling graph ops through torch's Python
    bindings]), return the output structure. Every name it makes up starts with a prefix no parameter
    has."""
    p = _prefix(names)
    ns: dict[str, Any] = dict(defaults)
    consts: dict[int, str] = {}

    def const(obj: Any, hint: str = "c") -> str:
        if obj is None or type(obj) in (bool, int):
            return repr(obj)
        key = id(obj)
        if key not in consts:
            consts[key] = f"{p}{hint}{len(consts)}"
            ns[consts[key]] = obj
        return consts[key]

    pos = {n: n for n in names}
    lines = [f"def {p}run({header if header is not None else ', '.join(names)}):"]
    var: dict[torch.fx.Node, str] = {}
    placeholders = iter(inputs)

    def arg(a: Any) -> str:
        if isinstance(a, torch.fx.Node):
            return var[a]
        if isinstance(a, (list, tuple)):
            inner = ", ".join(arg(x) for x in a)
            if isinstance(a, tuple) and type(a) is not tuple:
                return f"{const(type(a), 'T')}(({inner}{',' if len(a) == 1 else ''}))"
            return f"({inner},)" if isinstance(a, tuple) else f"[{inner}]"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{const(k, 'k')}: {arg(v)}" for k, v in a.items()) + "}"
        return const(a)

    sets_state = False
    for i, node in enumerate(gm.graph.nodes):
        v = f"{p}v{i}"
        if node.op == "call_function" and node.target in _STATE_SETTERS:
            sets_state = True
        if node.op == "placeholder":
            leaf = next(placeholders)
            expr = pos[leaf.path[0]] + "".join(f"[{const(k, 'k')}]" for k in leaf.path[1:])
            lines.append(f"    {v} = {expr}")
        elif node.op == "get_attr":
            obj: Any = gm
            for part in str(node.target).split("."):
                obj = getattr(obj, part)
            lines.append(f"    {v} = {const(obj, 'attr')}")
        elif node.op == "call_function":
            target = node.target
            if isinstance(target, torch._ops.OpOverload):
                callee = const(op_callable(node), "op")
            else:
                callee = const(target, "fn")
            parts = [arg(a) for a in node.args]
            for k, a in node.kwargs.items():
                if not k.isidentifier() or keyword.iskeyword(k):
                    raise TraceError(f"cannot pass keyword {k!r} to {target}")
                parts.append(f"{k}={arg(a)}")
            lines.append(f"    {v} = {callee}({', '.join(parts)})")
        elif node.op == "output":
            lines.append(f"    return {arg(node.args[0])}")
        else:
            raise TraceError(f"unexpected node {node.op} in a make_fx graph")
        var[node] = v
    if sets_state:
        # The graph enters and leaves grad-mode or autocast blocks of the function: when an
        # op between raises, put the states back, as leaving the block would.
        ns[f"{p}GlobalContext"] = GlobalContext
        body = [f"    {line}" for line in lines[1:]]
        lines = [
            lines[0],
            f"    {p}gc = {p}GlobalContext()",
            f"    {p}gc.save()",
            f"    {p}saved = {p}gc.copy_graphstate()",
            "    try:",
            *body,
            "    except BaseException:",
            f"        {p}gc.restore_graphstate({p}saved)",
            "        raise",
        ]
    src = "\n".join(lines) + "\n"
    filename = f"<jitguard graph {name}#{next(_counter)}>"
    code = compile(src, filename, "exec")
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    exec(code, ns)
    run: Callable[..., Any] = ns[f"{p}run"]
    weakref.finalize(run, linecache.cache.pop, filename, None)
    return run, src
