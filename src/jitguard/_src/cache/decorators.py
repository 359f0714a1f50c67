"""The typed face of ``specialize``: ``jitguard.specialize`` keeps the wrapped function's
signature for type checkers (``ParamSpec``, in ``typing`` from Python 3.10 on).

May import: every ``cache`` module.

``specialize`` is typed by two overloads (a function, or no function: the decorator form)
whose keyword options are the implementation's, one for one (tests/test_typing.py compares
them); ``cache_of`` finds the ``FunctionCache`` behind a specialized function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Optional, ParamSpec, TypeVar, Union, overload

from ..store.tiers import StoreLike
from .policy import ArgPolicy
from .reasons import HISTORY
from .request import CompileRequest, SourceLike
from .specialize import _UNSET, FunctionCache

__all__ = ["cache_of", "specialize"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
Compiler = Callable[[CompileRequest], Callable[..., Any]]


@overload
def specialize(
    fn: Callable[_P, _R], /, *, compiler: Optional[Compiler] = ...,
    recompile_limit: Optional[int] = ..., on_limit: str = ..., automatic_dynamic: bool = ...,
    static: Iterable[SourceLike] = ..., dynamic: Iterable[SourceLike] = ...,
    error_on_recompile: bool = ..., policy: Optional[ArgPolicy] = ..., global_state: bool = ...,
    max_restarts: int = ..., maxsize: Optional[int] = ..., history: int = ...,
    store: StoreLike = ...,
) -> Callable[_P, _R]: ...


@overload
def specialize(
    fn: None = None, /, *, compiler: Optional[Compiler] = ...,
    recompile_limit: Optional[int] = ..., on_limit: str = ..., automatic_dynamic: bool = ...,
    static: Iterable[SourceLike] = ..., dynamic: Iterable[SourceLike] = ...,
    error_on_recompile: bool = ..., policy: Optional[ArgPolicy] = ..., global_state: bool = ...,
    max_restarts: int = ..., maxsize: Optional[int] = ..., history: int = ...,
    store: StoreLike = ...,
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]: ...

def specialize(
    fn: Optional[Callable[..., Any]] = None,
    /,
    *,
    compiler: Optional[Compiler] = None,
    recompile_limit: Optional[int] = _UNSET,
    on_limit: str = "fallback",
    automatic_dynamic: bool = True,
    static: Iterable[SourceLike] = (),
    dynamic: Iterable[SourceLike] = (),
    error_on_recompile: bool = False,
    policy: Optional[ArgPolicy] = None,
    global_state: bool = True,
    max_restarts: int = 8,
    maxsize: Optional[int] = None,
    history: int = HISTORY,
    store: StoreLike = None,
) -> Any:
    """Specialize ``fn``: return a function with ``fn``'s signature that keeps compiled,
    guarded entries and calls the most specialized one whose guards hold, compiling a new
    one with ``compiler(request)`` on a miss. Usable as ``@specialize(compiler=...)``.

    ``compiler`` (default: the artifact is ``fn``) gets a ``CompileRequest`` and returns the
    artifact. ``recompile_limit``/``on_limit`` ("fallback" or "raise"): see
    [Note: Recompile limits]. ``static``/``dynamic``: parameter names (or sources under
    them) to guard by value / by type; ``automatic_dynamic``: see [Note: Automatic
    dynamic]. ``error_on_recompile``: every recompile raises ``RecompileError``.
    ``policy``: the argument rules (default: ``register_arg_rule``'s). ``global_state``:
    guard the registered global states. ``maxsize``: keep at most that many entries,
    evicting the least recently used (see [Note: maxsize]; ``recompile_limit`` then
    defaults to None, no limit; both None: an unbounded cache). ``history``: how many
    recompile records to keep (the last ones; every one is counted). ``store``: keep the
    entries across processes (True: the default ``Store``; a directory; a ``Store``; False:
    never; None: as ``JITGUARD_STORE`` says), see [Note: Persistent entries]. The returned
    function's ``cache`` attribute is its ``FunctionCache``.

    A ``staticmethod`` or ``classmethod`` gives the same kind of descriptor around the
    specialized function, so ``@specialize`` may sit above either in a class body. A
    function defined in a class body is a method: its first parameter (``self``) is guarded
    by type, not identity ([Note: Argument rules]).
    """
    options: dict[str, Any] = dict(
        compiler=compiler, recompile_limit=recompile_limit, on_limit=on_limit,
        automatic_dynamic=automatic_dynamic, static=static, dynamic=dynamic,
        error_on_recompile=error_on_recompile, policy=policy, global_state=global_state,
        max_restarts=max_restarts, maxsize=maxsize, history=history, store=store,
    )
    if fn is None:
        return lambda f: _specialize(f, options)
    return _specialize(fn, options)


def _specialize(fn: Any, options: dict[str, Any]) -> Any:
    if type(fn) is staticmethod:
        cache = FunctionCache(fn.__func__, **options)
        cache.signature.receiver = None  # a static method receives no instance
        return staticmethod(cache.function)
    if type(fn) is classmethod:
        return classmethod(FunctionCache(fn.__func__, **options).function)
    return FunctionCache(fn, **options).function


def cache_of(specialized: Union[Callable[..., Any], Any]) -> FunctionCache[..., Any]:
    """The ``FunctionCache`` behind a function returned by ``specialize`` (also through a
    bound method)."""
    if type(specialized) is staticmethod or type(specialized) is classmethod:  # a class __dict__
        specialized = specialized.__func__
    cache = getattr(specialized, "cache", None)
    if not isinstance(cache, FunctionCache):
        raise TypeError(f"{specialized!r} is not a function returned by jitguard.specialize")
    return cache
