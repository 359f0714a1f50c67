"""What ``jitguard.torch.compile`` returns (``CompiledFunction``: the call path with torch's
compile stance) and what it keeps per entry (``EntryInfo``: the capture, torch's trees,
verify mode).

May import: jitguard._src.* (cache, compiler, errors), jitguard._src.torch.adapter,
jitguard._src.torch.adapter_runtime.

# [Note: Verify mode]
# With ``verify=True`` (or ``JITGUARD_VERIFY=1``) every capture also builds torch's
# complete guard tree (every guard kept), and:
#   * each call an entry serves is checked against that entry's tree before its program
#     runs: jitguard accepted, so torch must accept too;
#   * each miss first asks every existing entry's tree: jitguard rejected them all, so
#     torch must reject them all too, unless jitguard's only failing guard is its own
#     GLOBAL_STATE (stricter than torch on purpose, [Note: jitguard.torch.compile on
#     Dynamo]).
# A disagreement raises ``GuardMismatchError`` with jitguard's explanation (the failing
# guards of its reference evaluator) and torch's (``check_verbose``'s failing parts).
# This doubles the check cost: it is for tests (tests/torch/conftest.py turns it on).
#
# [Note: Compiling a module]
# A module is compiled as ``type(m).forward`` with the module first
# ([Note: jitguard.torch.compile on Dynamo]), so what ``Module.__call__`` adds around
# ``forward`` is checked on each call before the cache is asked: when the module has hooks
# of its own or global module hooks are registered, or ``forward`` was set on the instance,
# the call goes to a second compiled wrapper (made on first need) that captures the module
# call itself, hooks included ([Note: Compiling a module's call]); when the class's
# ``forward`` was replaced after compiling, the new function gets a compiled wrapper of its
# own (made once per function), hooks or not: each module call's cache watches the code of
# its own ``forward``. A class ``__call__`` other than ``nn.Module``'s (defined by the
# module's class or a base, or set after compiling) also takes the module-call path:
# ``m(...)`` runs it, and ``forward`` alone would skip it.
#
# An object with a Python ``__call__`` is compiled as its class's ``__call__`` of the
# time; each call compares ``type(obj).__call__`` with it (``Foo.__call__ = g`` or a swapped
# ``__class__`` after compiling): another function gets a compiled wrapper of its own.
#
# A function's ``__code__`` is compared (by identity) on each call by the cache's
# dispatcher ([Note: A replaced __code__]; a module call's cache watches ``forward``):
# replaced, the entries (captures of the old code) are dropped and the new code is
# captured, at every compile stance (the first capture of the new code is no recompile).
#
# [Note: torch's tools]
# A compiled wrapper carries torch's marks of a compiled function
# (``adapter_runtime.mark_for_torch_tools``): ``torch._dynamo.explain(cf)`` and
# ``torch.compile(cf)`` work on the user's function or module itself, and a torch.compile'd
# function that calls ``cf`` inlines the user's function into its own graph, as it inlines
# a nested ``torch.compile`` wrapper: Dynamo never traces jitguard's dispatcher (it did,
# and failed on a dict it took for an FX node). A plain call is untouched: jitguard's cache
# serves it. Each capture runs under a torch compile id made of the entry's own
# (``adapter.capture(compile_id=)``) and a function's frame id comes from torch's frame
# counter (``adapter.new_frame_id``), so under ``TORCH_TRACE`` torch's records of a
# capture (its graph, its sources) and jitguard's (guards, metrics) of every recompile of
# one function sit under one frame id, apart from torch's own frames; the frame path's
# pieces keep the ids torch gives them. With a structured trace on, each capture's graph
# is written as torch's ``dynamo_output_graph`` record (its sizes, the readable graph), so
# tlparse shows it in a ``JITGUARD_TRACE`` too (under ``TORCH_TRACE`` torch writes that
# record itself, and jitguard writes it only to its own sinks).
#
# [Note: Compile stances]
# ``torch.compiler.set_stance`` is read on every call (one attribute read): "force_eager"
# runs the original; "eager_on_recompile" serves existing entries and runs eagerly where
# it would recompile; "fail_on_recompile" raises ``RecompileError`` (a RuntimeError) where
# it would recompile; any other stance compiles as usual.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Optional

import torch

from ..cache.reasons import collect_failures
from ..errors import GuardMismatchError
from . import adapter, adapter_runtime

__all__ = ["FRAME_PATH", "RUNS_EAGERLY", "CompiledFunction", "EntryInfo", "Piece",
           "mark_for_torch_tools"]

#: [Note: torch's tools]
mark_for_torch_tools = adapter_runtime.mark_for_torch_tools

#: ``EntryInfo.guard_layer`` of an entry whose calls Dynamo's own frame path serves
#: ([Note: Graph breaks])
FRAME_PATH = "torch (Dynamo's frame path)"
#: ``EntryInfo.guard_layer`` of an entry that runs the function eagerly
RUNS_EAGERLY = "none (runs eagerly)"


class Piece:
    """One graph torch's frame path compiled for a function jitguard could not capture as
    one graph ([Note: Graph breaks]): torch's compile id (``"0/1"``; the frame and that
    frame's compile) and the graph. torch's guards pick it; jitguard checks none of them."""

    __slots__ = ("compile_id", "graph_module")

    def __init__(self, compile_id: Optional[str], graph_module: Any) -> None:
        self.compile_id = compile_id
        self.graph_module = graph_module

    guard_layer = FRAME_PATH

    def __repr__(self) -> str:
        return f"<Piece {self.compile_id}: torch's guards>"


class EntryInfo:
    """One entry of ``jitguard.torch.compile``: its capture (None when the capture failed:
    ``failure`` says why, and the entry runs under Dynamo's frame path, its graphs in
    ``pieces``, or eagerly), the guards delegated to torch per kind, torch's trees for it,
    and which guard layer serves it and why (``guard_layer``, ``why``)."""

    def __init__(self, compile_id: Any, cap: Optional[adapter.Captured],
                 params: tuple[str, ...], failure: Optional[str] = None, *,
                 layer: Optional[str] = None, why: str = "",
                 pieces: Optional[list[Piece]] = None) -> None:
        self.compile_id = compile_id
        self.cap = cap
        self.params = params
        self.failure = failure
        self._layer = layer
        self._why = why
        #: the graphs torch's frame path made for this entry's calls (FRAME_PATH only)
        self.pieces: list[Piece] = pieces if pieces is not None else []
        self.delegated: Counter[str] = Counter()
        self.converted: Counter[str] = Counter()
        self.stricter: list[str] = []  # guards jitguard checks more strictly than torch
        self.unconverted: list[str] = []  # why each delegated guard was not converted
        self.full_tree = cap.full_tree if cap is not None else None
        self._guard_types: Counter[str] = Counter(
            e.guard_type for e in (cap.entries if cap is not None else ()))

    @property
    def guard_layer(self) -> str:
        """Which guards decide the calls this entry serves: "jitguard" (every guard Dynamo
        made is in jitguard's generated check), "jitguard + torch's guard tree" (some are
        delegated), ``FRAME_PATH`` (torch's guards, jitguard's entry has none) or
        ``RUNS_EAGERLY``."""
        if self._layer is not None:
            return self._layer
        return "jitguard + torch's guard tree" if self.delegated else "jitguard"

    @property
    def why(self) -> str:
        """Why that layer serves this entry, in a sentence."""
        if self._why:
            return self._why
        if self.delegated:
            return (f"one graph; jitguard checks its converted guards and hands "
                    f"{sum(self.delegated.values())} it cannot convert to torch's guard tree "
                    f"(one TORCH_GUARD_TREE check)")
        return "one graph; jitguard checks every guard Dynamo made"

    def __repr__(self) -> str:
        if self.failure is not None:
            head = f"capture failed: {self.failure}"
        else:
            head = f"guards: {self.guard_layer}"
            if self.converted:
                head += f", {sum(self.converted.values())} converted"
            if self.delegated:
                kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.delegated.items()))
                head += f", {sum(self.delegated.values())} delegated ({kinds})"
        return f"<EntryInfo {self.compile_id} {head}>"

    def forget_entries(self) -> None:
        """Drop Dynamo's guard entries (they hold the example values: keeping them would
        keep the call's tensors alive)."""
        if self.cap is not None:
            self.cap.entries = []

    @property
    def graph_module(self) -> Any:
        return None if self.cap is None else self.cap.graph_module

    @property
    def dynamic(self) -> bool:
        """Whether the captured graph takes a symbolic size or int."""
        return self.cap is not None and adapter_runtime.graph_is_dynamic(self.cap.graph_module)

    def guard_types(self) -> Counter[str]:
        """Every guard Dynamo made for this entry, counted per kind."""
        return Counter(self._guard_types)

    def _locals(self, values: Sequence[Any]) -> dict[str, Any]:
        assert self.cap is not None
        return adapter_runtime.frame_locals(self.cap.freevars, self.cap.closure, self.params,
                                            values)

    def tree_accepts(self, *values: Any) -> bool:
        assert self.cap is not None and self.cap.tree is not None
        return adapter_runtime.tree_check(self.cap.tree, self._locals(values))

    def tree_explain(self, *values: Any) -> list[str]:
        assert self.cap is not None and self.cap.tree is not None
        return adapter_runtime.check_verbose(self.cap.tree, self._locals(values))

    def torch_accepts(self, values: Sequence[Any]) -> bool:
        return adapter_runtime.tree_check(self.full_tree, self._locals(values))

    def torch_reasons(self, values: Sequence[Any]) -> list[str]:
        return adapter_runtime.check_verbose(self.full_tree, self._locals(values))

    @staticmethod
    def jitguard_reasons(entry: Any, values: Sequence[Any]) -> list[str]:
        return collect_failures([entry], tuple(values))[0].lines()

    def verified(self, where: str, bind: Callable[..., tuple[Any, ...]]) -> Callable[..., Any]:
        """The program, checked first against torch's complete tree ([Note: Verify mode])."""
        assert self.cap is not None
        program = self.cap.fn

        def verified(*args: Any, **kwargs: Any) -> Any:
            values = bind(*args, **kwargs)
            if not self.torch_accepts(values):
                raise GuardMismatchError(
                    f"{where}: jitguard's check accepted entry {self.compile_id} but torch's "
                    f"guard tree for the same capture rejects the call.\n"
                    f"  jitguard: accepts\n"
                    f"  torch: {'; '.join(self.torch_reasons(values))}"
                )
            return program(*args, **kwargs)

        return verified


