"""Code generation: leaves -> the Python source of one straight-line check function.

May import: errors, guards, sources, compiler.kinds, compiler.builder, compiler.values.

# [Note: Generated check functions]
# The generated function returns True iff every leaf holds:
#   * each source is read once, into a variable, just before the first check that needs it;
#     a chain shares its prefix (``L['m'].layer`` is read once for everything under it);
#   * checks run shallow before deep (a value's type before what is read through it), cheap
#     before costly within a depth, relational and ambient checks last;
#   * every constant is a name in the function's own globals (``___key3``), never text in
#     the source, so no key, attribute name or value can change the code; comments show
#     source names with non-printable characters escaped;
#   * one ``try`` wraps the body (free in CPython 3.11 when nothing raises): a read or check
#     that raises makes the function return False, never raise;
#   * the source is registered in ``linecache`` under ``<jitguard check NAME#N>``, so
#     tracebacks, ``inspect.getsource`` and pdb show it.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from ..errors import GuardCompileError
from ..guards import ChainedSource, Source
from ..sources import LocalSource, is_plain_identifier
from .builder import Leaf
from .kinds import EmitContext
from .values import Ident

__all__ = ["GeneratedCode", "generate"]

_counter = itertools.count()


def _comment(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _depth(source: Source) -> int:
    depth = 0
    while isinstance(source, ChainedSource):
        source = source.base
        depth += 1
    return depth


def leaf_order_key(leaf: Leaf) -> tuple[int, int, int]:
    """Shallow before deep, cheap before costly; relational and ambient leaves last."""
    epilogue = 1 if (leaf.kind.relational or not leaf.kind.reads_value) else 0
    depth = max((_depth(s) for s in leaf.sources), default=0)
    return (epilogue, depth, leaf.kind.cost)


class _Namespace(EmitContext):
    def __init__(self, on_weak: Callable[[Ident, str], None]) -> None:
        self.ns: dict[str, Any] = {"__builtins__": __builtins__}
        self._by_key: dict[Any, str] = {}
        self._n = itertools.count()
        self._on_weak = on_weak

    def _name(self, hint: str) -> str:
        hint = hint if is_plain_identifier(hint) and hint.isascii() else "c"
        return f"___{hint}{next(self._n)}"

    def const(self, obj: Any, hint: str = "c") -> str:
        tp = type(obj)
        key: Any = (tp, obj) if tp in (int, str, bytes, bool) else ("id", id(obj))
        name = self._by_key.get(key)
        if name is None:
            name = self._name(hint)
            self.ns[name] = obj
            self._by_key[key] = name
        return name

    def identical(self, expr: str, ident: Any, hint: str = "o") -> str:
        if not ident.is_weak:
            return f"{expr} is {self.const(ident.get(), hint)}"
        key = ("ident", id(ident))
        name = self._by_key.get(key)
        if name is None:
            name = self._name("id_" + hint)
            self.ns[name] = ident.id
            self._by_key[key] = name
            self._on_weak(ident, name)
        return f"id({expr}) == {name}"


class GeneratedCode:
    """The generated function with its source text, filename and namespace."""

    def __init__(self, fn: Callable[..., bool], source: str, filename: str, ns: dict[str, Any]):
        self.fn = fn
        self.source = source
        self.filename = filename
        self.namespace = ns


def generate(
    leaves: Sequence[Leaf],
    *,
    name: str,
    arg_names: Optional[Sequence[str]],
    f_globals: Optional[Mapping[str, Any]],
    on_weak: Callable[[Ident, str], None],
) -> GeneratedCode:
    """Generate the check function for ``leaves`` (already in check order).

    With ``arg_names`` the function takes those locals positionally; otherwise it takes one
    mapping of locals. Globals are read from ``f_globals`` at call time.
    """
    ns = _Namespace(on_weak)
    lines: list[str] = []
    var_of: dict[Source, str] = {}
    tmp = itertools.count()

    if arg_names is not None:
        params = []
        for i, arg in enumerate(arg_names):
            pname = f"l_{arg}" if is_plain_identifier(arg) else f"l{i}_"
            params.append(pname)
            var_of[LocalSource(arg)] = pname
        signature = ", ".join(params)
    else:
        signature = "L"

    def read(source: Source) -> str:
        if source in var_of:
            return var_of[source]
        if isinstance(source, ChainedSource):
            base = read(source.base)
            emit = getattr(source, "emit", None)
            if emit is not None:
                expr = emit(base, ns.const)
            elif hasattr(source, "access"):
                expr = f"{ns.const(source.access, 'access')}({base})"
            else:
                raise GuardCompileError(f"{type(source).__name__} says no way to read its value")
            if expr == base:
                var_of[source] = base
                return base
        else:
            slot = getattr(source, "frame_slot", None)
            if slot is None:
                raise GuardCompileError(
                    f"{source.name() or type(source).__name__} is a root source with no frame "
                    f"slot; it cannot be read by a check function"
                )
            scope, key = slot()
            if scope == "L":
                if arg_names is not None:
                    raise GuardCompileError(
                        f"{source.name()} is not among the check's arguments {list(arg_names)}"
                    )
                expr = f"L[{ns.const(key, 'local')}]"
            else:
                if f_globals is None:
                    raise GuardCompileError(
                        f"{source.name()} reads a global but no f_globals was given"
                    )
                expr = f"{ns.const(f_globals, 'G')}[{ns.const(key, 'global')}]"
        var = f"v{next(tmp)}"
        lines.append(f"        {var} = {expr}  # {_comment(source.name())}")
        var_of[source] = var
        return var

    for leaf in leaves:
        vars_ = [read(s) for s in leaf.sources]
        var: Any = tuple(vars_) if leaf.kind.relational else (vars_[0] if vars_ else None)
        expr = leaf.kind.emit(var, leaf.params, ns)
        if expr == "True":
            continue
        lines.append(f"        if not ({expr}):  # {_comment(leaf.kind.name + ': ' + leaf.code())}")
        lines.append("            return False")

    fname = "check_" + "".join(c if c.isalnum() and c.isascii() else "_" for c in name)
    filename = f"<jitguard check {_comment(name)}#{next(_counter)}>"
    text = "\n".join(
        [
            f"def {fname}({signature}):",
            "    try:",
            *lines,
            "        return True",
            "    except Exception:",
            "        return False",
            "",
        ]
    )
    try:
        code = compile(text, filename, "exec")
    except SyntaxError as e:  # a bug in a kind's emit, never user input
        raise GuardCompileError(f"generated check does not compile ({e}):\n{text}") from e
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(code, ns.ns)
    return GeneratedCode(ns.ns[fname], text, filename, ns.ns)

