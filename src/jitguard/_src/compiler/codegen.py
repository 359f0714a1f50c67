"""Code generation: leaves -> the Python source of one straight-line check function.

May import: errors, guards, sources, compiler.kinds, compiler.builder, compiler.values.

# [Note: Generated check functions]
# The generated function returns True iff every leaf holds:
#   * each source is read once, into a variable, just before the first check that needs it;
#     a chain shares its prefix (``L['m'].layer`` is read once for everything under it);
#   * checks run shallow before deep (a value's type before what is read through it), cheap
#     before costly within a depth, relational and ambient checks last;
#   * every constant is a name in the function's own globals (``___key_3``), never text in
#     the source, so no key, attribute name or value can change the code (the one name from
#     a source that appears as code is a plain ASCII identifier: ``v.attr``, or a positional
#     parameter ``l_x``); comments show source names with non-printable characters escaped;
#   * an object guarded by identity is bound by identity (``is``, or ``id()`` for a weakly
#     held one, see [Note: Identity binding]), never through an equal constant;
#   * one ``try`` wraps the body (free in CPython 3.11 when nothing raises): a read or check
#     that raises an Exception makes the function return False (a BaseException such as
#     KeyboardInterrupt propagates);
#   * the source is registered in ``linecache`` under ``<jitguard check NAME#N>``, so
#     tracebacks, ``inspect.getsource`` and pdb show it;
#   * the compiled code is shared by guard sets of the same structure (see
#     [Note: Compiled-code reuse]).
"""

from __future__ import annotations

import itertools
import linecache
import sys
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from ..errors import GuardCompileError
from ..guards import ChainedSource, Source
from ..sources import LocalSource, is_plain_identifier
from .builder import Leaf
from .kinds import EmitContext
from .values import Ident

__all__ = ["GeneratedCode", "generate"]

_counter = itertools.count()
_SCALARS = frozenset({int, float, complex, str, bytes, bool, type(None)})