class CompiledFunction:
    """Builds the callable ``jitguard.torch.compile`` returns ([Note: Compile stances])."""

    @staticmethod
    def make(original: Any, fn: Callable[..., Any], first: Any, cache: Any,
             no_recompiles: Callable[[], Any],
             remake: Optional[Callable[[], Callable[..., Any]]] = None,
             hooked: Optional[Callable[[], Callable[..., Any]]] = None, *,
             plain: bool = False) -> Callable[..., Any]:
        """The compiled callable. For a module (unless ``plain``: ``fn`` is called with it
        first, nothing more), ``remake()`` compiles a replaced class ``forward`` and
        ``hooked()`` the module call itself ([Note: Compiling a module])."""
        dispatch = cache.function
        stance = adapter.stance

        def stanced(values: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            mode = stance()
            if mode == "force_eager":
                return fn(*values, **kwargs)
            if mode == "eager_on_recompile":
                # a replaced __code__ starts the cache over: its first capture is no recompile
                if (cache.lookup(*values, **kwargs) is None and cache.entries()
                        and not cache._code_replaced()):
                    return fn(*values, **kwargs)
            elif mode == "fail_on_recompile":
                with no_recompiles():
                    return dispatch(*values, **kwargs)
            return dispatch(*values, **kwargs)

        if first is None:
            def compiled(*args: Any, **kwargs: Any) -> Any:
                if stance() == "default":
                    return dispatch(*args, **kwargs)
                return stanced(args, kwargs)
        elif isinstance(first, torch.nn.Module) and original is first and not plain:
            # the module itself (a bound method of a module is compiled as any method)
            module, hooks = first, adapter_runtime.module_call_hooks()
            plain_call = torch.nn.Module.__call__
            others: dict[Any, Callable[..., Any]] = {}
            whole: list[Callable[..., Any]] = []

            def module_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
                """[Note: Compiling a module]: what the fast path does not serve."""
                if stance() == "force_eager":
                    return module(*args, **kwargs)
                now = type(module).forward
                if (
                    type(module).__call__ is not plain_call
                    or "forward" in module.__dict__ or module._forward_hooks
                    or module._forward_pre_hooks or module._backward_hooks
                    or module._backward_pre_hooks or any(hooks)
                ) and (now is fn or remake is None):
                    # the module call's cache watches ``fn``'s code: a replaced class
                    # forward goes to the wrapper made for it (below), which watches its own
                    if not whole and hooked is not None:
                        whole.append(hooked())
                    return whole[0](*args, **kwargs) if whole else module(*args, **kwargs)
                if now is fn:
                    return stanced((module, *args), kwargs)
                other = others.get(now)
                if other is None and remake is not None:
                    other = others[now] = remake()
                return other(*args, **kwargs) if other is not None else module(*args, **kwargs)

            def compiled(*args: Any, **kwargs: Any) -> Any:
                m = module
                if (
                    type(m).forward is fn and type(m).__call__ is plain_call
                    and stance() == "default"
                    and not (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                             or m._backward_pre_hooks or "forward" in m.__dict__)
                    and not any(hooks)
                ):
                    return dispatch(m, *args, **kwargs)
                return module_call(args, kwargs)
        elif remake is not None:
            # an object with a Python __call__: a call runs its class's __call__ of now
            obj = first
            calls: dict[Any, Callable[..., Any]] = {}

            def other_call(now: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
                other = calls.get(now)
                if other is None:
                    try:
                        other = calls[now] = remake()
                    except TypeError:  # no Python __call__ any more: as eager
                        return obj(*args, **kwargs)
                return other(*args, **kwargs)

            def compiled(*args: Any, **kwargs: Any) -> Any:
                now = type(obj).__call__
                if now is not fn:
                    return other_call(now, args, kwargs)
                if stance() == "default":
                    return dispatch(obj, *args, **kwargs)
                return stanced((obj, *args), kwargs)
        else:
            def compiled(*args: Any, **kwargs: Any) -> Any:
                if stance() == "default":
                    return dispatch(first, *args, **kwargs)
                return stanced((first, *args), kwargs)

        # the signature users see: the function's, or the bound forward's / method's
        wrapped = original if first is None else functools.partial(fn, first)
        functools.update_wrapper(compiled, fn)
        compiled.__wrapped__ = wrapped  # type: ignore[attr-defined]
        compiled._orig_mod = original  # type: ignore[attr-defined]
        compiled.cache = cache  # type: ignore[attr-defined]
        compiled.compiler = cache.compiler  # type: ignore[attr-defined]
        adapter_runtime.mark_for_torch_tools(compiled, original, original)
        return compiled
