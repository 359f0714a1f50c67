"""The stored-artifact side of the torch adapter ([Note: Stored captures], torch's side):
what a capture keeps to be serialized, torch's serialized forms of a compiled graph and of
a code object, and the Dynamo bookkeeping a loaded entry needs (builtins dict, unique ids).
tests/torch/test_adapter.py pins each internal used here.

May import: torch (its private modules too), the standard library. Nothing from jitguard.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import pickle
import re
import sys
import threading
import types
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import torch

__all__ = [
    "SavedCapture",
    "builtins_dict",
    "by_id_global",
    "dump_code",
    "dump_compiled",
    "is_module",
    "load_code",
    "load_compiled",
    "reserve_unique_ids",
    "saving",
]

def is_module(obj: Any) -> bool:
    """Whether ``obj`` is an ``nn.Module`` (re-bound by name in a stored entry: [Note:
    Objects found at module level])."""
    return isinstance(obj, torch.nn.Module)


# What ``aot_compile_fullgraph`` sets while the backend compiles, so that an AOTAutograd
# backend ("aot_eager", "inductor") returns a compiled function with a ``serialize``.
_SAVING_CONFIG = {
    "strict_autograd_cache": True,
    "bypass_autograd_cache_key": True,
    "bundled_autograd_cache": True,
    "force_non_lazy_backward_lowering": True,
    "force_autograd_cache": True,
}

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


def _install_lean() -> None:
    """Wrap ``AOTEagerOutputCode.prepare_for_serialization`` once: inside ``saving()`` it
    pickles the graph without ``_LEAN_META``; elsewhere it is torch's, unchanged."""
    from torch._dynamo.backends import debugging

    cls = debugging.AOTEagerOutputCode
    with _lean_lock:
        torch_prepare = cls.prepare_for_serialization
        if getattr(torch_prepare, "_jitguard_lean", False):
            return

        def prepare_for_serialization(self: Any) -> None:
            gm = self.gm if _lean.get() else None
            held = []
            if gm is not None:
                for node in gm.graph.nodes:
                    for key in _LEAN_META:
                        if key in node.meta:
                            held.append((node, key, node.meta.pop(key)))
            try:
                torch_prepare(self)
            finally:
                for node, key, value in held:
                    node.meta[key] = value

        prepare_for_serialization._jitguard_lean = True  # type: ignore[attr-defined]
        cls.prepare_for_serialization = prepare_for_serialization  # type: ignore[method-assign]


@contextlib.contextmanager
def saving() -> Iterator[None]:
    """While a capture's backend compiles to be stored: torch's saving config, and lean
    stored graphs ([Note: Lean stored graphs])."""
    _install_lean()
    token = _lean.set(True)
    try:
        with torch._functorch.config.patch(_SAVING_CONFIG):
            yield
    finally:
        _lean.reset(token)


@dataclasses.dataclass
class SavedCapture:
    """What serializing one capture needs: the program's bytecode, the module aliases it
    reads as globals, the names of the globals Dynamo bound to the builtins dict, the name it calls its compiled graph by, the
    compiled graph in torch's serializable form, every code object Dynamo traced, and the
    modules Dynamo bound to globals named by their id (``_139665382568912_c0``: torch, for
    a guard on ``type(t)``), by module name."""

    bytecode: types.CodeType
    import_sources: dict[str, str]
    builtins_names: tuple[str, ...]
    backend_id: str
    compiled: Any  # a torch._dynamo.aot_compile_types.SerializableCallable
    traced_code: tuple[types.CodeType, ...]
    module_globals: dict[str, str] = dataclasses.field(default_factory=dict)


# Dynamo's ``install_global_by_id``: ``{prefix}_{id(value)}_c{compile counter}``
_BY_ID = re.compile(r".*_(\d+)_c\d+")


def by_id_global(name: str, value: Any) -> bool:
    """Whether ``name`` is a global Dynamo bound by the id of ``value``: a name of this
    process, which another process reads nothing under unless it is bound there again."""
    m = _BY_ID.fullmatch(name)
    return m is not None and int(m[1]) == id(value)


