"""The globals a trace bakes in: which module dict the compiled code reads, which code of it
ran while tracing, and the guards for what that code named.

May import: jitguard._src._util, jitguard._src.guards, jitguard._src.sources, jitguard._src.compiler.builder,
jitguard._src.cache.request, torch.

# [Note: Globals read by helpers]
# A trace bakes in every global that the code it runs reads: the function's own, and those
# of the helpers it calls and of the ``forward`` methods of its modules. The *root* is the
# module dict of the compiled function (``inspect.unwrap``-ed through decorators), or of the
# function that is a compiled module's class's ``forward``, with a source for one of its
# names that the entry can evaluate (``G['X']``, ``L[...].__wrapped__.__globals__['X']``,
# ``type(L[...]).forward.__globals__['X']``).
#   * Before the trace, the globals the root function's own code names are guarded as
#     arguments would be, and every global of the root that some function or class of that
#     module names and whose attribute reads can be watched (a plain object, an nn.Module)
#     is watched ([Note: Watching attribute reads]): a helper may read its attributes.
#   * While tracing, a profile function records each Python function that starts running
#     with the root as its globals.
#   * After the trace, the globals named by each recorded code object and by the root
#     function (a global it created while tracing counts too) are guarded, and so are the
#     attributes read off a user module or class held by such a global (``cfgmod.SCALE``,
#     ``Config.SCALE``: a ``LOAD_GLOBAL`` followed by an attribute load, guarded as
#     ``G['cfgmod'].SCALE``; of a class, only constants).
#   * Helpers of other user modules are covered the same way when a global of the root leads
#     to their module: a function imported from there (``G['helper'].__globals__['X']``) or
#     the module itself (``G['othermod'].X``); that global is then guarded too.
# Not covered: modules reached no such way (a helper two imports away), the standard
# library, torch and jitguard (their globals are not guarded), and attributes deeper than
# one level of a module global (``cfgmod.sub.X``); nothing is recorded while a profile
# function that cannot be chained (a C profiler such as cProfile) is active, and
# ``codes_run_with`` says so at info level.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import inspect
import logging
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, Optional

import torch

from .._util import SCALAR_TYPES, is_scalar_type
from ..cache.request import CompileRequest
from ..compiler.builder import GuardBuilder
from ..guards import Source
from ..sources import AttrSource, GetItemSource, GlobalSource

__all__ = [
    "GlobalsRoot",
    "HelperGlobals",
    "codes_run_with",
    "guard_baked",
    "plain_object",
    "unwrap",
    "watchable",
]

log = logging.getLogger("jitguard.torch")

# Modules whose attributes are not guarded when a traced function reads them off a global.
_LIBRARY_ROOTS = frozenset(sys.stdlib_module_names) | {"torch", "jitguard", "builtins"}


def _is_library(module_name: Any) -> bool:
    """A module of the standard library, torch or jitguard (or no module name at all)."""
    return not isinstance(module_name, str) or module_name.partition(".")[0] in _LIBRARY_ROOTS


def plain_object(v: Any) -> bool:
    """An instance of a user class, whose attributes a function may read (not a module,
    class, function or other callable, tensor or constant)."""
    return (
        not isinstance(v, (torch.Tensor, type, types.ModuleType, *SCALAR_TYPES))
        and not callable(v)
        and type(v).__module__ != "builtins"
        and isinstance(getattr(v, "__dict__", None), dict)
    )


def watchable(v: Any) -> bool:
    return isinstance(v, torch.nn.Module) or plain_object(v)


def guard_baked(request: CompileRequest, source: Source, value: Any) -> None:
    """Guard a value the trace baked in (an attribute or global it read) by the cache's
    argument rules, as if it were an argument; a tensor, which the graph holds by
    reference, by identity too."""
    request.arg_context.visit(source, value)
    if isinstance(value, torch.Tensor):
        request.add_guard(source, GuardBuilder.ID_MATCH)


def unwrap(fn: Any, src: Source) -> list[tuple[Any, Source]]:
    """``fn`` and each function it wraps (``__wrapped__``, as ``functools.wraps`` sets it),
    outermost first, each with its source."""
    chain = [(fn, src)]
    seen = {id(fn)}
    while len(chain) < 64:
        inner = _wrapped(chain[-1][0])
        if inner is None or id(inner) in seen:
            break
        seen.add(id(inner))
        chain.append((inner, AttrSource(chain[-1][1], "__wrapped__")))
    return chain


def _wrapped(obj: Any) -> Any:
    """``obj.__wrapped__`` where ``functools.wraps`` put it (the instance dict of a
    function or other callable), else None: never through a ``__getattr__`` hook, which may
    raise or make up a value."""
    d = getattr(obj, "__dict__", None) if isinstance(obj, types.FunctionType) else None
    if d is None:
        try:
            d = object.__getattribute__(obj, "__dict__")
        except Exception:
            return None
    return d.get("__wrapped__") if isinstance(d, dict) else None


class GlobalsRoot(NamedTuple):
    """The module dict whose globals a trace's code reads, the source of one of its names,
    and the root function's code."""

    fglobals: dict[str, Any]
    source_of: Callable[[str], Source]
    code: Optional[types.CodeType]

    @staticmethod
    def of_function(fn: Any, src: Optional[Source]) -> Optional[GlobalsRoot]:
        """The root of ``fn`` (unwrapped); ``src`` None means ``fn`` is the specialized
        function itself, whose globals are ``G[...]``."""
        if src is None:
            inner = unwrap(fn, GlobalSource("_"))[-1][0]
            fglobals = getattr(inner, "__globals__", None)
            if not isinstance(fglobals, dict):
                return None
            return GlobalsRoot(fglobals, GlobalSource, getattr(inner, "__code__", None))
        inner, inner_src = unwrap(fn, src)[-1]
        if not isinstance(inner, types.FunctionType):
            return None
        globals_src = AttrSource(inner_src, "__globals__")
        return GlobalsRoot(inner.__globals__, lambda name: GetItemSource(globals_src, name),
                           inner.__code__)

    def names(self, code: Optional[types.CodeType]) -> list[str]:
        """The globals of the root that ``code`` names (a global that shadows a builtin is
        what the code reads, so it counts)."""
        if code is None:
            return []
        return [n for n in code.co_names if n in self.fglobals]

    def guard_named(self, request: CompileRequest, names: list[str], done: set[str]) -> None:
        for name in names:
            if name not in done:
                done.add(name)
                guard_baked(request, self.source_of(name), self.fglobals[name])

    def before_trace(
        self, request: CompileRequest, done: set[str]
    ) -> tuple[list[tuple[Source, Any]], dict[Source, str]]:
        """Guard the globals the root function names; return the objects to watch: those,
        and (speculatively, source -> name) the watchable globals some function or class
        of the module names."""
        names = self.names(self.code)
        self.guard_named(request, names, done)
        watch = [(self.source_of(n), self.fglobals[n]) for n in names
                 if watchable(self.fglobals[n])]
        speculative = self.speculative_watch(done)
        watch += [(source, self.fglobals[name]) for source, name in speculative.items()]
        return watch, speculative

    def speculative_watch(self, done: set[str]) -> dict[Source, str]:
        """The watchable globals (source -> name) that some function or class of the
        module names, but no guarded code did yet."""
        named = _module_code_names(self.fglobals)
        return {
            self.source_of(name): name for name, value in list(self.fglobals.items())
            if name in named and name not in done and watchable(value)
        }

    def reachable(self) -> dict[int, tuple[GlobalsRoot, str]]:
        """The other user modules' dicts that a global of this root leads to (a function's
        ``__globals__``, a module's ``__dict__``), by ``id``: each as a root of its own with
        sources through that global, and the global's name."""
        out: dict[int, tuple[GlobalsRoot, str]] = {}
        for name, value in list(self.fglobals.items()):
            src = self.source_of(name)
            source_of: Callable[[str], Source]
            if isinstance(value, types.ModuleType):
                d = value.__dict__
                source_of = functools.partial(AttrSource, src)
            else:
                inner, inner_src = unwrap(value, src)[-1]
                if not isinstance(inner, types.FunctionType):
                    continue
                d = inner.__globals__
                source_of = functools.partial(GetItemSource, AttrSource(inner_src, "__globals__"))
            if d is self.fglobals or id(d) in out or _is_library(d.get("__name__")):
                continue
            out[id(d)] = (GlobalsRoot(d, source_of, None), name)
        return out

    def guard_after_trace(
        self, request: CompileRequest, codes: set[types.CodeType], done: set[str]
    ) -> None:
        """[Note: Globals read by helpers]: guard what the recorded code and the root
        function named, and the attributes they read off user-module globals."""
        ran = sorted(codes, key=lambda c: (c.co_filename, c.co_firstlineno, c.co_name))
        if self.code is not None and self.code not in codes:
            ran.insert(0, self.code)  # its globals created while tracing count too
        for code in ran:
            self.guard_named(request, self.names(code), done)
        for code in ran:
            for name, attr in _module_attribute_loads(code, self.fglobals):
                key = f"{name}.{attr}"
                if key not in done:
                    done.add(key)
                    value = vars(self.fglobals[name]).get(attr) if isinstance(
                        self.fglobals[name], types.ModuleType) else inspect.getattr_static(
                        self.fglobals[name], attr)
                    guard_baked(request, AttrSource(self.source_of(name), attr), value)


