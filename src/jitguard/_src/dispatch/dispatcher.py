"""The layout of index keys and the code generated for it: the dispatcher (the specialized
function itself) and the careful key function.

May import: compiler.codecache, dispatch.signature, dispatch.entry, dispatch.layout, dispatch.fast.

The layouts and the key expressions themselves are made in ``dispatch.layout``; the optional C
hot path in ``dispatch.fast`` ([Note: The C hot path]).

# [Note: Key layout]
# Keys are laid out per snapshot (``Layout``) to keep the hit path short:
#   * a typed fact ("value": type and value; "type"; "type_len"; "type_keys") whose type
#     is the same in every keyed entry is *hoisted*: the dispatcher first tests
#     ``type(v) is T`` (builtin scalar types of "value" facts) or ``id(type(v)) == id(T)``
#     (other types, held only by id so a local class can still die), and the key holds
#     only the rest (the value itself, the length, the keys). A call that fails a
#     precondition has no key: no keyed entry can hold;
#   * otherwise the type is part of the key as ``id(type(v))``; type objects themselves
#     are never compared with ``==`` or hashed, so no metaclass can fake a match; a part
#     that runs the value's own code has a precondition on the type's id (a "value" part
#     ``v`` is hashed only for builtin scalars, a "type_len" part ``len(v)`` computed only
#     for the keyed entries' types): the dispatcher must not call a ``__hash__`` or
#     ``__len__`` that no guard would call;
#   * a key of one part is that part (``I[n]``), else a tuple, except in the exact variant,
#     where the index is nested one dict per part (``I[a][b]``: no tuple is built or
#     hashed on a hit);
#   * when no entry is linear and every first candidate needs no residual, the dispatcher
#     is the *exact* variant: ``I[key]``, count, call; no residual is read, and a key miss
#     goes straight to the miss path. Otherwise a key miss is an ordinary hit on the first
#     linear entry, so the lookup is ``I.get(key) or I[LINEAR]`` (raising and catching a
#     KeyError would cost more than the whole rest of the call). When the first
#     candidate's residual fails, the dispatcher goes on through that key's *followers*
#     (``I[FOLLOWERS][key]``, or those of ``LINEAR``): the remaining candidates in rank
#     order, each with its own residual (a keyed entry's residual drops what the key
#     proves, a linear entry's is its whole check). So a call for the second entry of a
#     key (a dynamic entry behind a static one) is a hit too, not a trip to the miss path.
#   * a dim on a derived source (``L['x'].dtype``, ``L['t'][0]``; [Note: Facts of an
#     entry]) is read by the dispatcher with the code the check itself reads it with
#     (``source.emit``), one link at a time, each link only when the exact type of the
#     value below it is one a keyed entry pins there (``Layout.bases``: the ids of those
#     types, per source): ``r = x.dtype if id(type(x)) in B else NOKEY``. A keyed entry's
#     check reads that link after its own test of that type, so no attribute hook,
#     property, ``__getitem__`` runs here that a guard would not run on a value of that
#     type; a value of another type (and ``NOKEY`` itself) gives ``NOKEY``, which no entry
#     has: the call has no key. The reads are inside the ``try``, with the preconditions
#     after them (a read that raises also means no key: no keyed entry's check holds when
#     reading its source raises). With no derived dim the code is as above.
#   * a union dim ([Note: Union dims]) is one key part computed by a chain of type tests,
#     each fact's code only for the types chosen for it; it is never hoisted. Everything a
#     layout is (its dims with their facts, sources and unions, the hoisted types, the
#     gates, ``bases``) is plain data on ``Layout``, so another implementation of the hot
#     path can follow it, and forward what it does not know to this code.
"""

from __future__ import annotations

import collections
import itertools
import types
import weakref
from collections.abc import Callable
from typing import Any, Optional

from ..compiler.codecache import compile_generated, forget, generated_filename
from . import fast
from .entry import MISS_SLOT, CacheEntry, Slot
from .layout import Layout, compute_layout, key_code, reads_code, static_type, type_keyed, typed_of
from .signature import Signature

__all__ = [
    "FOLLOWERS", "LINEAR", "NOKEY", "Dispatcher", "KeyCode", "Layout", "compute_layout",
    "empty_index",
]


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


# The index key of the first linear entry, and key_of's "this call has no key".
LINEAR = _Sentinel("LINEAR")
NOKEY = _Sentinel("NOKEY")
# The index key of the followers: key -> the slots after that key's first candidate, in
# rank order (``LINEAR`` -> the linear entries after the first). See [Note: Key layout].
FOLLOWERS = _Sentinel("FOLLOWERS")


