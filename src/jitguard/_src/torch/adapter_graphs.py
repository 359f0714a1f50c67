"""The stored forms of compiled graphs, torch's side ([Note: Stored captures]): lean
AOTAutograd graphs, and a graph's forward kept as code so that loading it needs neither
``recompile`` nor, where the forward reads nothing of its module, the unpickled graph.
tests/torch/test_adapter.py pins each internal used here.

May import: torch (its private modules too), the standard library. Nothing from jitguard.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import pickle
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any, Optional

import torch

__all__ = ["forward_form", "install", "lean", "load_eager_graph"]

# The attribute an ``AOTEagerOutputCode`` carries its forward's stored form under, from
# ``prepare_for_serialization`` (pickled with it) to ``post_compile``.
_FORWARD_ATTR = "_jitguard_forward"
_KEPT_VERSION = "jitguard-boxed-forward-1"  # the first item of what it carries

# [Note: Lean stored graphs]
# An "aot_eager" graph is serialized while its backend compiles (AOTAutograd's cache entry:
# ``AOTEagerOutputCode.prepare_for_serialization``), with each node's metadata. Loading it
# runs only the graph's code, which FX generates from the nodes' targets and arguments; yet
# unpickling the metadata rebuilt a fake tensor per node ("val"), its "tensor_meta", and
# the provenance strings: on a 36-layer Qwen3, 0.95 s of a 1.1 s warm first call, against
# 0.29 s without them. So while a capture compiles to be stored (``saving``), those keys
# are left out of what is pickled, and put back on the live graph right after (the
# running process keeps them). What loading runs (the graph code, the boxed calling
# convention, AOTAutograd's runtime wrappers and their own metadata) does not read them.
_LEAN_META = ("val", "tensor_meta", "stack_trace", "original_aten", "from_node", "seq_nr")
_lean: contextvars.ContextVar[bool] = contextvars.ContextVar("jitguard_lean_graphs",
                                                            default=False)
_lean_lock = threading.Lock()


def _install() -> None:
    """Wrap ``AOTEagerOutputCode.prepare_for_serialization`` and ``post_compile`` once:
    inside ``saving()`` the first pickles the graph without ``_LEAN_META`` and keeps its
    forward's code ([Note: Stored forward code]); the second makes a graph from that code
    where an entry carries it. Elsewhere, and for entries without it, they are torch's."""
    from torch._dynamo.backends import debugging

    cls = debugging.AOTEagerOutputCode
    with _lean_lock:
        torch_prepare = cls.prepare_for_serialization
        if getattr(torch_prepare, "_jitguard_lean", False):
            return
        torch_post_compile = cls.post_compile

        def prepare_for_serialization(self: Any) -> None:
            if isinstance(self.gm, _StoredBoxedGraph):
                # a loaded graph serialized again: what it was loaded from, as it was
                self.__dict__[_FORWARD_ATTR] = self.gm._kept
                self._serialized_gm, self.gm = self.gm._data, None
                return
            gm = self.gm if _lean.get() else None
            held = []
            form: Any = None
            if gm is not None:
                for node in gm.graph.nodes:
                    for key in _LEAN_META:
                        if key in node.meta:
                            held.append((node, key, node.meta.pop(key)))
                boxed = _boxed_forward_form(gm)
                if boxed is not None:
                    form = (_KEPT_VERSION, boxed, _builtin_only(gm))
            try:
                torch_prepare(self)
            finally:
                for node, key, value in held:
                    node.meta[key] = value
            if form is not None and self.gm is None and self._serialized_gm is not None:
                self.__dict__[_FORWARD_ATTR] = form

        def post_compile(self: Any, *args: Any, **kwargs: Any) -> None:
            kept = self.__dict__.pop(_FORWARD_ATTR, None)
            # torch's own AOTAutograd cache keeps entries across processes and versions:
            # anything but this version's form is left to torch
            if (isinstance(kept, tuple) and len(kept) == 3 and kept[0] == _KEPT_VERSION
                    and self.gm is None and self._serialized_gm is not None):
                _, form, builtin_only = kept
                try:
                    made = _forward_from(form)
                except Exception:
                    made = None
                if made is not None:
                    self.gm = _StoredBoxedGraph(made[0], made[1], self._serialized_gm,
                                                builtin_only, kept)
                    self._serialized_gm = None
                    return
            torch_post_compile(self, *args, **kwargs)

        prepare_for_serialization._jitguard_lean = True  # type: ignore[attr-defined]
        cls.prepare_for_serialization = prepare_for_serialization  # type: ignore[method-assign]
        cls.post_compile = post_compile  # type: ignore[method-assign]


