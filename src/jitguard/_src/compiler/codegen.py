"""Code generation: leaves -> the Python source of a straight-line check function (for a
large check, a top-level function calling straight-line chunks).

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
#     [Note: Compiled-code reuse]);
#   * a check of more than ``CHUNK_ABOVE`` leaves is split into chunks (see
#     [Note: Chunked checks]); every point above holds for each chunk.
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

__all__ = ["CHUNK_ABOVE", "CHUNK_LEAVES", "GeneratedCode", "generate"]

_counter = itertools.count()
# By identity: hashing or comparing a type runs its metaclass ``__hash__``/``__eq__``.
_SCALAR_IDS = frozenset(id(t) for t in (int, float, complex, str, bytes, bool, type(None)))


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


# Called as on_weak(ident, const_name, namespace) for each weakly held object a function
# binds: ``namespace`` (that function's globals) holds its id under ``const_name``.
OnWeak = Callable[[Ident, str, dict[str, Any]], None]


class _Namespace(EmitContext):
    def __init__(self, on_weak: OnWeak, share: bool = True) -> None:
        self.ns: dict[str, Any] = {"__builtins__": __builtins__}
        # With ``share``, an object (not a scalar) used twice is bound once; a chunk binds
        # each use under its own name, so its code text does not say which uses coincide.
        self._share = share
        self._by_id: dict[int, str] = {}  # id of a bound object -> its name
        self._by_ident: dict[int, str] = {}  # id of a weakly held Ident -> its id's name
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
        if id(type(obj)) in _SCALAR_IDS or not self._share:
            prefix = self._prefixes.get(hint)
            name = f"{prefix}{next(self._n)}" if prefix is not None else self._name(hint)
            self.ns[name] = obj
            return name
        return self._bind(obj, hint)

    def _bind(self, obj: Any, hint: str) -> str:
        name = self._by_id.get(id(obj))
        if name is None:
            name = self._name(hint)
            self.ns[name] = obj
            self._by_id[id(obj)] = name
        return name

    def identical(self, expr: str, ident: Any, hint: str = "o") -> str:
        if not ident.is_weak:
            # Bound by identity, never through ``const``'s by-value sharing: an equal str or
            # int that is another object must not stand in for this one.
            if self._share:
                return f"{expr} is {self._bind(ident.get(), hint)}"
            name = self._name(hint)
            self.ns[name] = ident.get()
            return f"{expr} is {name}"
        known = self._by_ident.get(id(ident)) if self._share else None
        if known is not None:
            return f"id({expr}) == {known}"
        name = self._name("id_" + hint)
        # An object that already died (a check rebuilt from old leaves) binds -1, which no
        # object's id is, so the check can never hit a newcomer at the dead object's id.
        self.ns[name] = ident.id if ident.alive else -1
        if self._share:
            self._by_ident[id(ident)] = name
        self._on_weak(ident, name, self.ns)
        return f"id({expr}) == {name}"


class GeneratedCode:
    """The generated function with its source text, filename and namespace.

    ``parts`` is (filename, text) for each function registered in linecache and
    ``namespaces`` the globals of each, the check function's first; a check that is not
    chunked has one of each, and then ``source`` is its text."""

    def __init__(
        self,
        fn: Callable[..., bool],
        source: str,
        filename: str,
        ns: dict[str, Any],
        parts: Optional[list[tuple[str, str]]] = None,
        namespaces: Optional[list[dict[str, Any]]] = None,
    ):
        self.fn = fn
        self.source = source
        self.filename = filename
        self.namespace = ns
        self.parts = parts if parts is not None else [(filename, source)]
        self.namespaces = namespaces if namespaces is not None else [ns]


class _Values:
    """The values the functions of one check hold in variables, by number: ``where`` maps
    each source read so far to its value; ``home[n]`` is the chunk whose variable holds value
    ``n`` (-1: a parameter of the check function), ``name[n]`` that variable."""

    def __init__(self) -> None:
        self.where: dict[Source, int] = {}
        self.home: list[int] = []
        self.name: list[str] = []
        self.mapping = -1  # mapping mode: the value that is the mapping of locals

    def new(self, home: int, name: str) -> int:
        self.home.append(home)
        self.name.append(name)
        return len(self.name) - 1


class _Body:
    """The body of one function being written: its lines (code, and a comment for each),
    its namespace, and which of the check's values it holds.

    In a chunk, a value held elsewhere (a parameter of the check, or a variable of an earlier
    chunk, which then returns it) becomes a parameter ``aN``; alone, the function reads the
    check's parameters directly."""

    def __init__(
        self,
        index: int,
        ns: _Namespace,
        values: _Values,
        arg_names: Optional[Sequence[str]],
        f_globals: Optional[Mapping[str, Any]],
        chunks: Optional[list[_Body]],
    ) -> None:
        self.index = index
        self.ns = ns
        self.values = values
        self.arg_names = arg_names
        self.f_globals = f_globals
        self.chunks = chunks
        self.code: list[str] = []
        self.comments: list[str] = []
        self.params: dict[int, str] = {}  # (chunks) value held elsewhere -> parameter
        self.param_shown: list[str] = []  # (chunks) what each parameter holds, for comments
        self.exports: dict[int, str] = {}  # (chunks) own value later chunks read -> shown
        self.first_leaf = self.last_leaf = 0
        self._tmp = itertools.count()
        self._const = ns.const

    def outer(self, value: int, shown: str) -> str:
        """The name, in this function, of a value held outside it: alone, the check's own
        parameter; in a chunk, a parameter ``aN`` (numbered in order of first use)."""
        if self.chunks is None:
            return self.values.name[value]
        name = self.params.get(value)
        if name is None:
            name = self.params[value] = f"a{len(self.params)}"
            self.param_shown.append(shown)
            home = self.values.home[value]
            if home >= 0:
                self.chunks[home].exports[value] = shown
        return name

    def read(self, source: Source) -> str:
        values = self.values
        value = values.where.get(source)
        if value is not None:
            if self.chunks is None or values.home[value] == self.index:
                return values.name[value]
            return self.outer(value, source.name())
        if isinstance(source, ChainedSource):
            base = self.read(source.base)
            how = _HOW.get(type(source))
            if how is None:
                how = _HOW[type(source)] = _how_to_read(type(source))
            if how == 1:
                expr = source.emit(base, self._const)  # type: ignore[attr-defined]
            else:
                expr = f"{self._const(source.access, 'access')}({base})"
            if expr == base:
                values.where[source] = values.where[source.base]
                return base
        else:
            expr = self._root(source)
        var = f"v{next(self._tmp)}"
        self.code.append(f"        {var} = {expr}")
        self.comments.append(source.name())
        values.where[source] = len(values.name)
        values.home.append(self.index)
        values.name.append(var)
        return var

    def _root(self, source: Source) -> str:
        slot = getattr(source, "frame_slot", None)
        if slot is None:
            raise GuardCompileError(
                f"{source.name() or type(source).__name__} is a root source with no frame "
                f"slot; it cannot be read by a check function"
            )
        scope, key = slot()
        ns = self.ns
        if scope == "L":
            if self.arg_names is not None:
                raise GuardCompileError(
                    f"{source.name()} is not among the check's arguments {list(self.arg_names)}"
                )
            return f"{self.outer(self.values.mapping, 'L')}[{ns.const(key, 'local')}]"
        if self.f_globals is None:
            raise GuardCompileError(f"{source.name()} reads a global but no f_globals was given")
        return f"{ns.const(self.f_globals, 'G')}[{ns.const(key, 'global')}]"

    def add(self, leaf: Leaf) -> None:
        kind, sources = leaf.kind, leaf.sources
        var: Any
        if kind.relational:
            var = tuple([self.read(s) for s in sources])
        else:
            var = self.read(sources[0]) if sources else None
        expr = kind.emit(var, leaf.params, self.ns)
        if expr == "True":
            return
        self.code += (f"        if not ({expr}):", "            return False")
        self.comments += (f"{kind.name}: {leaf.code()}", "")


