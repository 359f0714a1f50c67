"""A specialized function's signature, and the small functions generated from it.

May import: compiler.codecache.

# [Note: Parameter values]
# Everywhere in the cache a call is its *parameter values*: one value per parameter of
# ``fn``, in signature order, after Python's own binding (defaults applied, ``*args`` a
# tuple, ``**kwargs`` a dict). The dispatcher is generated with ``fn``'s own signature, so
# the interpreter does the binding at C speed and no ``inspect.Signature.bind`` runs on any
# path; check functions take the parameter values positionally (``compile_guards(...,
# arg_names=params)``), and ``forward`` turns them back into a call of a target with the
# same signature (the artifact, or ``fn`` itself).
#
# [Note: The signature is the one Python binds with]
# The parameters are those the interpreter binds a call of ``fn`` with, never what ``fn``
# claims: a function's come from its code object (not ``__signature__``, not the function
# ``__wrapped__`` points to: a ``functools.wraps`` wrapper taking ``*args, **kwargs`` gets
# exactly its own arguments, so it is called with the arguments as given); a bound method's
# are its function's without the first; a ``functools.partial``'s are its function's less
# what the partial binds. Other callables (classes, callable objects, builtins) go through
# ``inspect.signature(fn, follow_wrapped=False)``.
#
# [Note: Defaults are read at call time]
# ``f.__defaults__``, ``f.__kwdefaults__`` (rebound or changed in place) and a partial's
# ``keywords`` may change after ``specialize``; Python reads them on every call, and so
# does the dispatcher. In the generated header every parameter but ``*args``/``**kwargs``
# defaults to the sentinel ``DEFAULT`` (a required one too: a default may be *added* to
# it later), and the generated code's first lines (``Signature.fill``) replace a sentinel
# with the default as it is *now*: ``F.__defaults__[-1]``, ``F.__kwdefaults__['k']``,
# ``P.keywords['k']`` (tried in that order for a partial's parameter, then its function's
# default), or for other callables the default that ``inspect`` reports now; where there is
# none, the call raises the ``TypeError`` Python would (``f() missing 1 required positional
# argument: 'k'``, one name at a time). A call pays one ``is`` test per parameter. The
# default's value is then a parameter value like any other: guarded by the argument rules,
# so a changed default is a miss, never a stale hit.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

from ..compiler.codecache import compile_generated, generated_filename, internal_prefix

__all__ = ["DEFAULT", "Signature", "internal_prefix"]

_P = inspect.Parameter
_CO_VARARGS = inspect.CO_VARARGS
_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS
_VARIADIC = (_P.VAR_POSITIONAL, _P.VAR_KEYWORD)


class _Default:
    """The value a generated header gives a parameter that has a default: the dispatcher
    replaces it with the default as it is at call time ([Note: Defaults are read at call
    time])."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<the default, read at call time>"


DEFAULT: Any = _Default()


# ---- the parameters Python binds with ------------------------------------------------------


class Param(NamedTuple):
    """One parameter. ``reads``: where its default is read at call time, tried in order (an
    ``(object, how, key)`` triple: ``obj.__defaults__[key]``, ``obj.__kwdefaults__[key]``,
    ``obj.keywords[key]``, or ``"inspect"``: the default ``inspect`` reports now), whether
    it has one now or not; empty for ``*args`` and ``**kwargs``."""

    name: str
    kind: Any  # an inspect.Parameter kind
    reads: tuple[tuple[Any, str, Any], ...] = ()


def _from_code(fn: types.FunctionType) -> list[Param]:
    """A function's parameters from its code object, defaults from the function."""
    code = fn.__code__
    names = code.co_varnames
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    out: list[Param] = []
    for i in range(npos):
        kind = _P.POSITIONAL_ONLY if i < code.co_posonlyargcount else _P.POSITIONAL_OR_KEYWORD
        out.append(Param(names[i], kind, ((fn, "defaults", i - npos),)))
    at = npos + nkw
    if code.co_flags & _CO_VARARGS:
        out.append(Param(names[at], _P.VAR_POSITIONAL))
        at += 1
    for name in names[npos:npos + nkw]:
        out.append(Param(name, _P.KEYWORD_ONLY, ((fn, "kwdefaults", name),)))
    if code.co_flags & _CO_VARKEYWORDS:
        out.append(Param(names[at], _P.VAR_KEYWORD))
    return out