@contextlib.contextmanager
def lean() -> Iterator[None]:
    """Graphs serialized meanwhile (this context's) are lean and keep their forward's code."""
    _install()
    token = _lean.set(True)
    try:
        yield
    finally:
        _lean.reset(token)


def install() -> None:
    """What loading a stored entry needs: ``post_compile`` that reads a kept forward."""
    _install()


# [Note: Stored forward code]
# Loading an eager graph, torch unpickles its nodes, then ``recompile()``s it: FX writes
# the forward's Python source from the nodes again and compiles it (on a 36-layer Qwen3,
# 82 ms of a warm first call's ~450 ms). The store keeps that code instead: when the entry
# is saved, the source FX generates from the graph as it is pickled (``python_code``, what
# ``recompile`` would generate from it after loading), compiled, marshalled (the store's
# key holds the exact Python version), with the globals that source names: floats (inf,
# nan), modules by name, and objects found again at their module and qualified name (each
# checked to be that object when saved). Loading makes the forward from them as FX's
# ``_exec_with_source`` does (the module code run in a dict of those globals). A forward
# that reads nothing of its module (no ``self.`` in its source, no ``get_attr`` or
# ``call_module`` node: Dynamo's graphs take their parameters as inputs) runs as it is, and
# the graph is unpickled only when something reads more of the loaded object (its
# ``graph_module``): unpickling Qwen3's 3,227 nodes was another ~120 ms of the first call.
# Otherwise the forward is installed on the unpickled graph, whose other parts are
# torch's. A global with no such name keeps the entry on torch's way (``recompile`` at
# load), and so does one not found at load.
# An "aot_eager" graph is the same, inside AOTAutograd's entry: its
# ``AOTEagerOutputCode.post_compile`` unpickles the graph, gives it FX's boxed calling
# convention and ``recompile()``s it (on Qwen3, ~0.45 s and ~0.3 s of a ~1.8 s warm first
# call, on a loaded machine). While a capture is stored (``lean()``), the output code
# pickled also carries the forward as its graph had it (boxed; the code is made while
# the lean keys are off the nodes, as loading would see them), where it reads nothing of
# its module; at load, ``post_compile`` makes the forward from it, and the graph
# (``_StoredBoxedGraph``) is unpickled only if something reads more than ``forward``. An
# entry without it, or with a global not found, is loaded torch's way.
_FLOAT_GLOBALS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_TYPE_HOMES = {type(None): "types:NoneType", type(Ellipsis): "types:EllipsisType",
               type(NotImplemented): "types:NotImplementedType"}


def forward_form(gm: Any) -> Optional[tuple[bytes, str, dict[str, tuple[str, str]], bool]]:
    """(marshalled module code, source, globals named, whether it reads nothing of its
    module) of ``gm``'s forward as FX generates it from its graph; None when a global has no
    name to be found again by."""
    import marshal

    code = gm.graph.python_code(root_module="self")
    names: dict[str, tuple[str, str]] = {}
    for name, value in code.globals.items():
        if isinstance(value, float):
            text = repr(value)
            if text not in _FLOAT_GLOBALS:
                return None
            names[name] = ("float", text)
        elif isinstance(value, types.ModuleType):
            if sys.modules.get(value.__name__) is not value:
                return None
            names[name] = ("module", value.__name__)
        elif isinstance(value, type) and value in _TYPE_HOMES:  # builtins' types that builtins does not name
            names[name] = ("object", _TYPE_HOMES[value])
        else:
            module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
            if not isinstance(module, str) or not isinstance(qualname, str) \
                    or _found(module, qualname) is not value:
                return None
            names[name] = ("object", f"{module}:{qualname}")
    module_code = compile(code.src, _graph_filename(code.src), "exec")
    # a forward that reads nothing of its module runs without the unpickled graph: no node
    # reads it (get_attr, call_module), and neither does what the codegen adds around the
    # nodes (a pytree codegen's ``self._in_spec``): FX writes every such read ``self.<name>``
    selfless = "self." not in code.src and all(
        n.op not in ("get_attr", "call_module") for n in gm.graph.nodes)
    return marshal.dumps(module_code), code.src, names, selfless


