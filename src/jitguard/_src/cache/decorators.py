"""The typed face of ``specialize``: ``jitguard.specialize`` keeps the wrapped function's
signature for type checkers (``ParamSpec``, in ``typing`` from Python 3.10 on).

May import: store.tiers, every ``cache`` module.

``specialize`` is typed by two overloads (a function, or no function: the decorator form)
whose keyword options are the implementation's, one for one (tests/test_typing.py compares
them); ``cache_of`` finds the ``FunctionCache`` behind a specialized function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, Optional, ParamSpec, TypeVar, Union, overload

from ..store.tiers import StoreLike
from .policy import ArgPolicy
from .reasons import HISTORY
from .request import CompileRequest, SourceLike
from .specialize import _UNSET, FunctionCache

__all__ = ["cache_of", "specialize"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
Compiler = Callable[[CompileRequest], Callable[..., Any]]
PolicyLike = Union[ArgPolicy, Literal["values", "types", "triton"], None]


@overload
def specialize(
    fn: Callable[_P, _R], /, *, compiler: Optional[Compiler] = ...,
    recompile_limit: Optional[int] = ..., on_limit: str = ..., automatic_dynamic: bool = ...,
    static: Iterable[SourceLike] = ..., dynamic: Iterable[SourceLike] = ...,
    error_on_recompile: bool = ..., policy: PolicyLike = ..., global_state: Optional[bool] = ...,
    max_restarts: int = ..., maxsize: Optional[int] = ..., history: int = ...,
    store: StoreLike = ..., fallback: Optional[Callable[..., Any]] = ...,
) -> Callable[_P, _R]: ...


@overload
def specialize(
    fn: None = None, /, *, compiler: Optional[Compiler] = ...,
    recompile_limit: Optional[int] = ..., on_limit: str = ..., automatic_dynamic: bool = ...,
    static: Iterable[SourceLike] = ..., dynamic: Iterable[SourceLike] = ...,
    error_on_recompile: bool = ..., policy: PolicyLike = ..., global_state: Optional[bool] = ...,
    max_restarts: int = ..., maxsize: Optional[int] = ..., history: int = ...,
    store: StoreLike = ..., fallback: Optional[Callable[..., Any]] = ...,
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
    policy: PolicyLike = None,
    global_state: Optional[bool] = None,
    max_restarts: int = 8,
    maxsize: Optional[int] = None,
    history: int = HISTORY,
    store: StoreLike = None,
    fallback: Optional[Callable[..., Any]] = None,
) -> Any:
    """Specialize ``fn``: return a function with ``fn``'s signature that keeps compiled,
    guarded entries and calls the most specialized one whose guards hold, compiling a new
    one with ``compiler(request)`` on a miss. Usable as ``@specialize(compiler=...)``.

    ``compiler`` (default: the artifact is ``fn``) gets a ``CompileRequest`` and returns the
    artifact. ``recompile_limit``/``on_limit`` ("fallback" or "raise"): see
    [Note: Recompile limits]; ``fallback``: what a miss past the limit calls with
    ``on_limit="fallback"`` (default: ``fn`` uncompiled), announced once by a
    ``RecompileLimitWarning``. ``static``/``dynamic``: parameter names (or sources under
    them) to guard by value / by type; ``automatic_dynamic``: see [Note: Automatic
    dynamic]. ``error_on_recompile``: every recompile raises ``RecompileError``.
    ``policy``: the argument rules: ``"values"`` (the default: ``register_arg_rule``'s;
    scalars by value), ``"types"`` (scalars by type, arrays by ``ARRAY_MATCH``, as numba
    types arguments), ``"triton"`` (ints by ``INT_CLASS``, tensors and arrays by dtype and
    ``DATA_PTR_ALIGNED``, as Triton specializes a kernel; see [Note: Policy presets]) or an
    ``ArgPolicy``. ``global_state``:
    guard the registered global states: None (the default) the application's always and a
    library's (torch's) only where it is in play (a tensor or module among the arguments, or
    a compiler whose ``reads_global_states`` says so), True every one, False none (see
    [Note: Global states in play]). ``maxsize``: keep at most that many entries,
    evicting the least recently used (see [Note: maxsize]; ``recompile_limit`` then
    defaults to None, no limit; both None: an unbounded cache). ``history``: how many
    recompile records to keep (the last ones; every one is counted). ``store``: keep the
    entries across processes (True: the default ``Store``; a directory; a ``Store``; False:
    never; None: as ``JITGUARD_STORE`` says), see [Note: Persistent entries]. The returned
    function's ``cache`` attribute is its ``FunctionCache``.

    Policies, by example (``compile_add`` a compiler returning an artifact)::

        @specialize(compiler=compile_add)       # policy="values": scalars by value
        def add(x, y): ...
        add(1, 2); add(3, 4)                    # two entries: x == 1, y == 2; then x and
                                                # y changed, so automatic dynamic makes
                                                # them dynamic: type(x) is int, type(y) is int

        @specialize(compiler=compile_add, policy="types")
        def add(x, y): ...
        add(1, 2); add(3, 4)                    # one entry: type(x) is int, type(y) is int
        add(np.zeros(3), 1.0)                   # another: a float64 1-d C array, a float

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
        fallback=fallback,
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