def _names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def _saved(gco: Any, bi: Any, gm: torch.fx.GraphModule,
           compiled: Any) -> tuple[Optional[SavedCapture], Optional[str]]:
    from torch._dynamo.aot_compile_types import (
        BundledAOTAutogradSerializableCallable,
        GraphModuleSerializableCallable,
        SerializableCallable,
    )

    if next(gm.parameters(), None) is not None or next(gm.buffers(), None) is not None:
        # their values would be stored with the graph instead of read from the module
        return None, "the graph holds parameters or buffers of its own"
    if isinstance(compiled, SerializableCallable):
        serializable: Any = compiled
    elif getattr(compiled, "serialize", None) is not None:
        serializable = BundledAOTAutogradSerializableCallable(compiled)
    elif compiled is gm or compiled == gm.forward:
        serializable = GraphModuleSerializableCallable(gm)
    else:
        return None, f"the backend returned a {type(compiled).__qualname__}, which torch cannot serialize"
    env = gco.get_runtime_env()
    # Dynamo guards builtins through a global it binds to the module's builtins dict
    # (``G['__builtins_dict___0']['iter']``): its names are kept, to be bound again on load.
    scope_builtins = builtins_dict(gco.f_globals)
    builtins_names = tuple(k for k, v in gco.f_globals.items()
                           if k.startswith("__builtins_dict__") and v is scope_builtins)
    # modules Dynamo bound by id are bound again on load, by module name; any other object
    # bound by id that the program reads is of this process
    module_globals = {k: v.__name__ for k, v in list(gco.f_globals.items())
                      if isinstance(v, types.ModuleType) and by_id_global(k, v)
                      and sys.modules.get(v.__name__) is v}
    for name in sorted(_names(env.bytecode) - set(module_globals)):
        if name in gco.f_globals and by_id_global(name, gco.f_globals[name]):
            return None, (f"its bytecode reads the global {name}, which Dynamo bound to a "
                          f"{type(gco.f_globals[name]).__qualname__} of this process by its id")
    return SavedCapture(env.bytecode, dict(env.import_sources), builtins_names, bi.backend_id,
                        serializable, tuple(gco.traced_code), module_globals), None


def reserve_unique_ids(names: Sequence[str]) -> None:
    """Make Dynamo's ``unique_id`` (one counter for every prefix: ``__builtins_dict___3``)
    never again give a name ending in a number up to those of ``names``, so that a later
    capture in this process does not install a global under a name a loaded entry bound
    (Dynamo refuses a name already in the scope)."""
    import itertools

    import torch._dynamo.bytecode_transformation as bt

    highest = -1
    for name in names:
        tail = name.rsplit("_", 1)[-1]
        if tail.isdigit():
            highest = max(highest, int(tail))
    if highest >= 0:
        bt._unique_id_counter = itertools.count(max(highest + 1, next(bt._unique_id_counter)))


def builtins_dict(f_globals: dict[str, Any]) -> dict[str, Any]:
    """The builtins dict of a module's globals, as Dynamo binds it
    (``__builtins__`` is a module or its dict)."""
    from torch._dynamo.output_graph import get_builtins_dict

    return get_builtins_dict(f_globals)


def dump_compiled(compiled: Any) -> tuple[Any, bytes]:
    """torch's serialized form of a compiled graph: (its deserializer, bytes); for an eager
    graph, with its forward's code kept too ([Note: Stored forward code])."""
    from torch._dynamo.aot_compile_types import GraphModuleSerializableCallable

    cls = type(compiled)
    data = cls.serialize_compile_artifacts(compiled)
    if cls is GraphModuleSerializableCallable:
        forward = _forward_form(compiled.graph_module)
        if forward is not None:
            return _load_eager_graph, pickle.dumps((data, forward),
                                                   protocol=pickle.HIGHEST_PROTOCOL)
    return cls.deserialize_compile_artifacts, data


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
_FLOAT_GLOBALS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
_TYPE_HOMES = {type(None): "types:NoneType", type(Ellipsis): "types:EllipsisType",
               type(NotImplemented): "types:NotImplementedType"}