def _graph_filename(src: str) -> str:
    import hashlib

    return f"<jitguard stored graph {hashlib.sha256(src.encode()).hexdigest()[:12]}>"


_MISSING: Any = object()


def _found(module: str, qualname: str) -> Any:
    current: Any = sys.modules.get(module, _MISSING)
    for part in qualname.split("."):
        if current is _MISSING or part == "<locals>":
            return _MISSING
        current = getattr(current, part, _MISSING)
    return current


def _forward_from(form: tuple[bytes, str, dict[str, tuple[str, str]], bool]) -> Optional[
        tuple[Any, str]]:
    """(the forward function, its source) made from a stored form, as FX's
    ``_exec_with_source`` makes it; None when a global it names is not found here."""
    import builtins
    import linecache
    import marshal

    module_code, src, names, _ = form
    scope: dict[str, Any] = {"__builtins__": builtins}
    for name, (how, what) in names.items():
        if how == "float":
            scope[name] = _FLOAT_GLOBALS[what]
        elif how == "module":
            scope[name] = sys.modules.get(what, _MISSING)
        else:
            scope[name] = _found(*what.split(":", 1))
        if scope[name] is _MISSING:
            return None
    code = marshal.loads(module_code)
    exec(code, scope)
    linecache.cache[code.co_filename] = (len(src), None, src.splitlines(True),
                                         code.co_filename)
    return scope.pop("forward"), src


def load_eager_graph(bundle: bytes) -> Any:
    """An eager graph ``dump_compiled`` stored with its forward's code: torch's
    ``GraphModuleSerializableCallable.deserialize_compile_artifacts``, with the forward
    made from that code instead of ``recompile()``; a forward that reads nothing of its
    module runs before the graph is unpickled, which waits until something asks for it
    ([Note: Stored forward code])."""
    data, form = pickle.loads(bundle)
    made = _forward_from(form)
    if made is None:
        return _torch_eager_graph(data, None, "")  # torch's way: recompile
    forward, src = made
    if form[3]:
        return _StoredEagerGraph(forward, src, data)
    return _torch_eager_graph(data, forward, src)


def _torch_eager_graph(data: bytes, forward: Any, src: str) -> Any:
    """torch's loaded form of an eager graph; its forward ``forward`` (compiled from
    ``src``) when given, else recompiled from the graph."""
    from torch._dynamo.aot_compile_types import GraphModuleSerializableCallable

    state = pickle.loads(data)
    state["graph_module"] = _unpickled_graph(state["graph_module"], forward, src)
    return GraphModuleSerializableCallable(**state)


def _unpickled_graph(pickled: bytes, forward: Any, src: str, codegen: Any = None) -> Any:
    """The graph GraphPickler wrote, with FX's ``codegen`` when given, and its forward
    ``forward`` (compiled from ``src``), or recompiled when that is None."""
    from torch._subclasses import FakeTensorMode
    from torch.fx._graph_pickler import GraphPickler
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    gm: Any = GraphPickler.loads(pickled, FakeTensorMode(shape_env=ShapeEnv()))
    if not isinstance(gm, torch.fx.GraphModule):
        raise TypeError(f"expected a torch.fx.GraphModule, got {type(gm).__name__}")
    if codegen is not None:
        gm.graph.set_codegen(codegen)
    if forward is None:
        gm.recompile()
    else:
        type(gm).forward = forward
        gm._code = src
    return gm