def _comment(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _depth(source: Source) -> int:
    depth = 0
    while isinstance(source, ChainedSource):
        source = source.base
        depth += 1
    return depth


def leaf_order_key(leaf: Leaf) -> tuple[int, int, int]:
    """Shallow before deep, cheap before costly; relational and ambient leaves last."""
    kind, sources = leaf.kind, leaf.sources
    epilogue = 1 if (kind.relational or not kind.reads_value) else 0
    if len(sources) == 1:
        depth = _depth(sources[0])
    else:
        depth = max([_depth(s) for s in sources], default=0)
    return (epilogue, depth, kind.cost)


class _Namespace(EmitContext):
    def __init__(self, on_weak: Callable[[Ident, str], None]) -> None:
        self.ns: dict[str, Any] = {"__builtins__": __builtins__}
        self._by_key: dict[Any, str] = {}
        self._prefixes: dict[str, str] = {}
        self._n = itertools.count()
        self._on_weak = on_weak

    def _name(self, hint: str) -> str:
        # ``_`` before the counter: the counter has none, so (hint, counter) is unique
        # ("x1" then 23 and "x12" then 3 would both be ___x123 without it).
        prefix = self._prefixes.get(hint)
        if prefix is None:
            prefix = f"___{hint if is_plain_identifier(hint) else 'c'}_"
            self._prefixes[hint] = prefix
        return f"{prefix}{next(self._n)}"

    def const(self, obj: Any, hint: str = "c") -> str:
        # Scalars get a name each: sharing them by value, or by identity (small ints and
        # short strs are cached objects), would make the code text depend on which values
        # happen to coincide, and defeat [Note: Compiled-code reuse]. Other objects (a
        # function, the globals dict) are shared by identity.
        if type(obj) in _SCALARS:
            fresh = self._name(hint)
            self.ns[fresh] = obj
            return fresh
        key = ("id", id(obj))
        name = self._by_key.get(key)
        if name is None:
            name = self._name(hint)
            self.ns[name] = obj
            self._by_key[key] = name
        return name

    def identical(self, expr: str, ident: Any, hint: str = "o") -> str:
        if not ident.is_weak:
            # Bound by identity, never through ``const``'s by-value sharing: an equal str or
            # int that is another object must not stand in for this one.
            obj = ident.get()
            key = ("id", id(obj))
            name = self._by_key.get(key)
            if name is None:
                name = self._name(hint)
                self.ns[name] = obj
                self._by_key[key] = name
            return f"{expr} is {name}"
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
    lines: list[tuple[str, str]] = []  # (code, comment) per line of the body
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
        known = var_of.get(source)
        if known is not None:
            return known
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
        lines.append((f"        {var} = {expr}", source.name()))
        var_of[source] = var
        return var

    for leaf in leaves:
        vars_ = [read(s) for s in leaf.sources]
        var: Any = tuple(vars_) if leaf.kind.relational else (vars_[0] if vars_ else None)
        expr = leaf.kind.emit(var, leaf.params, ns)
        if expr == "True":
            continue
        lines.append((f"        if not ({expr}):", f"{leaf.kind.name}: {leaf.code()}"))
        lines.append(("            return False", ""))

    fname = "check_" + "".join(c if c.isalnum() and c.isascii() else "_" for c in name)
    filename = f"<jitguard check {_comment(name)}#{next(_counter)}>"
    head = [f"def {_CODE_NAME}({signature}):", "    try:"]
    tail = ["        return True", "    except Exception:", "        return False", ""]
    code_text = "\n".join([*head, *(code for code, _ in lines), *tail])
    text = "\n".join(
        [
            f"def {fname}({signature}):",
            head[1],
            *(f"{code}  # {_comment(comment)}" if comment else code for code, comment in lines),
            *tail,
        ]
    )
    fn_code = _renamed(_compile(code_text, text), filename, fname)
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    fn = types.FunctionType(fn_code, ns.ns, fname)
    ns.ns[fname] = fn
    return GeneratedCode(fn, text, filename, ns.ns)


# [Note: Compiled-code reuse]
# ``compile()`` is most of the cost of building a large check. The code that is compiled
# holds no constant, source name or comment: constants are names bound in the function's
# namespace, comments are added only to the text shown in linecache (line for line, so line
# numbers agree), and the function is compiled under a fixed name. So two guard sets with the
# same structure (a recompile after ``L['n'] == 7`` became ``L['n'] == 8``, the same guards on
# another call site) produce the very same code text, and the code object compiled for the
# first is reused for the second, with its filename and name replaced. The cache is keyed by
# the whole code text, so reuse is exactly as if the text had been compiled again.
_CODE_NAME = "___check"
_CACHE_SIZE = 64
_code_cache: dict[str, types.CodeType] = {}
_cache_lock = threading.Lock()


def _renamed(code: types.CodeType, filename: str, fname: str) -> types.CodeType:
    if sys.version_info >= (3, 11):
        return code.replace(co_filename=filename, co_name=fname, co_qualname=fname)
    return code.replace(co_filename=filename, co_name=fname)


def _compile(code_text: str, shown: str) -> types.CodeType:
    """The code object of the function in ``code_text``, compiled once per distinct text."""
    with _cache_lock:
        cached = _code_cache.pop(code_text, None)
        if cached is not None:
            _code_cache[code_text] = cached  # most recently used last
            return cached
    try:
        module = compile(code_text, "<jitguard check>", "exec")
    except SyntaxError as e:  # a bug in a kind's emit, never user input
        raise GuardCompileError(f"generated check does not compile ({e}):\n{shown}") from e
    fn_code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    with _cache_lock:
        _code_cache[code_text] = fn_code
        while len(_code_cache) > _CACHE_SIZE:
            del _code_cache[next(iter(_code_cache))]
    return fn_code