# How a chained source type is read: 1 by its ``emit``, 2 by calling its ``access``.
_HOW: dict[type, int] = {}


def _how_to_read(tp: type) -> int:
    if hasattr(tp, "emit"):
        return 1
    if hasattr(tp, "access"):
        return 2
    raise GuardCompileError(f"{tp.__name__} says no way to read its value")


def generate(
    leaves: Sequence[Leaf],
    *,
    name: str,
    arg_names: Optional[Sequence[str]],
    f_globals: Optional[Mapping[str, Any]],
    on_weak: OnWeak,
) -> GeneratedCode:
    """Generate the check function for ``leaves`` (already in check order).

    With ``arg_names`` the function takes those locals positionally; otherwise it takes one
    mapping of locals. Globals are read from ``f_globals`` at call time.
    """
    values = _Values()
    if arg_names is not None:
        params = []
        for i, arg in enumerate(arg_names):
            pname = f"l_{arg}" if is_plain_identifier(arg) else f"l{i}_"
            params.append(pname)
            values.where[LocalSource(arg)] = values.new(-1, pname)
        signature = ", ".join(params)
    else:
        params = ["L"]
        values.mapping = values.new(-1, "L")
        signature = "L"
    fname = "check_" + "".join(c if c.isalnum() and c.isascii() else "_" for c in name)
    tag = f"{_comment(name)}#{next(_counter)}"
    filename = f"<jitguard check {tag}>"
    code_def = f"def {_CODE_NAME}({signature}):"
    shown_def = f"def {fname}({signature}):"

    if len(leaves) <= CHUNK_ABOVE:
        body = _Body(0, _Namespace(on_weak), values, arg_names, f_globals, None)
        for leaf in leaves:
            body.add(leaf)
        ns = body.ns.ns
        fn, text = _function(
            code_def, shown_def, body.code, body.comments, _RETURN_TRUE, ns, filename, fname
        )
        ns[fname] = fn
        return GeneratedCode(fn, text, filename, ns)

    chunks: list[_Body] = []
    for k, (start, stop) in enumerate(_split(leaves)):
        body = _Body(k, _Namespace(on_weak, share=False), values, arg_names, f_globals, chunks)
        body.first_leaf, body.last_leaf = start, stop - 1
        chunks.append(body)
        for i in range(start, stop):
            body.add(leaves[i])

    # The check function keeps every value a chunk needs from outside in one list ``s``:
    # the check's parameters, then what each chunk returns, in order. A chunk's arguments
    # are slices of it (values read in check order are mostly needed in that order too).
    top_ns: dict[str, Any] = {"__builtins__": __builtins__}
    top_code = [f"        s = [{signature}]"]
    top_comments = [""]
    position = {value: value for value in range(len(params))}  # value -> its index in s
    # Positions in ``s`` are bound names too (``s[___at_3]``), so that the check function's
    # text holds no literal at all and depends only on how many chunks take how many values.
    at_names = itertools.count()

    def at(index: Any) -> str:
        name = f"___at_{next(at_names)}"
        top_ns[name] = index
        return name

    parts: list[tuple[str, str]] = []
    namespaces = [top_ns]
    for body in chunks:
        k = body.index
        cname = f"{fname}_chunk{k}"
        cfile = f"<jitguard check {tag} chunk {k}>"
        exports = sorted(body.exports)
        ret = _RETURN_TRUE
        if exports:
            ret = f"        return {_tuple([values.name[v] for v in exports])}"
        shown = _comment("; ".join(f"a{i}: {s}" for i, s in enumerate(body.param_shown)))
        picks = [position[v] for v in body.params]
        code, comments = body.code, body.comments
        if len(picks) > 1:
            # One list argument, unpacked: a plain call (no ``*args``), one copy of the values.
            cparams, arg, def_comment = "p", _picks(picks, at), ""
            code = [f"        {_tuple(list(body.params.values()))} = p", *code]
            comments = [shown, *comments]
        else:
            cparams, arg, def_comment = ("a0", f"s[{at(picks[0])}]", f"  # {shown}") if picks else (
                "", "", "")
        fn, text = _function(
            f"def {_CODE_NAME}({cparams}):", f"def {cname}({cparams}):{def_comment}",
            code, comments, ret, body.ns.ns, cfile, cname,
        )
        parts.append((cfile, text))
        namespaces.append(body.ns.ns)
        top_ns[f"___chunk_{k}"] = fn
        call = f"___chunk_{k}({arg})"
        about = f"{cname}: checks {body.first_leaf}-{body.last_leaf}"
        if exports:
            first = len(position)
            for v in exports:
                position[v] = len(position)
            top_code += (f"        t = {call}", "        if not t:", "            return False",
                         "        s += t")
            shown = ", ".join(body.exports[v] for v in exports)
            top_comments += (about, "", "", _comment(f"s[{first}:{len(position)}] = {shown}"))
        else:
            top_code += (f"        if not {call}:", "            return False")
            top_comments += (about, "")
    fn, text = _function(
        code_def, shown_def, top_code, top_comments, _RETURN_TRUE, top_ns, filename, fname
    )
    top_ns[fname] = fn
    parts.insert(0, (filename, text))
    source = "".join(t for _, t in parts)
    return GeneratedCode(fn, source, filename, top_ns, parts, namespaces)


