"""The stored-artifact side of the torch adapter ([Note: Stored captures], torch's side):
what a capture keeps to be serialized, torch's serialized forms of a compiled graph and of
a code object, and the Dynamo bookkeeping a loaded entry needs (builtins dict, unique ids).
tests/torch/test_adapter.py pins each internal used here.

May import: torch (its private modules too), the standard library,
jitguard._src.torch.adapter_graphs (the stored forms of compiled graphs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
import re
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import torch

from . import adapter_graphs

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

@contextlib.contextmanager
def saving() -> Iterator[None]:
    """While a capture's backend compiles to be stored: torch's saving config, and lean
    stored graphs ([Note: Lean stored graphs])."""
    with adapter_graphs.lean(), torch._functorch.config.patch(_SAVING_CONFIG):
        yield


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
        forward = adapter_graphs.forward_form(compiled.graph_module)
        if forward is not None:
            return adapter_graphs.load_eager_graph, pickle.dumps((data, forward),
                                                   protocol=pickle.HIGHEST_PROTOCOL)
    return cls.deserialize_compile_artifacts, data


def load_compiled(deserializer: Any, data: bytes) -> Any:
    """The compiled graph ``dump_compiled`` wrote (as ``AOTCompiledFunction.deserialize``
    loads it)."""
    import torch._inductor.config as inductor_config

    adapter_graphs.install()  # an aot_eager graph stored with its forward's code
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