def empty_index() -> dict[Any, Any]:
    """An index in which every call misses."""
    return {LINEAR: MISS_SLOT, FOLLOWERS: {LINEAR: ()}}

KEEP_GENERATIONS = 4  # dispatcher generations whose source stays in linecache


class KeyCode:
    """The generated code for one layout: ``key_of(*values)`` (the call's key, or ``NOKEY``
    when it has none), ``entry_key(entry)`` (an entry's key, or ``NOKEY``), and the
    dispatcher's code object."""

    def __init__(self, layout: Layout, generation: int, key_of: Callable[..., Any], code: Any,
                 index_name: str, nested: bool = False, source: str = "",
                 filename: str = "", type_keys: tuple[bool, ...] = ()) -> None:
        self.source = source
        # Per dim: keyed on the type object, not its id ([Note: Static types in the
        # generated dispatcher]).
        self.type_keys = type_keys
        self.filename = filename
        self.layout = layout
        self.nested = nested
        self.dims = layout.dims
        self.generation = generation
        self.key_of = key_of
        self.code = code
        self.index_name = index_name

    def shape(self, index: dict[Any, Slot]) -> dict[Any, Any]:
        """The index as the dispatcher reads it: flat (key -> slot), or for a nested layout
        one dict level per key part (``{a: {b: slot}}``)."""
        if not self.nested:
            return index
        out: dict[Any, Any] = {}
        for key, slot in index.items():
            level = out
            for part in key[:-1]:
                level = level.setdefault(part, {})
            level[key[-1]] = slot
        return out

    def fits(self, entry: CacheEntry) -> bool:
        """True if adding ``entry`` leaves this layout as it is, as far as the entry's own
        facts go: it has every dim, its type where one is hoisted, and each type gate (the
        types the generated code lets through to a key part) holds its type. The caller
        decides exactness ([Note: Updating a snapshot in place])."""
        layout = self.layout
        for base, gate in layout.bases:
            if entry.pins.get(base) not in gate:
                return False
        for k, dim in enumerate(layout.dims):
            if dim.union is not None:
                if entry.union_part(dim) is None:
                    return False
                continue
            comps = entry.facts.get(dim)
            if comps is None:
                return False
            hoisted = layout.hoisted[k]
            if hoisted is not None:
                if comps[0] is not hoisted[1] and comps[0] != hoisted[1]:
                    return False
            elif typed_of(dim) and layout.types is not None:
                first = id(comps[0]) if typed_of(dim) == "type" else comps[0]
                if first not in layout.types[k]:
                    return False
        return True

    def store(self, index: dict[Any, Any], key: Any, slot: Slot) -> None:
        """Put ``slot`` under ``key`` in an index shaped by ``shape``, with one store that a
        reader can see (a new nested level is filled before it is linked in)."""
        if not self.nested:
            index[key] = slot
            return
        level = index
        for i, part in enumerate(key[:-1]):
            below = level.get(part)
            if below is None:
                built: Any = slot
                for inner in reversed(key[i + 1:]):
                    built = {inner: built}
                level[part] = built
                return
            level = below
        level[key[-1]] = slot

    def remove(self, index: dict[Any, Any], key: Any) -> None:
        """Take ``key`` out of an index shaped by ``shape`` (emptied nested levels too)."""
        if not self.nested:
            index.pop(key, None)
            return
        path: list[tuple[dict[Any, Any], Any]] = []
        level = index
        for part in key[:-1]:
            below = level.get(part)
            if below is None:
                return
            path.append((level, part))
            level = below
        level.pop(key[-1], None)
        for parent, part in reversed(path):
            if parent[part]:
                break
            del parent[part]

    def entry_key(self, entry: CacheEntry) -> Any:
        """``entry``'s key as ``key_of`` computes it for a call ``entry`` holds on, from
        ``entry.key_parts`` (NOKEY: it has none in this layout)."""
        components = entry.key_parts(self.layout.dims)
        if components is None:
            return NOKEY
        parts: list[Any] = []
        type_keys = self.type_keys
        for k, (dim, hoisted, comps) in enumerate(zip(self.layout.dims, self.layout.hoisted,
                                                      components, strict=True)):
            if dim.union is not None:
                parts.append(comps[0])
            elif hoisted is not None:
                if comps[0] is not hoisted[1] and comps[0] != hoisted[1]:
                    return NOKEY
                parts.extend(comps[1:])
            elif k < len(type_keys) and type_keys[k]:
                static = static_type(comps[0])
                if static is None or len(comps) != 1:
                    return NOKEY
                parts.append(static)
            elif typed_of(dim) == "type":
                parts.extend((id(comps[0]), *comps[1:]))
            else:
                parts.extend(comps)
        return parts[0] if len(parts) == 1 else tuple(parts)


