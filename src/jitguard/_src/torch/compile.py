"""``jitguard.torch.compile``: TorchDynamo captures, jitguard guards.

May import: jitguard._src.* (the cache, the torch integration below it),
jitguard._src.torch.dynamo_cache and dynamo_scope (the cache machinery over Dynamo
captures, through which torch's internals are reached), torch's public API.

# [Note: jitguard.torch.compile on Dynamo]
# Each cache entry is one Dynamo full-graph capture of the function for the call that
# missed ([Note: Capturing with Dynamo]): the program (``Captured.fn``, the transformed
# bytecode calling the backend's compiled graph) is the entry's artifact, and the guards
# Dynamo made are the entry's guards. Every guard jitguard can convert
# (``convert.convert_guards``) becomes a jitguard guard in the entry's generated check;
# the rest stay in torch's guard tree and are checked through one TORCH_GUARD_TREE guard
# ([Note: Delegating to torch's guard tree]). The cache ([Note: The call path]) adds no
# guards of its own on arguments (its argument rules are off: a rule that guards nothing;
# no int automatic dynamic): what an entry assumes of them is what Dynamo guarded. Every
# entry checks GLOBAL_STATE over every registered torch state (one C++ group check; the
# conversion makes it from Dynamo's state guards, else the compiler adds it): Dynamo
# does not guard every state a graph bakes in (``torch.get_autocast_dtype("cpu")`` read
# in the function is baked in and unguarded in torch 2.13), so an entry also misses when
# any of them changed; the CPU and CUDA autocast dtypes count only while their autocast
# is on, unless the capture could have baked one in
# ([Note: Autocast dtypes a capture did not read]). Verify mode knows this guard is jitguard's own
# ([Note: Verify mode]). Dynamo decides which dims are dynamic (``mark_dynamic``, ``maybe_mark_dynamic``,
# ``mark_static``, ``dynamic=``, its automatic dynamic shapes keyed by code object, the
# ``torch._dynamo.config`` knobs), as ``torch.compile`` does.
#
# What is compiled: a function as itself; an ``nn.Module`` as ``type(m).forward`` with the
# module as first argument (sources read ``L['self']``), and, while it has hooks or an
# instance ``forward``, as the module call itself ([Note: Compiling a module's call]); a
# bound method as its ``__func__`` with ``__self__`` first; an object with a Python
# ``__call__`` likewise; a ``functools.partial`` as its ``func``, compiled as above, with
# ``p.args``/``p.keywords`` read on each call and passed as arguments (guarded as inputs,
# so changing ``p.keywords`` after compiling is a miss). Two wrappers of one function with the same
# options share one cache unless ``isolate_recompiles=True`` ([Note: Shared entries]).
#
# [Note: Compiling a module's call]
# ``type(m).forward`` alone is what a call of a module without hooks runs, and most calls
# take that path. While the module has hooks of its own (forward, pre-forward, backward),
# torch's global module hooks are registered, ``forward`` is set on the instance, or its
# class's ``__call__`` is not ``nn.Module``'s, a call
# is captured as ``m(*args, **kwargs)`` instead: one Python function per ``forward``
# (``_caller_of``) whose body is the module call, so Dynamo inlines ``Module.__call__``
# with the hooks and the instance ``forward``, as ``torch.compile(m)`` does. What makes
# that sound is Dynamo's guards on the call: the length of each hook dict and each hook's
# code (its closure where read), the instance ``forward``, the global hook dicts, plus
# jitguard's always-checked empty hook dicts. A hook added, removed or replaced after
# compiling fails one of them, so the call recompiles; with every hook gone the call is back
# on ``forward``'s entries. Dynamo puts no guard on the inlined ``forward``'s ``__code__``,
# so the caller's cache watches ``forward`` ([Note: A replaced __code__]; its store key
# covers ``forward``'s code too). Where Dynamo cannot capture the call (a backward hook it does
# not trace), the entry runs ``m(...)`` eagerly ([Note: Capture failures]), or, with
# ``fullgraph=True``, the call raises ``CaptureError``, as ``torch.compile`` does.
#
# [Note: Shared entries]
# ``torch.compile`` keeps entries on the code object, so two compiled wrappers of one
# function see each other's entries (and count towards one recompile limit). jitguard
# keeps the caches of a function in one ``Regions`` (a weak map keyed by the function
# object): one shared cache per option set (backend, fullgraph, dynamic, verify, limit,
# store), and one private cache per ``isolate_recompiles=True`` wrapper. As in torch 2.13:
#   * the recompile limit of a shared cache counts the compiles of every shared cache of
#     the function, whatever its backend (an entry serves only its own options, as torch's
#     serve only their backend); an isolated cache counts its own;
#   * ``accumulated_recompile_limit`` caps the entries of all of them together;
#   * an isolated cache that misses looks in the shared cache of its options before
#     compiling (reading it only: what it compiles stays its own), and its recompile
#     reasons name that cache's entries too.
# A hit of a shared entry through an isolated wrapper is a normal lookup of that entry
# (its own guards, nothing skipped), so no soundness is traded for the sharing.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import os
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any, Optional, ParamSpec, TypeVar, overload

import torch

from .. import env
from ..cache.specialize import FunctionCache
from ..cache.stance import no_recompiles
from ..store.tiers import StoreLike
from .compiled import CompiledFunction, mark_for_torch_tools
from .dynamo_cache import TorchCompiler
from .dynamo_scope import Regions, dynamo_cache

__all__ = ["TorchCompiler", "compile"]

_shared: weakref.WeakKeyDictionary[Any, Regions] = weakref.WeakKeyDictionary()
# Taken to add a function's Regions (two threads compiling one function at once made two,
# and the first one's caches were no longer shared); finding one takes no lock.
_shared_lock = threading.Lock()

def _target(obj: Any) -> tuple[types.FunctionType, Optional[Any]]:
    """The Python function to capture and the object passed as its first argument
    ([Note: jitguard.torch.compile on Dynamo])."""
    if isinstance(obj, torch.nn.Module):
        fwd = inspect.getattr_static(type(obj), "forward", None)
        if not isinstance(fwd, types.FunctionType):
            raise TypeError(f"cannot compile {type(obj).__qualname__}: its forward is not a Python function")
        return fwd, obj
    if isinstance(obj, types.MethodType) and isinstance(obj.__func__, types.FunctionType):
        return obj.__func__, obj.__self__
    if isinstance(obj, types.FunctionType):
        return obj, None
    call = inspect.getattr_static(type(obj), "__call__", None)
    if isinstance(call, types.FunctionType):
        return call, obj
    raise TypeError(
        f"jitguard.torch.compile compiles Python functions, nn.Modules, bound methods, "
        f"functools.partial objects of these and objects with a Python __call__; got {obj!r}"
    )


def _unwrapped(fn: Any) -> Any:
    """``fn`` below its ``functools.wraps`` wrappers (``fn`` itself when the chain is a loop
    or reading it raises)."""
    try:
        return inspect.unwrap(fn)
    except Exception:
        return fn


def _cache_for(fn: types.FunctionType, key: tuple[Any, ...], isolate: bool,
               make: Callable[[], FunctionCache]) -> FunctionCache:
    """[Note: Shared entries]: the map holds the function weakly and its caches weakly (the
    wrappers hold them), so a cache lives as long as one wrapper of it does."""
    regions = _shared.get(fn)
    if regions is None:
        with _shared_lock:
            regions = _shared.get(fn)
            if regions is None:
                regions = _shared[fn] = Regions()
    return regions.cache_for(key, isolate, make)


def _verify_default() -> bool:
    return env.flag("JITGUARD_VERIFY")


_P = ParamSpec("_P")
_R = TypeVar("_R")


@overload
def compile(
    model: Callable[_P, _R], *, fullgraph: bool = ..., dynamic: Optional[bool] = ...,
    backend: Any = ..., mode: Optional[str] = ..., options: Optional[dict[str, Any]] = ...,
    name: Optional[str] = ..., disable: bool = ..., recompile_limit: Optional[int] = ...,
    isolate_recompiles: bool = ..., shapes_spec: Any = ..., verify: Optional[bool] = ...,
    store: StoreLike = ...,
) -> Callable[_P, _R]: ...


@overload
def compile(
    model: None = None, *, fullgraph: bool = ..., dynamic: Optional[bool] = ...,
    backend: Any = ..., mode: Optional[str] = ..., options: Optional[dict[str, Any]] = ...,
    name: Optional[str] = ..., disable: bool = ..., recompile_limit: Optional[int] = ...,
    isolate_recompiles: bool = ..., shapes_spec: Any = ..., verify: Optional[bool] = ...,
    store: StoreLike = ...,
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]: ...


def compile(
    model: Any = None,
    *,
    fullgraph: bool = False,
    dynamic: Optional[bool] = None,
    backend: Any = "eager",
    mode: Optional[str] = None,
    options: Optional[dict[str, Any]] = None,
    name: Optional[str] = None,
    disable: bool = False,
    recompile_limit: Optional[int] = None,
    isolate_recompiles: bool = False,
    shapes_spec: Any = None,
    verify: Optional[bool] = None,
    store: StoreLike = None,
) -> Any:
    """Compile ``model`` with TorchDynamo's full-graph capture, jitguard checking the
    guards ([Note: jitguard.torch.compile on Dynamo]); ``torch.compile``'s parameters, with
    its meanings ([Note: torch.compile's parameters]). ``backend``: "eager" (default),
    "aot_eager", "inductor", any registered name, None (torch's default, inductor), or a
    callable ``(gm, example_inputs) -> callable`` as for ``torch.compile``; ``mode`` and
    ``options`` go to it as torch passes them (inductor's modes and config). A function that
    is not one graph gets the graphs ``torch.compile`` makes of it, torch's guards deciding
    ([Note: Graph breaks]); ``fullgraph=True``: a graph break raises ``CaptureError``
    instead. ``dynamic``: as ``torch.compile``. ``disable=True``: ``model`` itself.
    ``verify=True`` (or ``JITGUARD_VERIFY=1``): torch's own guard tree is evaluated beside
    jitguard's check on every call; a disagreement raises ``GuardMismatchError``.
    ``isolate_recompiles``: keep entries apart from other wrappers of the same function.
    ``recompile_limit``: None follows ``torch._dynamo.config.recompile_limit``. ``store``:
    keep entries across processes, as ``specialize(..., store=)`` takes it (a ``Store``, a
    directory, True for the default one, False for none; None: ``JITGUARD_STORE`` decides),
    each one torch's own serialization of its capture ([Note: Stored captures]). Usable as a
    decorator, with or without arguments."""
    opts: dict[str, Any] = dict(
        fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
        name=name, disable=disable, recompile_limit=recompile_limit,
        isolate_recompiles=isolate_recompiles, shapes_spec=shapes_spec, verify=verify,
        store=store,
    )
    if model is None:
        return functools.partial(_compile_decorated, opts)
    return _compile(model, **opts)


def _compile_decorated(opts: dict[str, Any], model: Any) -> Any:
    if model is None:
        raise TypeError("jitguard.torch.compile: the decorated object is None")
    return _compile(model, **opts)


# [Note: torch.compile's parameters]
# ``jitguard.torch.compile`` takes every parameter of ``torch.compile`` (2.13), by the same
# name and kind (tests/torch/test_compile_signature.py compares the two signatures), plus
# ``verify`` and ``store``. ``backend``, ``mode``, ``options``, ``name`` and ``dynamic``
# become the callable torch.compile would hand Dynamo (``TorchCompiler`` makes it with
# ``adapter.torch_backend``: torch's
# inductor wrapper for "inductor", its generic wrapper otherwise, so ``mode=`` reaches
# inductor and ``options=`` becomes inductor's config); mode and options together raise
# as in torch. The default backend stays "eager" (jitguard's, documented), ``backend=None``
# is torch's default. ``disable=True`` returns ``model`` itself, as torch does.
# ``recompile_limit`` and ``isolate_recompiles`` are jitguard's ([Note: Shared entries]),
# with torch's meanings, and go to the frame path ([Note: Graph breaks]) too. What has no
# meaning here raises ``TypeError`` saying what to do instead: ``shapes_spec`` (jitguard
# captures through Dynamo's full-graph capture, which takes no shape spec: mark dims with
# ``torch._dynamo.mark_dynamic``), ``options={"guard_filter_fn": ...}`` (jitguard keeps
# every guard Dynamo makes; dropping some would be unsound) and
# ``options={"use_aoti": True}`` (AOTInductor packages are not entries).
_NO_MEANING_OPTIONS = {
    "guard_filter_fn": "jitguard keeps every guard Dynamo makes (dropping guards is what "
                       "guard_filter_fn is for, and would make entries unsound); use "
                       "torch.compile to filter guards",
    "use_aoti": "AOTInductor's packages are not jitguard entries; use torch.compile or "
                "torch._inductor.aoti_compile_and_package",
}


def _compile(
    model: Any, *, fullgraph: bool, dynamic: Optional[bool], backend: Any, mode: Optional[str],
    options: Optional[dict[str, Any]], name: Optional[str], disable: bool,
    recompile_limit: Optional[int], isolate_recompiles: bool, shapes_spec: Any,
    verify: Optional[bool], store: StoreLike,
) -> Any:
    """``compile`` once its options are read ([Note: torch.compile's parameters]).

    Over 80 lines: the options checked, then each kind of target (function, method, object,
    module) in turn."""
    opts: dict[str, Any] = dict(
        fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
        name=name, disable=disable, recompile_limit=recompile_limit,
        isolate_recompiles=isolate_recompiles, shapes_spec=shapes_spec, verify=verify,
        store=store,
    )
    if disable:
        return model
    if shapes_spec is not None:
        raise TypeError(
            "jitguard.torch.compile does not take shapes_spec: it captures with Dynamo's "
            "full-graph capture, which takes no shape spec. Mark dynamic dims with "
            "torch._dynamo.mark_dynamic(x, dim) or pass dynamic=True")
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time (as torch.compile)")
    if options is not None:
        if not isinstance(options, dict):
            raise TypeError(f"options must be a dict of inductor config, got {options!r}")
        for option, why in _NO_MEANING_OPTIONS.items():
            if option in options:
                raise TypeError(f"jitguard.torch.compile does not take options[{option!r}]: {why}")
    if dynamic not in (None, True, False):
        raise ValueError(f"dynamic must be None, True or False, got {dynamic!r}")
    if recompile_limit is not None and (not isinstance(recompile_limit, int) or recompile_limit < 1):
        raise ValueError(f"recompile_limit must be None or an int >= 1, got {recompile_limit!r}")
    if verify is None:
        verify = opts["verify"] = _verify_default()
    if isinstance(model, functools.partial):
        inner = _compile(model.func, **opts)
        return _partial_of(model, inner)
    fn, first = _target(model)
    backend_key = backend if isinstance(backend, str) else id(backend)
    store_key = store if isinstance(store, (bool, str, type(None))) else (
        os.fspath(store) if isinstance(store, os.PathLike) else id(store))
    options_key = None if options is None else tuple(
        sorted((str(k), repr(v)) for k, v in options.items()))
    key = (backend_key, mode, options_key, name, fullgraph, dynamic, bool(verify),
           recompile_limit, store_key)

    def cache_for(target: types.FunctionType, where: str,
                  watch: Optional[types.FunctionType] = None) -> FunctionCache:
        def make() -> FunctionCache:
            compiler = TorchCompiler(backend=backend, fullgraph=fullgraph, dynamic=dynamic,
                                     verify=bool(verify), where=where,
                                     recompile_limit=recompile_limit, mode=mode,
                                     options=options, name=name)
            return dynamo_cache(target, compiler, recompile_limit, store, watch=watch,
                                where=where)

        return _cache_for(target, key, isolate_recompiles, make)

    # messages name the user's def, below decorators' wrappers (transformers wraps forward)
    code = getattr(_unwrapped(fn), "__code__", fn.__code__)
    cache = cache_for(fn, f"{fn.__qualname__} at {code.co_filename}:{code.co_firstlineno}")
    if not isinstance(model, torch.nn.Module):
        if first is None or isinstance(model, types.MethodType):
            return CompiledFunction.make(model, fn, first, cache, no_recompiles)
        obj = model

        def recompile_call() -> Any:
            """The object's class ``__call__`` was replaced (or its class swapped) after
            compiling: a wrapper of the object for the function it has now."""
            return _compile(obj, **opts)

        return CompiledFunction.make(obj, fn, first, cache, no_recompiles, recompile_call)
    module = model

    def remake() -> Any:
        return _compile(module, **opts)

    def hooked() -> Any:
        """[Note: Compiling a module's call]: ``m(...)`` itself, hooks included."""
        caller = _caller_of(fn)
        where = (f"{type(module).__qualname__}.__call__ (hooks or an instance forward) at "
                 f"{code.co_filename}:{code.co_firstlineno}")
        # forward's code is watched: Dynamo inlines it without a guard on its __code__
        return CompiledFunction.make(module, caller, module, cache_for(caller, where, fn),
                                     no_recompiles, plain=True)

    return CompiledFunction.make(module, fn, first, cache, no_recompiles, remake, hooked)


def _partial_of(p: functools.partial[Any], inner: Callable[..., Any]) -> Callable[..., Any]:
    """A compiled ``functools.partial``: its function compiled, its bound arguments read from
    ``p`` on each call and passed as arguments, so they are guarded like any input (a
    changed ``p.keywords`` entry is a miss, never a stale result)."""

    def compiled(*args: Any, **kwargs: Any) -> Any:
        return inner(*p.args, *args, **{**p.keywords, **kwargs})

    compiled.__wrapped__ = p  # type: ignore[attr-defined]
    compiled.__name__ = compiled.__qualname__ = getattr(inner, "__name__", "partial")
    compiled.__doc__ = getattr(p.func, "__doc__", None)
    compiled._orig_mod = p  # type: ignore[attr-defined]
    compiled.cache = inner.cache  # type: ignore[attr-defined]
    compiled.compiler = inner.compiler  # type: ignore[attr-defined]
    mark_for_torch_tools(compiled, p, p)
    return compiled


_callers: weakref.WeakKeyDictionary[Any, types.FunctionType] = weakref.WeakKeyDictionary()


def _call_module(self: Any, *args: Any, **kwargs: Any) -> Any:
    return self(*args, **kwargs)


def _caller_of(forward: types.FunctionType) -> types.FunctionType:
    """The function captured for a module call that ``forward`` alone does not serve: one
    per ``forward`` (its own code object, as Dynamo keys its automatic dynamic shapes by
    code; its own globals, where the captures install their graphs), made once."""
    caller = _callers.get(forward)
    if caller is None:
        name = f"{forward.__qualname__.rpartition('.')[0] or forward.__name__}.__call__"
        names: dict[str, Any] = {"co_name": "__call__"}
        if sys.version_info >= (3, 11):
            names["co_qualname"] = name
        code = _call_module.__code__.replace(**names)
        scope = {"__builtins__": builtins, "__name__": forward.__module__}
        caller = types.FunctionType(code, scope, "__call__")
        caller.__qualname__ = name
        _callers[forward] = caller
    return caller
