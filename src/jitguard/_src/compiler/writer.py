"""Writing one generated check function: the namespace its constants are bound in, the
values it holds in variables, its body (a read per source, a test per leaf), and compiling
it. ``codegen`` writes a check as one function; ``chunks`` as several.

May import: _util, errors, guards, sources, compiler.kinds, compiler.builder, compiler.values,
compiler.codecache.

See [Note: Generated check functions] in ``codegen``.

# [Note: Batched leaves]
# A kind whose guards come by the dozen on one check (Dynamo guards every hooks dict of
# every module a graph calls, and the dimension markings of every tensor) can say
# ``batches = True`` and write ``emit_batch``: one expression over all its leaves of the
# function (or chunk), true iff each holds, placed where the last of them stands (a kind
# with ``batch_reads_once`` whose values are all plain attribute reads used once may take
# them unread, ``emit_batch_attrs``: bases and names, for one C call that makes the reads
# with getattr's meaning). Moving a test later is sound (every test still runs before the
# function returns True) and every read stays behind the tests that came before it in check
# order. The leaves themselves are
# unchanged: ``CheckFunction.leaves``, ``explain`` and the recompile reasons go through the
# reference evaluator leaf by leaf, so a failure still names the one guard that failed, its
# source and its text.
#
# [Note: Unpacked items]
# Where a test of the function has pinned a value's exact type to list or tuple and its
# length to n (SEQUENCE_LENGTH: ``pins_type`` and ``pins_len``), and the function's leaves
# read at least half of its items 0..n-1 (two at the least), the first of those reads
# reads them all, in one unpacking: ``v2, v3, ..., v11 = v0``, where it would write a
# subscript per item (~15 ns each). For an exact list or tuple that is the same objects as
# ``v0[i]``; the items are read earlier than their own reads would stand, as any value a
# batched test uses is, and every test before the unpacking still runs before it. A value
# whose length changed since its test (by code a test ran) raises ValueError there, which
# fails the check, as the subscript past the end would have.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

from .._util import is_scalar_type
from ..errors import GuardCompileError
from ..guards import ChainedSource, Source
from ..sources import AttrSource, GetItemSource, LocalSource, is_plain_identifier
from .builder import Leaf
from .codecache import compile_generated
from .kinds import EmitContext
from .values import Ident

__all__ = [
    "CODE_NAME",
    "RETURN_TRUE",
    "Body",
    "GeneratedCode",
    "Namespace",
    "OnWeak",
    "Values",
    "comment",
    "write_function",
]

# Every check function (and chunk) is compiled as ``def ___check(...)`` and renamed, so that
# its code text does not depend on its name ([Note: Compiled-code reuse]).
CODE_NAME = "___check"
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: instances cannot change type
_UNPACK_MAX = 256  # the longest list or tuple whose items are read in one unpacking
RETURN_TRUE = "        return True"


def comment(text: str) -> str:
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# Called as on_weak(ident, const_name, namespace) for each weakly held object a function
# binds: ``namespace`` (that function's globals) holds its id under ``const_name``.
OnWeak = Callable[[Ident, str, dict[str, Any]], None]


class Namespace(EmitContext):
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
        if is_scalar_type(type(obj)) or not self._share:
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


class Values:
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


def check_root(source: Source, arg_names: Optional[Sequence[str]],
               f_globals: Optional[Mapping[str, Any]]) -> tuple[str, Any]:
    """The frame slot of the root ``source``; ``GuardCompileError`` unless a check taking
    ``arg_names`` (positional; with None, one mapping of locals) and reading globals from
    ``f_globals`` can read it. A local that is a positional argument is bound before any root is read, so
    only the other roots come here."""
    slot = source.frame_slot()
    if slot is None:
        raise GuardCompileError(
            f"{source.name() or type(source).__name__} is a root source with no frame "
            f"slot; it cannot be read by a check function"
        )
    scope = slot[0]
    if scope == "L":
        if arg_names is not None and not any(source == LocalSource(a) for a in arg_names):
            raise GuardCompileError(
                f"{source.name()} is not among the check's arguments {list(arg_names)}"
            )
    elif f_globals is None:
        raise GuardCompileError(f"{source.name()} reads a global but no f_globals was given")
    return slot


class Body:
    """The body of one function being written: its lines (code, and a comment for each),
    its namespace, and which of the check's values it holds.

    In a chunk, a value held elsewhere (a parameter of the check, or a variable of an earlier
    chunk, which then returns it) becomes a parameter ``aN``; alone, the function reads the
    check's parameters directly."""

    def __init__(
        self,
        index: int,
        ns: Namespace,
        values: Values,
        arg_names: Optional[Sequence[str]],
        f_globals: Optional[Mapping[str, Any]],
        chunks: Optional[list[Body]],
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
        self._uses: dict[Source, int] = {}  # (add_all) how many leaves read each source
        # sources whose exact type a test of this function has pinned, where instances of
        # that type cannot change type (an immutable type: no ``__class__`` assignment)
        self._pinned: dict[Source, type] = {}
        # of those, lists and tuples whose length a test pinned too ([Note: Unpacked items])
        self._pinned_len: dict[Source, int] = {}

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
        if type(source) is GetItemSource:
            unpacked = self._unpack(source)
            if unpacked is not None:
                return unpacked
        if isinstance(source, ChainedSource):
            base = self.read(source.base)
            expr = self._emit(source, base)
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

    def _unpack(self, source: GetItemSource) -> Optional[str]:
        """All the items of ``source``'s base in one unpacking, and ``source``'s variable,
        where [Note: Unpacked items] allows it; None where it does not."""
        n = self._pinned_len.get(source.base)
        index = source.index
        if (
            n is None or n > _UNPACK_MAX or source.index_is_slice or type(index) is not int
            or not 0 <= index < n
        ):
            return None
        items = [GetItemSource(source.base, i) for i in range(n)]
        values = self.values
        wanted = sum(1 for s in items if self._uses.get(s, 0) and s not in values.where)
        if wanted < 2 or 2 * wanted < n:
            return None
        base = self.read(source.base)
        names = [f"v{next(self._tmp)}" for _ in items]
        self.code.append(f"        {', '.join(names)} = {base}")
        self.comments.append(f"{source.base.name()}[0], ..., [{n - 1}]")
        for item, var in zip(items, names, strict=True):
            if item not in values.where:
                values.where[item] = values.new(self.index, var)
        return values.name[values.where[source]]

    def _emit(self, source: ChainedSource, base: str) -> str:
        """``source``'s expression on its base's, cheaper where a test before it pinned the
        base's exact type (``emit_on``)."""
        pinned = self._pinned.get(source.base)
        if pinned is None:
            return source.emit(base, self._const)
        return source.emit_on(base, self._const, pinned)

    def _root(self, source: Source) -> str:
        scope, key = check_root(source, self.arg_names, self.f_globals)
        ns = self.ns
        if scope == "L":
            return f"{self.outer(self.values.mapping, 'L')}[{ns.const(key, 'local')}]"
        return f"{ns.const(self.f_globals, 'G')}[{ns.const(key, 'global')}]"

    def add_all(self, leaves: Sequence[Leaf]) -> None:
        """Add ``leaves`` in order, the leaves of a batching kind as one test where the
        last of them stands ([Note: Batched leaves])."""
        groups: dict[int, list[Leaf]] = {}
        for leaf in leaves:
            kind = leaf.kind
            if kind.batches and not kind.relational and len(leaf.sources) == 1:
                groups.setdefault(id(kind), []).append(leaf)
        last = {id(g[-1]): g for g in groups.values() if len(g) > 1}
        members = {id(leaf) for g in last.values() for leaf in g}
        # how many leaves read each source, itself or below it: a batch member's source
        # that only its own leaf reads is read inside the batch's expression
        self._uses = {}
        for leaf in leaves:
            for source in leaf.sources:
                for s in source.chain():
                    self._uses[s] = self._uses.get(s, 0) + 1
        for leaf in leaves:
            if id(leaf) not in members:
                self.add(leaf)
            elif id(leaf) in last:
                self.add_batch(last[id(leaf)])

    def add_batch(self, group: Sequence[Leaf]) -> None:
        """One test for several leaves of one batching kind ([Note: Batched leaves])."""
        kind = group[0].kind
        params = [leaf.params for leaf in group]
        expr = self._batch_of_attrs(group) if kind.batch_reads_once else None
        if expr is None:
            names = [self._read_once(leaf.sources[0]) if kind.batch_reads_once
                     else self.read(leaf.sources[0]) for leaf in group]
            expr = kind.emit_batch(names, params, self.ns)
        self.code += (f"        if not ({expr}):", "            return False")
        shown = ", ".join(leaf.sources[0].name() for leaf in group)
        self.comments += (f"{kind.name} on {len(group)} values: {shown}", "")

    def _batch_of_attrs(self, group: Sequence[Leaf]) -> Optional[str]:
        """The kind's ``emit_batch_attrs`` when every leaf's source is an attribute read
        that ``_read_once`` would make in place as ``base.attr`` (a plain ``getattr``): the
        bases are read, the attributes handed over unread. None otherwise."""
        bases: list[str] = []
        attrs: list[str] = []
        for leaf in group:
            source = leaf.sources[0]
            member = getattr(source, "member", None)
            if (
                not isinstance(source, AttrSource) or not isinstance(member, str)
                or source in self.values.where or self._uses.get(source, 0) != 1
            ):
                return None
            base = self.read(source.base)
            if source.emit(base, self._const) != f"{base}.{member}":
                return None
            bases.append(base)
            attrs.append(member)
        return group[0].kind.emit_batch_attrs(bases, attrs, [leaf.params for leaf in group],
                                              self.ns)

    def _read_once(self, source: Source) -> str:
        """``source``'s value for a test that uses it once: the read itself, in
        parentheses, when no other leaf of this function reads it or anything under it and
        it is not held yet; else its variable."""
        if (
            isinstance(source, ChainedSource) and source not in self.values.where
            and self._uses.get(source, 0) == 1
        ):
            base = self.read(source.base)
            expr = self._emit(source, base)
            if expr != base:
                return f"({expr})"
        return self.read(source)

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
        if len(sources) == 1 and not kind.relational:
            pinned = kind.pins_type(leaf.params)
            if isinstance(pinned, type) and pinned.__flags__ & _IMMUTABLE_TYPE:
                self._pinned[sources[0]] = pinned
                length = kind.pins_len(leaf.params)
                if (pinned is list or pinned is tuple) and type(length) is int:
                    self._pinned_len[sources[0]] = length


def write_function(
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
    linecache (line for line the code that is compiled): see ``codecache``."""
    head = [code_def, "    try:"]
    tail = [ret, "    except Exception:", "        return False", ""]
    code_text = "\n".join(head + code + tail)
    shown = [c + "  # " + comment(m) if m else c for c, m in zip(code, comments, strict=True)]
    text = "\n".join([shown_def, head[1], *shown, *tail])
    try:
        compiled = compile_generated(code_text, filename, shown=text)
    except SyntaxError as e:  # a bug in a kind's emit, never user input
        raise GuardCompileError(f"generated check does not compile ({e}):\n{text}") from e
    return compiled.function(CODE_NAME, ns, name=fname), text