_RETURN_TRUE = "        return True"


def _picks(indices: Sequence[int], at: Callable[[Any], str]) -> str:
    """A list of ``s[i]`` for each index: a slice of ``s`` when the indices are consecutive,
    else a list display with a slice for each run of consecutive ones (``at`` binds an index
    or a slice and returns its name)."""
    out = []
    i = 0
    while i < len(indices):
        j = i + 1
        while j < len(indices) and indices[j] == indices[j - 1] + 1:
            j += 1
        if j - i == 1:
            out.append(f"s[{at(indices[i])}]")
        else:
            out.append(f"*s[{at(slice(indices[i], indices[j - 1] + 1))}]")
        i = j
    if len(out) == 1 and out[0][0] == "*":
        return out[0][1:]
    return f"[{', '.join(out)}]"


def _tuple(names: Sequence[str]) -> str:
    return names[0] + "," if len(names) == 1 else ", ".join(names)


def _function(
    code_def: str,
    shown_def: str,
    code: list[str],
    comments: list[str],
    ret: str,
    ns: dict[str, Any],
    filename: str,
    fname: str,
) -> tuple[Callable[..., bool], str]:
    """Compile (or reuse) one function and register its text, with the comments, in
    linecache (line for line the code that is compiled)."""
    head = [code_def, "    try:"]
    tail = [ret, "    except Exception:", "        return False", ""]
    code_text = "\n".join(head + code + tail)
    shown = [c + "  # " + _comment(m) if m else c for c, m in zip(code, comments, strict=True)]
    text = "\n".join([shown_def, head[1], *shown, *tail])
    fn_code = _renamed(_compile(code_text, text), filename, fname)
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    return types.FunctionType(fn_code, ns, fname), text