def _drop_first(params: list[Param]) -> list[Param]:
    """The parameters of a callable bound to one positional argument (a bound method)."""
    if params and params[0].kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD):
        return params[1:]
    return params  # the bound object goes into *args (or the call fails, as Python's would)


def _of_partial(p: functools.partial[Any]) -> list[Param]:
    """A partial's parameters: the shape ``inspect`` gives it, each default read first from
    the partial's ``keywords``, then where its function reads it."""
    inner = {q.name: q for q in parameters(p.func)}
    out = []
    for q in inspect.signature(p, follow_wrapped=False).parameters.values():
        reads: tuple[tuple[Any, str, Any], ...] = ()
        if q.kind not in _VARIADIC:
            own = inner.get(q.name)
            reads = ((p, "keywords", q.name), *(own.reads if own is not None else ()))
        out.append(Param(q.name, q.kind, reads))
    return out


def parameters(fn: Callable[..., Any]) -> list[Param]:
    """The parameters Python binds a call of ``fn`` with ([Note: The signature is the one
    Python binds with])."""
    tp = type(fn)
    if tp is types.FunctionType:
        return _from_code(fn)  # type: ignore[arg-type]
    if tp is types.MethodType:
        return _drop_first(parameters(fn.__func__))  # type: ignore[attr-defined]
    if tp is functools.partial:
        return _of_partial(fn)  # type: ignore[arg-type]
    sig = inspect.signature(fn, follow_wrapped=False)
    return [
        Param(q.name, q.kind, ((fn, "inspect", q.name),) if q.kind not in _VARIADIC else ())
        for q in sig.parameters.values()
    ]


def _current_default(fn: Any, name: str) -> Any:
    """The default ``inspect`` reports now for parameter ``name`` of ``fn`` (the slow read,
    for callables that are not functions, methods or partials)."""
    try:
        param = inspect.signature(fn, follow_wrapped=False).parameters.get(name)
    except (TypeError, ValueError):
        param = None
    if param is None or param.default is _P.empty:
        raise LookupError(name)
    return param.default


def _is_method_body(fn: Any) -> bool:
    """``fn`` is a function defined in a class body (``C.m``, ``f.<locals>.C.m``)."""
    if type(fn) is not types.FunctionType:
        return False
    owner = fn.__qualname__.rpartition(".")[0]
    return bool(owner) and not owner.endswith("<locals>")


# ---- the signature and its generated code ---------------------------------------------------