class HelperGlobals:
    """The module dicts a trace's helpers may read globals of (the root, and those its
    globals lead to, ``GlobalsRoot.reachable``), with per dict the names guarded so far and
    the globals watched in case code reads them ([Note: Globals read by helpers])."""

    def __init__(
        self, root: Optional[GlobalsRoot], done: set[str], speculative: dict[Source, str]
    ) -> None:
        self.root = root
        self.others = root.reachable() if root is not None else {}
        self.done: dict[int, set[str]] = {}
        self.hoped: dict[int, dict[Source, str]] = {}
        if root is not None:
            self.done[id(root.fglobals)], self.hoped[id(root.fglobals)] = done, speculative
        for key, (other, _) in self.others.items():
            self.done[key], self.hoped[key] = set(), other.speculative_watch(set())

    def watch(self) -> list[tuple[Source, Any]]:
        """The other modules' globals to watch (the root's were returned with it)."""
        return [(source, other.fglobals[name]) for key, (other, _) in self.others.items()
                for source, name in self.hoped[key].items()]

    def dicts(self) -> list[dict[str, Any]]:
        roots = [self.root] if self.root is not None else []
        return [r.fglobals for r in (*roots, *(o for o, _ in self.others.values()))]

    def after_trace(
        self, request: CompileRequest, codes: Optional[dict[int, set[types.CodeType]]]
    ) -> None:
        """Guard what the code that ran named (``codes`` from ``codes_run_with``); a module
        reached through a global guards that global too."""
        root = self.root
        if root is None or codes is None:
            return
        done = self.done[id(root.fglobals)]
        root.guard_after_trace(request, codes[id(root.fglobals)], done)
        for key, (other, via) in self.others.items():
            if codes[key]:
                root.guard_named(request, [via], done)
                other.guard_after_trace(request, codes[key], self.done[key])

    def unread(self) -> set[Source]:
        """The watched globals no code named (left alone if their reads went unwatched)."""
        return {s for key, by in self.hoped.items() for s, n in by.items()
                if n not in self.done[key]}