# [Note: Chunked checks]
# ``compile()`` costs 30-50 us per leaf, more per leaf as a function grows: a check of 10,000
# leaves as one function took half a second to compile. A check that large is mostly a few
# shapes of code over and over (the same guards on each of 2,000 records, on each layer of a
# model), so above ``CHUNK_ABOVE`` leaves the leaves are cut, in check order, into chunks of
# at most ``CHUNK_LEAVES``, and each chunk is a straight-line function of its own, with its
# own namespace whose names are numbered from 0. Two chunks of the same structure then have
# the same code text, and [Note: Compiled-code reuse] compiles it once: ``compile()`` runs
# once per distinct chunk shape (bench_compiler's 10,000 guards: 43 chunks, 8 shapes).
# For that, a chunk's text says nothing a repeat of the structure would change:
#   * its namespace binds every use of an object under its own name (a lone function shares
#     one name per object; in a chunk, which uses share a type would show in the text);
#   * what it needs from outside (the check's parameters, values read by earlier chunks)
#     arrives as parameters ``a0, a1, ...``, numbered in order of first use, whatever their
#     names elsewhere (several come as one list ``p``, unpacked on the chunk's first line);
#     it returns the values it read that later chunks need (a non-empty tuple, so truthy;
#     True when it returns none; False when a check fails).
# The check function only calls the chunks, in order, keeping the values passed between
# them in one list ``s`` (its parameters first, then what each chunk returned); a chunk's
# argument is a slice of ``s``, as values read in check order are needed in that order:
#
#     s = [l_records]
#     t = ___chunk_0(s[___at_0])  # check_NAME_chunk0: checks 0-239
#     if not t:
#         return False
#     s += t  # s[1:240] = L['records'][0], ..., L['records'][238]
#     ...
#     if not ___chunk_9(s[___at_9]):  # check_NAME_chunk9: checks 2001-2240
#         return False
#
# where ``___at_9`` is ``slice(1, 241)`` (a list display such as ``[s[___at_3],
# *s[___at_4]]`` when the values are not consecutive): positions are bound names too, so no
# generated text holds a literal. So each source is still read once, in check order, and
# the check function's text depends only on how many chunks take how many values.
# A chunk ends early, once a quarter full, where the kind's cost changes between consecutive
# leaves (a new group in check order), so chunks start at the same place in a repeated
# structure; 240 divides evenly by the small repeat counts (2, 3, 4, 5, 6, 8, 10, 12, 15,
# 16). Each chunk call costs
# about a microsecond on the hot path: on 10,000 leaves, chunks of 240 measured within a few
# percent of one function, chunks of 60 about 12% slower (for 10 ms less compiling).
# Each chunk ``check_NAME_chunkK`` is registered in linecache as ``<jitguard check NAME#N
# chunk K>``, its text commenting what each parameter holds; ``CheckFunction.filenames``
# lists the files and ``CheckFunction.source`` is the check function's text followed by
# every chunk's (the same guards still give the same text). Identity constants live in the
# chunk that binds them: ``on_weak`` gets that chunk's namespace, which a death patches
# (-1), and ``invalidate`` patches every namespace.
# Checks of up to ``CHUNK_ABOVE`` leaves, by far the most common, stay one function: no
# call, no argument passing (bench_compiler's scenarios (a)-(e) are all below it).
CHUNK_ABOVE = 1024
CHUNK_LEAVES = 240


