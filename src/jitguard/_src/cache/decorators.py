"""The typed face of ``specialize``: ``jitguard.specialize`` keeps the wrapped function's
signature for type checkers (``ParamSpec``, in ``typing`` from Python 3.10 on).

May import: every ``cache`` module.

The runtime work is ``cache.specialize.specialize``; this module only adds the overloads
(a function, or no function: the decorator form) and forwards. Its keyword options are the
runtime function's, one for one (tests/test_typing.py compares them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Optional, ParamSpec, TypeVar, overload

from . import specialize as _runtime
from .policy import ArgPolicy
from .request import CompileRequest, SourceLike

__all__ = ["specialize"]

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
) -> Callable[_P, _R]: ...


@overload
def specialize(
    fn: None = None, /, *, compiler: Optional[Compiler] = ...,
    recompile_limit: Optional[int] = ..., on_limit: str = ..., automatic_dynamic: bool = ...,
    static: Iterable[SourceLike] = ..., dynamic: Iterable[SourceLike] = ...,
    error_on_recompile: bool = ..., policy: Optional[ArgPolicy] = ..., global_state: bool = ...,
    max_restarts: int = ..., maxsize: Optional[int] = ..., history: int = ...,
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]: ...


def specialize(fn: Optional[Callable[..., Any]] = None, /, **options: Any) -> Any:
    return _runtime.specialize(fn, **options)


specialize.__doc__ = _runtime.specialize.__doc__