class Signature:
    """The parameters of ``fn`` and the generated code that handles calls of it.

    ``params`` are the parameter names in order (the check functions' ``arg_names``);
    ``header`` is the parameter list for a generated ``def`` (every parameter but the
    variadic ones defaults to ``DEFAULT``; names refer to ``namespace``, which a generated
    function's globals must include); ``fill`` is the code a generated function with that header runs
    first, replacing ``DEFAULT`` by the current default ([Note: Defaults are read at call
    time]); ``values`` is the text passing the parameters' values positionally; ``call`` the
    text calling a target with the same arguments (``a, b, *args, c=c, **kw``).
    ``receiver`` names the parameter that receives the instance when ``fn`` is a method
    (the first parameter of a function defined in a class body, or one named ``self``), or
    is None.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        try:
            params = parameters(fn)
        except (TypeError, ValueError) as e:
            raise TypeError(f"cannot specialize {fn!r}: it has no Python signature ({e})") from e
        # Python names a function by its qualified name in binding errors (``C.m() missing``).
        name = getattr(fn, "__qualname__", None)
        self.fn_name: str = name if isinstance(name, str) else type(fn).__name__
        self.params: tuple[str, ...] = tuple(p.name for p in params)
        self.prefix = p_ = internal_prefix(self.params)
        self.namespace: dict[str, Any] = {f"{p_}DEFAULT": DEFAULT, f"{p_}missing": self._missing,
                                          f"{p_}Exception": Exception}
        self.var_positional: Optional[str] = None
        self.var_keyword: Optional[str] = None
        self.positional: tuple[str, ...] = tuple(
            p.name for p in params if p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)
        )
        self.keyword_only: tuple[str, ...] = tuple(
            p.name for p in params if p.kind is _P.KEYWORD_ONLY
        )
        self.receiver: Optional[str] = None
        if self.positional and (_is_method_body(fn) or self.positional[0] == "self"):
            self.receiver = self.positional[0]
        header: list[str] = []
        call: list[str] = []
        fill: list[str] = []
        saw_pos_only = False
        star_written = False
        for p in params:
            if p.kind is not _P.POSITIONAL_ONLY and saw_pos_only:
                header.append("/")
                saw_pos_only = False
            if p.kind is _P.KEYWORD_ONLY and not star_written:
                header.append("*")
                star_written = True
            text = p.name
            if p.reads:
                text += f"={p_}DEFAULT"
                fill.append(f"    if {p.name} is {p_}DEFAULT:\n")
                fill.extend(self._read(p, 0, "        "))
            if p.kind is _P.POSITIONAL_ONLY:
                saw_pos_only = True
                call.append(p.name)
            elif p.kind is _P.POSITIONAL_OR_KEYWORD:
                call.append(p.name)
            elif p.kind is _P.VAR_POSITIONAL:
                text = f"*{p.name}"
                star_written = True
                self.var_positional = p.name
                call.append(f"*{p.name}")
            elif p.kind is _P.KEYWORD_ONLY:
                call.append(f"{p.name}={p.name}")
            else:
                text = f"**{p.name}"
                self.var_keyword = p.name
                call.append(f"**{p.name}")
            header.append(text)
        if saw_pos_only:
            header.append("/")
        self.header = ", ".join(header)
        self.fill = "".join(fill)
        self.call = ", ".join(call)
        self.values = ", ".join(self.params)
        t = f"{p_}t"
        source = (
            f"def {p_}forward({t}{', ' if self.params else ''}{self.values}):\n"
            f"    return {t}({self.call})\n"
            f"def {p_}bind({self.header}):\n{self.fill}"
            f"    return ({self.values}{',' if len(self.params) == 1 else ''})\n"
        )
        ns = dict(self.namespace)
        compile_generated(source, generated_filename("signature"), owner=self).run(ns)
        self.forward: Callable[..., Any] = ns[f"{p_}forward"]
        self._bind: Callable[..., tuple[Any, ...]] = ns[f"{p_}bind"]
        self._bind.__qualname__ = self.fn_name

    def _read(self, p: Param, n: int, indent: str) -> list[str]:
        """Lines that set ``p`` to its current default from ``p.reads[n:]`` (nested ``try``s,
        the innermost raising the ``TypeError`` Python would)."""
        if n == len(p.reads):
            return [f"{indent}{self.prefix}missing({p.name!r})\n"]
        obj, how, key = p.reads[n]
        holder = f"{self.prefix}h{len(self.namespace)}"
        self.namespace[holder] = obj
        expr = {
            "defaults": f"{holder}.__defaults__[{key!r}]",
            "kwdefaults": f"{holder}.__kwdefaults__[{key!r}]",
            "keywords": f"{holder}.keywords[{key!r}]",
        }.get(how)
        if expr is None:  # "inspect": the slow read, for other callables
            self.namespace[holder] = functools.partial(_current_default, obj, key)
            expr = f"{holder}()"
        return [
            f"{indent}try:\n",
            f"{indent}    {p.name} = {expr}\n",
            f"{indent}except {self.prefix}Exception:\n",
            *self._read(p, n + 1, indent + "    "),
        ]

    def _missing(self, name: str) -> Any:
        kind = "keyword-only " if name in self.keyword_only else "positional "
        raise TypeError(f"{self.fn_name}() missing 1 required {kind}argument: {name!r}")

    def bind(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """The parameter values of a call ``fn(*args, **kwargs)`` (``TypeError`` as fn would
        raise it when the arguments do not fit)."""
        return self._bind(*args, **kwargs)

    def split(self, values: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` that call a function of this signature with ``values``:
        positional parameters and ``*args`` positionally, the rest by keyword."""
        by_name = dict(zip(self.params, values, strict=True))
        args = tuple(by_name[n] for n in self.positional)
        if self.var_positional is not None:
            args += tuple(by_name[self.var_positional])
        kwargs = {n: by_name[n] for n in self.keyword_only}
        if self.var_keyword is not None:
            kwargs.update(by_name[self.var_keyword])
        return args, kwargs

    def fresh(self) -> frozenset[str]:
        """Parameters whose value is a fresh object on every call (``*args``, ``**kwargs``):
        their identity means nothing."""
        return frozenset(n for n in (self.var_positional, self.var_keyword) if n is not None)

    def __repr__(self) -> str:
        return f"<Signature ({self.header})>"