def _module_code_names(fglobals: dict[str, Any]) -> set[str]:
    """``co_names`` of every code object of the functions and classes of a module."""
    modname = fglobals.get("__name__")
    names: set[str] = set()
    codes: set[types.CodeType] = set()

    def add_code(code: types.CodeType) -> None:
        if code in codes:
            return
        codes.add(code)
        names.update(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                add_code(const)

    def add_function(obj: Any) -> None:
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                add_function(f)
            return
        if not isinstance(obj, types.FunctionType):
            return  # other objects' attributes are not read here (a hook may raise)
        for fn, _ in unwrap(obj, GlobalSource("_")):
            if isinstance(fn, types.FunctionType) and fn.__globals__ is fglobals:
                add_code(fn.__code__)

    for value in list(fglobals.values()):
        if isinstance(value, type) and value.__module__ == modname:
            for member in list(vars(value).values()):
                add_function(member)
        else:
            add_function(value)
    return names


def _module_attribute_loads(
    code: types.CodeType, fglobals: dict[str, Any]
) -> list[tuple[str, str]]:
    """(global, attribute) for each ``LOAD_GLOBAL g`` directly followed by an attribute load
    of ``g``, where ``g`` holds a user module (not the standard library, torch or jitguard)
    that has that attribute, or a user class whose attribute is a constant."""
    out = []
    previous: Optional[str] = None
    for ins in dis.get_instructions(code):
        if previous is not None and ins.opname in ("LOAD_ATTR", "LOAD_METHOD"):
            holder = fglobals.get(previous)
            if isinstance(holder, types.ModuleType):
                user = not _is_library(holder.__name__) and ins.argval in holder.__dict__
            elif isinstance(holder, type):
                # a class attribute that is a constant (``Config.SCALE``)
                user = not _is_library(holder.__module__) and is_scalar_type(
                    type(inspect.getattr_static(holder, ins.argval, None)))
            else:
                user = False
            if user:
                out.append((previous, ins.argval))
        previous = ins.argval if ins.opname == "LOAD_GLOBAL" else None
    return out


@contextlib.contextmanager
def codes_run_with(
    *roots: dict[str, Any],
) -> Iterator[Optional[dict[int, set[types.CodeType]]]]:
    """Within the block, record on this thread the code of every Python function that
    starts running with one of ``roots`` as its globals; yields ``id(root) -> codes``, or
    None when another profile function is set and cannot be chained (nothing is recorded
    then)."""
    previous = sys.getprofile()
    if previous is not None and not callable(previous):
        log.info("a profiler is active: globals read by helpers of the traced function are "
                 "not guarded ([Note: Globals read by helpers])")
        yield None
        return
    seen: dict[int, set[types.CodeType]] = {id(r): set() for r in roots}
    lookup = seen.get

    def profile(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            codes = lookup(id(frame.f_globals))
            if codes is not None:
                codes.add(frame.f_code)
        if previous is not None:
            previous(frame, event, arg)  # type: ignore[arg-type]

    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(previous)
