"""The facts the array and Triton-style kinds dispatch on, as small pure functions of one
value: ``array_fact`` (ARRAY_MATCH), ``int_class`` (INT_CLASS), ``data_ptr_aligned``
(DATA_PTR_ALIGNED), with ``dtype_key`` (what makes two numpy dtypes the same).

May import: nothing from jitguard.

numpy is never imported here at import time: only when a value that may be an array is
looked at (an ndarray cannot exist before numpy is imported, so a value of any other type
is told apart without it).

# [Note: Array facts]
# These functions are the definition the optional C hot path implements again (and is tested
# for equality against); keep them crisp.
#
# ``array_fact(x, layout=True, aligned=False)`` is the tuple
#     ``(dtype_key(dtype), ndim, layout_code, writeable, aligned_flag)``
# of the array ``a`` that ``x`` is:
#   * ``x`` itself when it is a numpy ndarray (a subclass too: read through ndarray's own
#     descriptors, so a subclass's properties never run);
#   * else, when ``x`` has ``__array_interface__`` (read once): the ndarray numpy makes of
#     that dict alone (a view of the same memory, no copy);
#   * else, when ``x``'s type has ``__dlpack__`` and ``__dlpack_device__``:
#     ``numpy.from_dlpack(x)`` (CPU memory only; numpy raises for other devices);
#   * else it raises ``TypeError``.
# ``ndim`` is ``a.ndim``; from ``a.flags``: ``layout_code`` is ``"C"`` when C-contiguous,
# else ``"F"`` when Fortran-contiguous, else ``"A"`` (numba's array layouts: a 1-d
# contiguous array is "C"), or None when ``layout`` is false; ``writeable`` is the WRITEABLE
# flag; ``aligned_flag`` numpy's ALIGNED flag (data and strides aligned for the dtype), or
# None when ``aligned`` is false. The type of ``x`` is not part of it: ARRAY_MATCH keys on
# ``(id(type(x)), array_fact(x, ...))``.
#
# ``array_token(x, layout=True, aligned=False)`` is ``intern_fact(array_fact(x, layout,
# aligned))``: the one live ``InternedFact`` of that fact. Equal facts give the same object
# and different facts different objects, so a dispatch key holding a token is hashed and
# compared by identity (an object's address), not by walking the nested tuple; the
# dispatcher keys ARRAY_MATCH on ``(id(type(x)), array_token(x, ...))``. The table keeps a
# fact's token while something holds it (a cache entry's key, a cache below), and forgets it
# after: a fact seen again then gets a new token, and no key holds the old one.
# ``array_token`` remembers the token of an exact ndarray by its dtype object and a small
# code of its ndim and the flags the fact reads (``_dtype_keys``), for dtypes without
# metadata or fields anywhere (immutable: see below); any other array computes the fact and
# looks it up in the table on every call. The generated Python dispatcher computes that hot
# path inline (the array kinds' key expression, compiler.array_kinds: the same reads of an
# exact ndarray, ``array_token`` itself for anything else). The C path keeps the same tokens
# in a small table of its own, by the dtype's address (held) and the same code.
#
# ``dtype_key(d)`` is ``(type(d), core, metadata)``: two dtypes are the same exactly when
# their keys are equal. numpy's own ``==`` is looser: it ignores metadata (h5py marks
# variable-length strings by it), the aligned-struct flag, and the dtype class (``'q'`` and
# ``'l'`` are one int64 to it), and compares with strings (``np.dtype('i8') == 'i8'``).
#   * ``type(d)``: the dtype's class (``numpy.dtypes.Float64DType``; ``LongLongDType`` and
#     ``Int64DType`` differ);
#   * ``core``: for a structured dtype ``("struct", itemsize, isalignedstruct, fields)``
#     with ``fields`` a tuple, in field order, of ``(name, dtype_key(field dtype), offset,
#     title)`` (title None when the field has none); for a subarray dtype ``("sub",
#     dtype_key(base), shape)``; for any other dtype of a legacy class its ``str`` (kind,
#     byte order, item size, datetime unit: ``'<f8'``, ``'>i4'``, ``'<M8[ns]'``, ``'|S5'``);
#     for a dtype of a new-style class (``StringDType``) ``(str, d)``: numpy's ``==`` of
#     that class decides its parameters;
#   * ``metadata``: None when the dtype has none (or an empty one), else the tuple of
#     ``(key, type(value), value)`` in the dict's order.
#
# ``int_class(x, divisors=(16,))`` is Triton's specialization of an int: None unless
# ``type(x) is int``; else ``(width, k)``: ``width`` is ``"i32"`` for
# ``-2**31 <= x < 2**31``, else ``"i64"`` for ``-2**63 <= x < 2**63``, else ``"u64"`` for
# ``x < 2**64``, else ``"big"``; ``k`` is 1 when ``x == 1``, else the first ``d`` of
# ``divisors`` (each >= 2) with ``x % d == 0``, else 0.
#
# ``data_ptr_aligned(x, align=16)`` is ``data_pointer(x) % align == 0``, where
# ``data_pointer`` is ``x.data_ptr()`` when ``x``'s type has ``data_ptr`` (torch, Triton's
# convention), else the first element's address of the array ``array_fact`` reads.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, Optional

__all__ = [
    "array_dtype",
    "array_fact",
    "array_token",
    "as_ndarray",
    "data_ptr_aligned",
    "data_pointer",
    "dtype_key",
    "int_class",
    "intern_fact",
    "InternedFact",
    "TOKEN_FUNCTIONS",
    "numpy_or_none",
]


class _NoNumpy:
    """Stands for ``numpy.ndarray`` until numpy is imported: no value has this type."""


_ndarray: Any = _NoNumpy
_get_dtype: Any = None
_get_ndim: Any = None
_get_flags: Any = None
_get_interface: Any = None


def numpy_or_none() -> Any:
    """numpy when it is imported (never importing it), else None."""
    np = sys.modules.get("numpy")
    if np is not None and _ndarray is _NoNumpy:
        _bind(np)
    return np


def _numpy() -> Any:
    import numpy

    if _ndarray is _NoNumpy:
        _bind(numpy)
    return numpy


def _bind(np: Any) -> None:
    global _ndarray, _get_dtype, _get_ndim, _get_flags, _get_interface
    nd = np.ndarray
    _get_dtype = nd.__dict__["dtype"].__get__
    _get_ndim = nd.__dict__["ndim"].__get__
    _get_flags = nd.__dict__["flags"].__get__
    _get_interface = nd.__dict__["__array_interface__"].__get__
    _ndarray = nd


# ---- dtypes ----------------------------------------------------------------------------

# id(dtype) -> (dtype, key, tokens), for dtypes without metadata or fields anywhere (such a
# dtype is immutable; it is held here so its id stays its own); ``tokens``: the code of an
# array's ndim and flags (``_code``) -> its ``array_token`` with this dtype. Cleared when it
# grows past _DTYPE_CACHE_MAX. A structured dtype is never cached: its field names can be
# assigned in place (``d.names = ...``), which would leave a cached key stale. The C path
# reads this dict ([Note: The C hot path]).
_dtype_keys: dict[int, tuple[Any, tuple[Any, ...], dict[int, Any]]] = {}
_DTYPE_CACHE_MAX = 4096


def _metadata(d: Any) -> Optional[tuple[Any, ...]]:
    md = d.metadata
    if not md:
        return None
    return tuple((k, type(v), v) for k, v in md.items())


def _key(d: Any) -> tuple[tuple[Any, ...], bool]:
    """(dtype_key(d), whether it may change in place: metadata or fields anywhere in it)."""
    meta = _metadata(d)
    has_meta = meta is not None
    names = d.names
    if names is not None:
        has_meta = True  # d.names can be assigned: a mutable key, never cached
        fields = []
        for name in names:
            spec = d.fields[name]
            sub, sub_meta = _key(spec[0])
            has_meta = has_meta or sub_meta
            fields.append((name, sub, spec[1], spec[2] if len(spec) > 2 else None))
        core: Any = ("struct", d.itemsize, d.isalignedstruct, tuple(fields))
    elif d.subdtype is not None:
        base, shape = d.subdtype
        sub, sub_meta = _key(base)
        has_meta = has_meta or sub_meta
        core = ("sub", sub, tuple(shape))
    elif getattr(type(d), "_legacy", True):
        core = d.str
    else:
        core = (d.str, d)
    return (type(d), core, meta), has_meta


def dtype_key(d: Any) -> tuple[Any, ...]:
    """The identity of a numpy dtype ([Note: Array facts]): equal keys, same dtype."""
    hit = _dtype_keys.get(id(d))
    if hit is not None and hit[0] is d:
        return hit[1]
    key, has_meta = _key(d)
    if not has_meta:  # metadata values and field names can change in place: never cached
        if len(_dtype_keys) >= _DTYPE_CACHE_MAX:
            _dtype_keys.clear()
        _dtype_keys[id(d)] = (d, key, {})
    return key


# ---- interned facts --------------------------------------------------------------------


class InternedFact:
    """One fact, interned by ``intern_fact``: while it lives it is the only token of its
    fact, so tokens are compared and hashed by identity ([Note: Array facts])."""

    __slots__ = ("__weakref__", "fact")

    def __init__(self, fact: tuple[Any, ...]) -> None:
        self.fact = fact

    def __repr__(self) -> str:
        return f"InternedFact({self.fact!r})"

    def __reduce__(self) -> Any:  # another process interns it again
        return (intern_fact, (self.fact,))


# fact -> a weak reference to its token; a token's death takes its row out.
_interned: dict[tuple[Any, ...], weakref.ref[InternedFact]] = {}
# Held by the two writers of a row that must see it unchanged between a read and a write:
# a dying token's callback (is the row still mine? then delete it) and ``intern_fact``
# replacing a dead row. Unlocked, the callback could delete the row another thread had just
# made for a new token: a second token of that fact would follow, and the keys made with
# the first would never be hit again. The lookup of a live token takes no lock. Reentrant:
# the callback may run inside ``intern_fact`` on its own thread (a collection there).
_intern_lock = threading.RLock()


def _forget(fact: tuple[Any, ...]) -> Callable[[weakref.ref[InternedFact]], None]:
    """The callback that takes ``fact``'s row out when its token dies (the row's own)."""

    def drop(ref: weakref.ref[InternedFact]) -> None:
        with _intern_lock:
            if _interned.get(fact) is ref:
                del _interned[fact]

    return drop


def intern_fact(fact: tuple[Any, ...]) -> InternedFact:
    """The token of ``fact``: the same object for equal facts while it lives."""
    ref = _interned.get(fact)
    token = ref() if ref is not None else None
    if token is not None:
        return token
    token = InternedFact(fact)
    new = weakref.ref(token, _forget(fact))
    with _intern_lock:
        ref = _interned.setdefault(fact, new)  # another thread's live token wins
        found = ref()
        if found is not None:
            return found
        _interned[fact] = new  # a dead row whose callback has not run yet
        return token


# ---- arrays ----------------------------------------------------------------------------

_LAYOUTS = ("A", "C", "F", "C")  # by the flags' C_CONTIGUOUS (1) and F_CONTIGUOUS (2) bits
_ALIGNED = 0x100
_WRITEABLE = 0x400
_DLPACK_CPU = 1  # kDLCPU


class _Interface:
    """An object that is nothing but an ``__array_interface__`` dict."""

    __slots__ = ("__array_interface__",)

    def __init__(self, interface: dict[str, Any]) -> None:
        self.__array_interface__ = interface


def as_ndarray(x: Any) -> Any:
    """The ndarray ``array_fact`` reads for ``x`` ([Note: Array facts]); TypeError if none."""
    np = numpy_or_none()
    tp = type(x)
    if np is not None and issubclass(tp, _ndarray):  # the real type: __class__ may lie
        return x
    try:
        interface = x.__array_interface__
    except AttributeError:
        interface = None
    if interface is not None:
        if type(interface) is not dict:
            raise TypeError(f"its __array_interface__ is a {type(interface).__name__}, not a dict")
        return _numpy().asarray(_Interface(interface))
    if hasattr(tp, "__dlpack__") and hasattr(tp, "__dlpack_device__"):
        device = x.__dlpack_device__()
        if device[0] != _DLPACK_CPU:
            raise TypeError(f"its DLPack device is {tuple(device)!r}, not the CPU (1, 0)")
        return _numpy().from_dlpack(x)
    raise TypeError(
        f"a {tp.__qualname__} is not an array: no numpy ndarray, __array_interface__ or "
        f"DLPack (__dlpack__ and __dlpack_device__)"
    )


def array_dtype(x: Any) -> Any:
    """The dtype of the array ``x`` is ([Note: Array facts]), read as ``array_fact`` does."""
    a = as_ndarray(x)  # binds the ndarray descriptors on first use
    return _get_dtype(a)


def _fact(d: Any, nd: int, flags: int, layout: bool, aligned: bool) -> tuple[Any, ...]:
    return (
        dtype_key(d),
        nd,
        _LAYOUTS[flags & 3] if layout else None,
        (flags & _WRITEABLE) != 0,
        (flags & _ALIGNED) != 0 if aligned else None,
    )


def array_fact(x: Any, layout: bool = True, aligned: bool = False) -> tuple[Any, ...]:
    """``(dtype_key, ndim, layout_code, writeable, aligned_flag)`` of the array ``x`` is, as
    [Note: Array facts] defines it; TypeError when ``x`` is no array."""
    if type(x) is _ndarray:  # the hot path, inlined: dtype_key's cache, _fact
        d = x.dtype
        hit = _dtype_keys.get(id(d))
        key = hit[1] if hit is not None and hit[0] is d else dtype_key(d)
        flags = x.flags.num
        return (key, x.ndim, _LAYOUTS[flags & 3] if layout else None,
                (flags & _WRITEABLE) != 0, (flags & _ALIGNED) != 0 if aligned else None)
    a = as_ndarray(x)
    return _fact(_get_dtype(a), _get_ndim(a), _get_flags(a).num, layout, aligned)


# The flags a fact reads, by ``sel`` = layout | aligned << 1: WRITEABLE, the contiguity bits
# with ``layout``, ALIGNED with ``aligned``. A code is ``flags & mask | sel << 4 | ndim << 16``
# (bits 4-5 are never in a mask): one code, one fact, for one (immutable) dtype. The C path
# computes the same codes (_speedups/tokens.c.h).
_MASKS = (_WRITEABLE, _WRITEABLE | 3, _WRITEABLE | _ALIGNED, _WRITEABLE | _ALIGNED | 3)
MASKS = _MASKS  # the dispatcher's inline copy of array_token's hot path uses them too


def dtype_cache() -> dict[int, tuple[Any, tuple[Any, ...], dict[int, Any]]]:
    """The dtype cache itself (``id(dtype) -> (dtype, key, tokens)``; cleared, never
    rebound), which the dispatcher's inline copy of array_token's hot path reads."""
    return _dtype_keys


def _token_slow(x: Any, layout: bool, aligned: bool) -> InternedFact:
    """``array_token`` computed: the fact, interned, and remembered for its dtype."""
    a = as_ndarray(x)
    d, nd, flags = _get_dtype(a), _get_ndim(a), _get_flags(a).num
    token = intern_fact(_fact(d, nd, flags, layout, aligned))
    hit = _dtype_keys.get(id(d))
    if hit is not None and hit[0] is d:  # an immutable dtype (_fact cached its key)
        sel = (1 if layout else 0) | (2 if aligned else 0)
        hit[2][(flags & _MASKS[sel]) | sel << 4 | nd << 16] = token
    return token


def _token_function(layout: bool, aligned: bool) -> Callable[[Any], InternedFact]:
    """``array_token(x, layout, aligned)`` as a function of ``x`` alone (the dispatcher
    calls it with one argument, its options and code bits bound)."""
    sel = (1 if layout else 0) | (2 if aligned else 0)
    mask, tag = _MASKS[sel], sel << 4

    def token(x: Any) -> InternedFact:
        if type(x) is _ndarray:  # the hot path: two dict lookups by small ints
            d = x.dtype
            hit = _dtype_keys.get(id(d))
            if hit is not None and hit[0] is d:
                found = hit[2].get((x.flags.num & mask) | tag | x.ndim << 16)
                if found is not None:
                    return found
        return _token_slow(x, layout, aligned)

    token.__name__ = token.__qualname__ = f"array_token_{'layout' if layout else 'any'}" + (
        "_aligned" if aligned else "")
    return token


# (layout, aligned) -> array_token with those options, a function of the value alone.
TOKEN_FUNCTIONS = {(layout, aligned): _token_function(layout, aligned)
                   for layout in (True, False) for aligned in (False, True)}


def array_token(x: Any, layout: bool = True, aligned: bool = False) -> InternedFact:
    """``intern_fact(array_fact(x, layout, aligned))``, the dispatch key of ARRAY_MATCH
    ([Note: Array facts]); TypeError when ``x`` is no array."""
    return TOKEN_FUNCTIONS[bool(layout), bool(aligned)](x)


# ---- Triton's classes ------------------------------------------------------------------


def int_class(x: Any, divisors: tuple[int, ...] = (16,)) -> Optional[tuple[str, int]]:
    """Triton's class of an int ([Note: Array facts]): ``(width, k)``, None for a non-int."""
    if type(x) is not int:
        return None
    if -0x8000_0000 <= x <= 0x7FFF_FFFF:
        width = "i32"
    elif -0x8000_0000_0000_0000 <= x <= 0x7FFF_FFFF_FFFF_FFFF:
        width = "i64"
    elif 0 <= x <= 0xFFFF_FFFF_FFFF_FFFF:
        width = "u64"
    else:
        width = "big"
    if x == 1:
        return (width, 1)
    for d in divisors:
        if x % d == 0:
            return (width, d)
    return (width, 0)