def _forward_form(gm: Any) -> Optional[tuple[bytes, str, dict[str, tuple[str, str]], bool]]:
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


def _load_eager_graph(bundle: bytes) -> Any:
    """An eager graph ``dump_compiled`` stored with its forward's code: torch's
    ``GraphModuleSerializableCallable.deserialize_compile_artifacts``, with the forward
    made from that code instead of ``recompile()``; a forward that reads nothing of its
    module runs before the graph is unpickled, which waits until something asks for it
    ([Note: Stored forward code])."""
    import builtins
    import linecache
    import marshal

    data, (module_code, src, names, selfless) = pickle.loads(bundle)
    scope: dict[str, Any] = {"__builtins__": builtins}
    for name, (how, what) in names.items():
        if how == "float":
            scope[name] = _FLOAT_GLOBALS[what]
        elif how == "module":
            scope[name] = sys.modules.get(what, _MISSING)
        else:
            scope[name] = _found(*what.split(":", 1))
        if scope[name] is _MISSING:
            return _torch_eager_graph(data, None, "")  # torch's way: recompile
    code = marshal.loads(module_code)
    exec(code, scope)
    linecache.cache[code.co_filename] = (len(src), None, src.splitlines(True),
                                         code.co_filename)
    forward = scope.pop("forward")
    if selfless:
        return _StoredEagerGraph(forward, data, src)
    return _torch_eager_graph(data, forward, src)


def _torch_eager_graph(data: bytes, forward: Any, src: str) -> Any:
    """torch's loaded form of an eager graph; its forward ``forward`` (compiled from
    ``src``) when given, else recompiled from the graph."""
    from torch._dynamo.aot_compile_types import GraphModuleSerializableCallable
    from torch._subclasses import FakeTensorMode
    from torch.fx._graph_pickler import GraphPickler
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    state = pickle.loads(data)
    gm = GraphPickler.loads(state["graph_module"], FakeTensorMode(shape_env=ShapeEnv()))
    if not isinstance(gm, torch.fx.GraphModule):
        raise TypeError(f"expected a torch.fx.GraphModule, got {type(gm).__name__}")
    if forward is None:
        gm.recompile()
    else:
        type(gm).forward = forward
        gm._code = src
    state["graph_module"] = gm
    return GraphModuleSerializableCallable(**state)


class _StoredEagerGraph:
    """A loaded eager graph whose forward reads nothing of its module: calling it runs the
    stored forward; any other attribute (``graph_module``, ...) is torch's loaded form's,
    unpickled on the first such read."""

    def __init__(self, forward: Any, data: bytes, src: str) -> None:
        self._forward = forward
        self._data = data
        self._src = src
        self._loaded: Any = None
        self._lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._forward(None, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        with self._lock:
            if self._loaded is None:
                self._loaded = _torch_eager_graph(self._data, self._forward, self._src)
        return getattr(self._loaded, name)


def load_compiled(deserializer: Any, data: bytes) -> Any:
    """The compiled graph ``dump_compiled`` wrote (as ``AOTCompiledFunction.deserialize``
    loads it)."""
    import torch._inductor.config as inductor_config

    with inductor_config.patch(enable_autograd_for_aot=True):
        return deserializer(data)


def dump_code(code: types.CodeType) -> Any:
    """A picklable form of a code object (torch's ``SerializedCode``)."""
    from torch._dynamo.package import SerializedCode

    return SerializedCode.from_code_object(code)


def load_code(data: Any) -> types.CodeType:
    from torch._dynamo.package import SerializedCode

    if not isinstance(data, SerializedCode):
        raise TypeError(f"expected a SerializedCode, got {type(data).__name__}")
    return SerializedCode.to_code_object(data)