def _split(leaves: Sequence[Leaf]) -> list[tuple[int, int]]:
    """(start, stop) of each chunk of ``leaves``."""
    bounds = []
    start = 0
    early = max(1, CHUNK_LEAVES // 4)
    cost = None
    for i, leaf in enumerate(leaves):
        c = leaf.kind.cost
        n = i - start
        if n >= CHUNK_LEAVES or (n >= early and c != cost):
            bounds.append((start, i))
            start = i
        cost = c
    if start < len(leaves):
        bounds.append((start, len(leaves)))
    return bounds


# [Note: Compiled-code reuse]
# ``compile()`` is most of the cost of building a large check. The code that is compiled
# holds no constant, source name or comment: constants are names bound in the function's
# namespace, comments are added only to the text shown in linecache (line for line, so line
# numbers agree), and the function is compiled under a fixed name. So two guard sets with the
# same structure (a recompile after ``L['n'] == 7`` became ``L['n'] == 8``, the same guards on
# another call site) produce the very same code text, and the code object compiled for the
# first is reused for the second, with its filename and name replaced. Within one large
# check the same goes for its chunks ([Note: Chunked checks]), whose texts also do not
# depend on the check's parameter names, so checks of similar structure share chunk code
# too. The cache is keyed by the whole code text, so reuse is exactly as if the text had
# been compiled again; it keeps the ``_CACHE_SIZE`` most recently used texts.
_CODE_NAME = "___check"
_CACHE_SIZE = 256
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