# [Note: Reading an ndarray's data pointer]
# Python offers no cheap read of an ndarray's data pointer (``__array_interface__`` builds a
# dict, ``ctypes.data`` an object: about 1-2 us). The pointer is the first field after the
# object header of numpy's array struct (``PyArrayObject_fields.data``, stable public ABI),
# so it is read there with ctypes, at ``id(a) + object.__basicsize__``. The offset is
# checked once against ``__array_interface__`` on a fresh array; if it disagrees (another
# interpreter's object layout), every read goes through ``__array_interface__``.
_PTR_OFFSET = object.__basicsize__
_ptr_at = ctypes.c_void_p.from_address
_ptr_checked: Optional[bool] = None


def _check_offset() -> bool:
    global _ptr_checked
    np = _numpy()
    probe = np.arange(4, dtype=np.int64)[1:]
    _ptr_checked = _ptr_at(id(probe) + _PTR_OFFSET).value == _get_interface(probe)["data"][0]
    return _ptr_checked


def data_pointer(x: Any) -> int:
    """The address of the first element of ``x`` ([Note: Array facts])."""
    tp = type(x)
    if hasattr(tp, "data_ptr"):
        ptr = x.data_ptr()
        if type(ptr) is not int:
            raise TypeError(f"data_ptr() returned a {type(ptr).__name__}, not an int")
        return ptr
    a = as_ndarray(x)
    if _ptr_checked or (_ptr_checked is None and _check_offset()):
        return _ptr_at(id(a) + _PTR_OFFSET).value or 0
    return int(_get_interface(a)["data"][0])


def data_ptr_aligned(x: Any, align: int = 16) -> bool:
    """Whether ``x``'s data pointer is a multiple of ``align`` ([Note: Array facts])."""
    return data_pointer(x) % align == 0
