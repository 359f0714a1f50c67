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
"""

from __future__ import annotations

import inspect
import itertools
import linecache
import weakref
from collections.abc import Callable
from typing import Any, Optional

from ..compiler.codecache import compile_generated, generated_filename

__all__ = ["Signature", "internal_prefix", "register_source"]

_P = inspect.Parameter
_counter = itertools.count()


def internal_prefix(names: tuple[str, ...]) -> str:
    """A prefix for generated names that no parameter name starts with."""
    prefix = "___j"
    while any(n.startswith(prefix) for n in names):
        prefix += "_"
    return prefix


def register_source(text: str, what: str, owner: Any = None) -> str:
    """Register generated source in ``linecache`` (tracebacks and pdb show it); returns the
    filename to compile it under. With ``owner``, the entry goes when the owner does."""
    filename = f"<jitguard {what}#{next(_counter)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    if owner is not None:
        weakref.finalize(owner, linecache.cache.pop, filename, None)
    return filename


class Signature:
    """The parameters of ``fn`` and the generated code that handles calls of it.

    ``params`` are the parameter names in order (the check functions' ``arg_names``);
    ``header`` is the parameter list for a generated ``def`` (defaults refer to names in
    ``namespace``, which a generated function's globals must include); ``values`` is the text
    passing the parameters' values positionally; ``call`` the text calling a target with the
    same arguments (``a, b, *args, c=c, **kw``).
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as e:
            raise TypeError(f"cannot specialize {fn!r}: it has no Python signature ({e})") from e
        parameters = list(sig.parameters.values())
        self.params: tuple[str, ...] = tuple(p.name for p in parameters)
        self.prefix = internal_prefix(self.params)
        self.namespace: dict[str, Any] = {}
        self.var_positional: Optional[str] = None
        self.var_keyword: Optional[str] = None
        self.positional: tuple[str, ...] = tuple(
            p.name for p in parameters if p.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD)
        )
        self.keyword_only: tuple[str, ...] = tuple(
            p.name for p in parameters if p.kind is _P.KEYWORD_ONLY
        )
        header: list[str] = []
        call: list[str] = []
        saw_pos_only = False
        star_written = False
        for i, p in enumerate(parameters):
            if p.kind is not _P.POSITIONAL_ONLY and saw_pos_only:
                header.append("/")
                saw_pos_only = False
            if p.kind is _P.KEYWORD_ONLY and not star_written:
                header.append("*")
                star_written = True
            text = p.name
            if p.default is not _P.empty:
                dname = f"{self.prefix}d{i}"
                self.namespace[dname] = p.default
                text += f"={dname}"
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
        self.call = ", ".join(call)
        self.values = ", ".join(self.params)
        t = f"{self.prefix}t"
        source = (
            f"def {self.prefix}forward({t}{', ' if self.params else ''}{self.values}):\n"
            f"    return {t}({self.call})\n"
            f"def {self.prefix}bind({self.header}):\n"
            f"    return ({self.values}{',' if len(self.params) == 1 else ''})\n"
        )
        ns = dict(self.namespace)
        compile_generated(source, generated_filename("signature"), owner=self).run(ns)
        self.forward: Callable[..., Any] = ns[f"{self.prefix}forward"]
        self._bind: Callable[..., tuple[Any, ...]] = ns[f"{self.prefix}bind"]

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