class Dispatcher:
    """Owns the generated function that *is* the specialized function, and its namespace.

    ``keycode(layout)`` returns the generated code for a layout (compiling a new
    generation when it changes); ``install(keycode, index)`` publishes a snapshot's index,
    swapping the function's ``__code__`` when its generation is not the installed one.
    ``source`` is the dispatcher's current source text. ``public`` is what ``specialize``
    returns: the C ``Dispatch`` object in front of ``function`` when the C hot path is on
    (``fast``; [Note: The C hot path]), else ``function`` itself.
    """

    def __init__(self, sig: Signature, name: str, miss: Callable[..., Any], *,
                 tick: Optional[Callable[[], int]] = None,
                 watch: tuple[types.FunctionType, ...] = ()) -> None:
        self.sig = sig
        p = sig.prefix
        # [Note: A replaced __code__]: every call first compares the ``__code__`` of each
        # watched function with the code the entries were compiled from, and goes to the
        # miss path when one differs.
        self.watch = watch
        # With ``tick`` (a cache with ``maxsize``), every hit stamps its slot with the time of
        # use, so that the least recently used entry can be evicted.
        self.lru = tick is not None
        self.name = name if name.isidentifier() else "specialized"
        self.fast: Optional[Any] = None  # set below, once the first generation is made
        self.ns: dict[str, Any] = dict(sig.namespace)
        self.ns.update(
            {f"{p}miss": miss, f"{p}type": type, f"{p}id": id, f"{p}len": len,
             f"{p}tuple": tuple, f"{p}dict": dict, f"{p}hash": hash, f"{p}LINEAR": LINEAR,
             f"{p}NOKEY": NOKEY, f"{p}FOLLOWERS": FOLLOWERS, f"{p}Exception": Exception,
             f"{p}KeyError": KeyError,
             f"{p}tick": tick}
        )
        self.ns.update({f"{p}FN{i or ''}": f for i, f in enumerate(watch)})
        self._generations = itertools.count()
        self._current: Optional[KeyCode] = None
        # The last few generations: their source stays in linecache (a call still running
        # in an older generation's code can show its lines), older ones let go.
        self._recent: collections.deque[KeyCode] = collections.deque(maxlen=KEEP_GENERATIONS)
        first = self.keycode(Layout((), (), False))
        self.ns[first.index_name] = empty_index()
        self.function: Callable[..., Any] = self.ns[f"{p}fn{first.generation}"]
        self.function.__code__ = first.code
        self._current = first
        # ---- the C hot path ([Note: The C hot path]): a separate hook, see install ----
        self.tick = tick
        self.fast = fast.wrap(self.function, sig, miss)
        self.public: Callable[..., Any] = self.fast if self.fast is not None else self.function
        self._install_fast(first, self.ns[first.index_name])
        if watch:
            self.watch_code(tuple(f.__code__ for f in watch))

    def watch_code(self, codes: tuple[types.CodeType, ...]) -> None:
        """Serve calls from the entries while the ``__code__`` of each watched function is
        the one of ``codes`` ([Note: A replaced __code__])."""
        assert len(codes) == len(self.watch) > 0
        self.ns.update({f"{self.sig.prefix}CODE{i or ''}": c for i, c in enumerate(codes)})
        if self.fast is not None:
            self.fast._watch(self.watch[0], codes[0], self.watch[1:], codes[1:])

    def keycode(self, layout: Layout) -> KeyCode:
        current = self._current
        if current is not None and current.layout == layout:
            return current
        return self._generate(layout)

    def _generate(self, layout: Layout) -> KeyCode:
        """The generated code of ``layout``: the dispatcher ``fn<generation>`` and its
        careful key function.

        Over 80 lines: one generated dispatcher, written top to bottom in the order its code
        runs, each variant's lines beside the others'."""
        sig, p = self.sig, self.sig.prefix
        g = next(self._generations)
        reads, names = reads_code(layout, p, g, self.ns)
        # Type objects as keys only where no C State reads the index (it computes ids).
        type_keys = type_keyed(layout) if self.fast is None else ()
        pre, parts, key = key_code(layout, p, g, self.ns, names, type_keys)
        nested = layout.exact and len(parts) > 1
        index = f"{p}index{g}"
        s, r, k, values = f"{p}s", f"{p}r", f"{p}k", sig.values
        # Every name the code reads is prefixed: a parameter may be called ``Exception``.
        exc = f"{p}Exception"
        dims = ", ".join(f"{d.shown}:{d.fact}" for d in layout.dims)
        lines: list[str] = []

        def put(depth: int, code: str, comment: str = "") -> None:
            text = "    " * depth + code
            lines.append(f"{text:<60}  # {comment}" if comment else text)

        def hit(depth: int) -> None:
            put(depth, f"{s}.hits += 1", "count the hit on the entry's slot")
            if self.lru:
                put(depth, f"{s}.last = {p}tick()", "when it was last used (maxsize: LRU)")
            # Read as an attribute, then called: a slot attribute is no method, and the
            # interpreter reads an attribute faster than it looks a method up.
            put(depth, f"{p}a = {s}.artifact", "read as an attribute (no method lookup)")
            put(depth, f"return {p}a({sig.call})", "call the entry's artifact")

        def linear(depth: int, why: str) -> None:
            put(depth, f"{k} = {p}LINEAR", why)
            put(depth, f"{s} = {index}[{p}LINEAR]", "the first entry that has no key")

        def miss(depth: int, why: str) -> None:
            put(depth, f"return {p}miss({values})", why)

        put(0, f"def {p}fn{g}({sig.header}):",
            f"dispatcher generation {g}, dims [{dims or 'none'}]"
            + (", exact" if layout.exact else ""))
        for line in sig.fill.splitlines():  # defaults read at call time
            put(0, line, "a default read at call time")
        if self.watch:
            test = " or ".join(f"{p}FN{i or ''}.__code__ is not {p}CODE{i or ''}"
                               for i in range(len(self.watch)))
            put(1, f"if {test}:", "fn's __code__ (or a wrapped one's) was replaced")
            miss(2, "the careful path, which starts the cache over")
        depth = 1
        if reads:
            # Derived dims: the gated reads, then the preconditions on what they read, all
            # inside the ``try`` (a read may raise) ([Note: Key layout]).
            put(1, "try:", "reading the derived sources may raise: no key")
            for code, comment in reads:
                put(2, code, comment)
            test = " and ".join(pre)
            if layout.exact:
                lookup = "".join(f"[{part}]" for part in parts) if nested else f"[{key}]"
                put(2, f"if not ({test}):", "not the types every keyed entry has")
                put(3, f"raise {p}KeyError", "no key: the careful path")
                put(2, f"{s} = {index}{lookup}",
                    "the slot of the call's key; a key match proves every guard")
                put(1, f"except {exc}:", "no entry has this key (or it cannot be computed)")
                miss(2, "the careful path, which compiles")
                hit(1)
            else:
                put(2, f"if {test}:", "the types every keyed entry has")
                put(3, f"{k} = {key}", "the call's key")
                put(3, f"{s} = {index}.get({k}) or {index}[{p}LINEAR]",
                    "the key's first candidate, else the first linear entry")
                put(2, "else:", "a call of another type has no key")
                linear(3, "no keyed entry can hold")
                put(1, f"except {exc}:", "the key cannot be computed")
                linear(2, "no keyed entry can hold")
        else:
            if pre:
                put(1, f"if {' and '.join(pre)}:",
                    "the types every keyed entry has (else the call has no key)")
                depth = 2
            if not layout.dims:
                linear(1, "no dims: every entry is tried in rank order")
            elif layout.exact:
                # Nested dicts (``I[a][b]``) build no tuple and hash no tuple: faster per part.
                lookup = "".join(f"[{part}]" for part in parts) if nested else f"[{key}]"
                put(depth, "try:", "a key no entry has raises KeyError")
                put(depth + 1, f"{s} = {index}{lookup}",
                    "the slot of the call's key; a key match proves every guard")
                put(depth, f"except {exc}:", "no entry has this key (or it cannot be computed)")
                miss(depth + 1, "the careful path, which compiles")
            else:
                put(depth, "try:", "computing the key may raise (unhashable, no len)")
                put(depth + 1, f"{k} = {key}", "the call's key")
                # ``get``, not ``[]``: here a key miss is an ordinary hit on the first linear
                # entry, and raising KeyError would cost more than the rest of the call.
                put(depth + 1, f"{s} = {index}.get({k}) or {index}[{p}LINEAR]",
                    "the key's first candidate, else the first linear entry")
                put(depth, f"except {exc}:", "the key cannot be computed")
                linear(depth + 1, "no keyed entry can hold")
            if pre and layout.dims:
                put(1, "else:", "a call of another type has no key")
                if layout.exact:
                    miss(2, "no entry can hold: the careful path")
                else:
                    linear(2, "no keyed entry can hold")
            if layout.exact:
                hit(1)
        if not layout.exact:
            f = f"{p}f"
            put(1, f"{r} = {s}.residual", "what the key match does not prove of its guards")
            put(1, f"if {r} is None or {r}({values}):", "None: nothing left to check")
            hit(2)
            put(1, f"{f} = {index}[{p}FOLLOWERS]", "the other candidates of each key")
            put(1, f"for {s} in {f}.get({k}) or {f}[{p}LINEAR]:", "in rank order")
            put(2, f"{r} = {s}.residual", "this candidate's own residual check")
            put(2, f"if {r} is None or {r}({values}):", "it holds: a hit")
            hit(3)
            miss(1, "no candidate holds: the careful path (which may compile)")
        put(0, f"def {p}key{g}({values}):", "the call's key, for the careful path")
        put(1, "try:", "a key that cannot be computed is no key")
        for code, comment in reads:
            put(2, code, comment)
        if pre:
            put(2, f"if not ({' and '.join(pre)}):", "the hoisted types")
            put(3, f"return {p}NOKEY", "no key: only linear entries can hold")
        put(2, f"{p}k = {key}", "the key, as the dispatcher computes it")
        put(2, f"{p}hash({p}k)", "a key that cannot be hashed is no key")
        put(2, f"return {p}k", "the key")
        put(1, f"except {exc}:", "anything raised while computing it")
        put(2, f"return {p}NOKEY", "no key")
        text = "\n".join(lines) + "\n"
        filename = generated_filename(f"dispatch {self.name}")
        # Registered in linecache and logged at DEBUG (``jitguard.codegen``) there.
        compile_generated(text, filename).run(self.ns)
        # one name per function, so interning it for good on 3.13 costs nothing that grows
        # ([Note: Code names on 3.13])
        code = self.ns[f"{p}fn{g}"].__code__.replace(co_name=self.name)
        if g > 0:
            del self.ns[f"{p}fn{g}"]
        keycode = KeyCode(layout, g, self.ns.pop(f"{p}key{g}"), code, index, nested, text,
                          filename, type_keys)
        # The source stays readable while this generation is among the last few.
        weakref.finalize(keycode, forget, filename)
        self._recent.append(keycode)
        return keycode

    def install(self, keycode: KeyCode, index: dict[Any, Slot]) -> None:
        """Publish a snapshot's index: one store, plus a code swap if the layout changed
        (the old index is replaced by one that always misses)."""
        self.ns[keycode.index_name] = index
        old = self._current
        if old is not keycode:
            # A ``__code__`` the user assigned stays ([Note: One answer from both modes]).
            if old is None or self.function.__code__ is old.code:
                self.function.__code__ = keycode.code
            self._current = keycode
            if old is not None and old.index_name != keycode.index_name:
                self.ns[old.index_name] = empty_index()
        self._install_fast(keycode, index)

    def _install_fast(self, keycode: KeyCode, index: dict[Any, Any]) -> None:
        """The C hot path's side of ``install``: the same layout and index dict."""
        if self.fast is not None:
            # While the user's ``__code__`` is in place, every call runs it, as in the
            # pure-Python mode ([Note: One answer from both modes]).
            own = self.function.__code__ is keycode.code
            fast.install(self.fast, fast.state_for(keycode.layout, keycode.nested, index,
                                                   LINEAR, FOLLOWERS, self.tick) if own else None)

    @property
    def c_path(self) -> bool:
        """Whether calls go through the C hot path first ([Note: The C hot path])."""
        return self.fast is not None

    @property
    def source(self) -> str:
        """The source text of the dispatcher now installed, commented line by line (also in
        ``linecache`` under ``filename``, so tracebacks and pdb show it)."""
        current = self._current
        return current.source if current is not None else ""

    @property
    def filename(self) -> str:
        """The ``linecache`` name of the installed dispatcher's source."""
        current = self._current
        return current.filename if current is not None else ""

    @property
    def generation(self) -> int:
        """How many times the dispatcher's code was generated before the one installed (a
        new generation comes with a new key layout)."""
        current = self._current
        return current.generation if current is not None else -1