class _LazyGraph:
    """A loaded graph whose stored forward reads nothing of its module: it runs that
    forward; any other attribute is read from the full loaded form (``_load()``), made on
    the first such read, once."""

    def __init__(self, forward: Any, src: str, data: bytes) -> None:
        self._forward = forward
        self._src = src
        self._data = data
        self._loaded: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load()
        return getattr(self._loaded, name)


class _StoredEagerGraph(_LazyGraph):
    """A loaded eager graph: calling it runs the stored forward; any other attribute
    (``graph_module``, ...) is torch's loaded form's."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._forward(None, *args, **kwargs)

    def _load(self) -> Any:
        return _torch_eager_graph(self._data, self._forward, self._src)


def _boxed_forward_form(gm: Any) -> Optional[tuple[bytes, str, dict[str, tuple[str, str]], bool]]:
    """``forward_form`` of an AOTAutograd graph as ``post_compile`` would make it (FX's boxed
    calling convention), where it reads nothing of its module; None otherwise, or where
    anything about it is not as expected (the entry is then loaded torch's way)."""
    from torch.fx.graph import _BoxedCodeGen

    try:
        if type(gm.graph._codegen) is not _BoxedCodeGen:
            return None
        form = forward_form(gm)
    except Exception:
        return None
    return form if form is not None and form[3] else None


# [Note: The first call's aliasing check]
# AOTAutograd runs a compiled graph's first call under a dispatch mode
# (``_AnalyzeCustomOpInputOutputMode``) that runs every op and then, for a custom op only
# (not aten, prim or prims: ``torch._library.utils.is_builtin``), checks that its outputs do
# not alias its inputs. For a graph whose every call is a builtin op (or ``getitem`` on
# one's outputs), the mode checks nothing: it costs a Python dispatch per op (on Qwen3,
# 3,404 ops, ~0.2 s of a loaded machine's warm first call) and gives what the ops give. So
# a stored graph known (when saved) to be such runs its first call with that mode, when it
# is the current one, popped off the stack; every other mode stays, and any other graph
# gets torch's check.


def _builtin_only(gm: Any) -> bool:
    """Whether every node of ``gm`` calls a builtin op (or ``getitem``), so that the first
    call's aliasing check has nothing to check ([Note: The first call's aliasing check])."""
    import operator

    from torch._library.utils import is_builtin

    for node in gm.graph.nodes:
        if node.op == "call_function":
            target = node.target
            if target is operator.getitem:
                continue
            if not (isinstance(target, torch._ops.OpOverload) and is_builtin(target)):
                return False
        elif node.op not in ("placeholder", "output"):
            return False
    return True


def _aliasing_check() -> Any:
    """A context that pops the first call's aliasing check off the dispatch mode stack,
    when it is the current mode; None when it is not."""
    from torch._functorch._aot_autograd.runtime_wrappers import (
        _AnalyzeCustomOpInputOutputMode,
    )
    from torch.utils._python_dispatch import _get_current_dispatch_mode, _pop_mode_temporarily

    if type(_get_current_dispatch_mode()) is not _AnalyzeCustomOpInputOutputMode:
        return None
    return _pop_mode_temporarily()


class _StoredBoxedGraph(_LazyGraph):
    """A loaded AOTAutograd graph (``AOTEagerOutputCode.gm``): ``forward(args)`` runs the
    stored forward; any other attribute is the graph's, unpickled as ``post_compile``
    would, without ``recompile`` ([Note: Stored forward code])."""

    def __init__(self, forward: Any, src: str, data: bytes, builtin_only: bool,
                 kept: tuple[Any, ...]) -> None:
        super().__init__(forward, src, data)
        self._kept = kept  # what the output code carried, to be serialized again
        self._first = builtin_only

    def forward(self, args: Any) -> Any:
        if self._first:
            self._first = False
            checking = _aliasing_check()
            if checking is not None:
                with checking:
                    return self._forward(None, args)
        return self._forward(None, args)

    def __call__(self, args: Any) -> Any:
        return self.forward(args)

    def _load(self) -> Any:
        from torch.fx.graph import _BoxedCodeGen

        return _unpickled_graph(self._data, self._forward, self._src, _BoxedCodeGen())
