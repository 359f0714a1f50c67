"""The fastest exact way to call one op of a traced graph: torch's Python binding of the op
when it provably reaches the same overload, else the overload's C++ entry point.

May import: torch.

# [Note: Calling graph ops through torch's Python bindings]
# A make_fx graph calls ``OpOverload``s (``aten.add.Tensor``). Calling one from Python goes
# through pybind's generic, schema-driven argument conversion: ``aten.add.Tensor._op(a, b)``
# costs ~2.7 us here where ``torch.add(a, b)``'s binding (``torch._C._VariableFunctions
# .add``, torch's generated argument parser) costs ~1.5 us, and a graph runs one call per
# op. A binding picks an overload from its arguments' types, so it is used for a node only
# when it is shown to reach the node's overload for arguments of those types: the binding
# is traced once (``make_fx``, pre-dispatch, on meta tensors of the node's dtypes, with the
# node's non-tensor arguments) and must record exactly one call, of that overload. The
# answer is cached per (overload, argument kinds, keyword names). Everything else (no
# binding by that name, another overload, an op the meta device cannot run) keeps ``_op``.
# Both paths enter the dispatcher at the top, so autograd, autocast and torch-function
# handling are the same.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Optional

import torch
import torch.fx

__all__ = ["op_callable"]

_NAMESPACES = tuple(
    getattr(torch._C, name)
    for name in ("_VariableFunctions", "_nn", "_linalg", "_special", "_fft", "TensorBase")
    if hasattr(torch._C, name)
)
_cache: dict[Any, Optional[Callable[..., Any]]] = {}
_lock = threading.Lock()
_SIMPLE = (bool, int, float, str, type(None), torch.dtype, torch.device, torch.layout,
           torch.memory_format)


def _example(a: Any) -> Any:
    """A concrete stand-in for one argument of a node (a meta tensor for a tensor), or
    raise ValueError when it has none."""
    if isinstance(a, torch.fx.Node):
        val = a.meta.get("val")
        if isinstance(val, torch.Tensor):
            sizes = [int(s) for s in val.shape]
            strides = [int(s) for s in val.stride()]
            return torch.empty_strided(sizes, strides, dtype=val.dtype, device="meta")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            node = val.node
            hint = node.hint if node.has_hint() else None
            if hint is None:
                raise ValueError("no hint")
            return type(hint)(hint)
        if isinstance(val, _SIMPLE):
            return val
        raise ValueError(f"no example for {val!r}")
    if isinstance(a, tuple):
        return tuple(_example(x) for x in a)
    if isinstance(a, list):
        return [_example(x) for x in a]
    if isinstance(a, _SIMPLE):
        return a
    raise ValueError(f"no example for {a!r}")


def _kind(a: Any) -> Any:
    if isinstance(a, torch.fx.Node):
        val = a.meta.get("val")
        if isinstance(val, torch.Tensor):
            return ("T", val.dtype)
        return type(val).__name__
    if isinstance(a, (list, tuple)):
        return ("seq", tuple(_kind(x) for x in a))
    return type(a).__name__


def _verified(target: Any, binding: Callable[..., Any], args: Any, kwargs: Any) -> bool:
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        ex_args = [_example(a) for a in args]
        ex_kwargs = {k: _example(v) for k, v in kwargs.items()}
    except ValueError:
        return False
    tensors: list[Any] = []
    slots: list[Any] = []

    def place(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            tensors.append(x)
            return ("t", len(tensors) - 1)
        if isinstance(x, list):
            return ("l", [place(y) for y in x])
        return ("c", x)

    slots = [place(x) for x in ex_args]
    kw_slots = {k: place(v) for k, v in ex_kwargs.items()}

    def take(slot: Any, ts: Any) -> Any:
        tag, v = slot
        if tag == "t":
            return ts[v]
        if tag == "l":
            return [take(s, ts) for s in v]
        return v

    def call(*ts: Any) -> Any:
        return binding(*[take(s, ts) for s in slots], **{k: take(s, ts) for k, s in kw_slots.items()})

    try:
        gm = make_fx(call, pre_dispatch=True)(*tensors)
    except Exception:
        return False
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    return len(calls) == 1 and calls[0].target is target


def op_callable(node: torch.fx.Node) -> Callable[..., Any]:
    """What a generated graph runner calls for ``node`` (an ``OpOverload`` call)."""
    target = node.target
    fallback: Callable[..., Any] = target._op  # type: ignore[union-attr]
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.name.startswith("aten::"):
        return fallback
    try:
        key = (target, tuple(_kind(a) for a in node.args),
               tuple(sorted((k, _kind(v)) for k, v in node.kwargs.items())))
        hash(key)
    except TypeError:
        return fallback
    with _lock:
        if key in _cache:
            found = _cache[key]
            return found if found is not None else fallback
    name = schema.name.split("::", 1)[1]
    chosen: Optional[Callable[..., Any]] = None
    for ns in _NAMESPACES:
        binding = getattr(ns, name, None)
        if binding is not None and _verified(target, binding, node.args, node.kwargs):
            chosen = binding
            break
    with _lock:
        _cache[key] = chosen
    return chosen if chosen is not None else fallback
