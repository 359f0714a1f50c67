"""The optional C hot path of the dispatcher (``jitguard._src._speedups.ext``): loading it, and
compiling a key layout into the codes its ``State`` reads.

May import: _util, native, compiler.kinds, compiler.array_facts, compiler.array_kinds,
compiler.builtin_kinds, dispatch.facts, dispatch.entry, dispatch.signature.

# [Note: The C hot path]
# When the extension ``jitguard._src._speedups.ext`` is built (setup.py builds it when a
# compiler is there; it is optional) and ``JITGUARD_PURE_PYTHON`` is not ``1``, a
# specialized function whose parameters are all positional (no ``*args``, keyword-only
# or ``**kwargs``) is a C ``Dispatch`` object in front of the generated dispatcher (the
# *fallback*, still the single source of truth): one C call computes the key, finds the
# slot, counts the hit (``slot.hits``, and ``slot.last`` with ``maxsize``, the very fields
# the Python dispatcher updates) and calls the artifact. In a layout that is not exact it
# runs the generated code's loop itself: the first candidate's residual check, then the
# key's followers' (``I[FOLLOWERS].get(k) or I[FOLLOWERS][LINEAR]``; a call whose type
# fails a precondition has the key ``LINEAR``), then the miss path (``FunctionCache._miss``)
# with the values, so that no residual ever runs twice. A call is *forwarded* to the
# fallback, arguments untouched, only before any Python code has run: keywords or another
# number of arguments (so every parameter is given: no default is read, whatever was added
# or changed since, [Note: Defaults are read at call time]), ``fn.__code__`` replaced since
# the entries were compiled ([Note: A replaced __code__]), the specialized function's own
# ``__code__`` assigned ([Note: One answer from both modes]), the ``DEFAULT`` sentinel passed
# by hand, a miss or failed precondition in an exact layout, a key part the C code does not
# compute for that value, a layout the codes cannot express (a ``fact_of`` dim, a derived
# source's fact, a part that would run code of the value's type). Before that point nothing
# observable has happened: the C side only reads types, ids and struct fields, hashes
# builtin scalars and ints and compares them (``[Note: Key layout]``'s preconditions are
# followed exactly: a value is hashed only when its type is a builtin scalar type, ``len``
# is taken only of builtin containers), and moves no counter.
# Soundness is the Python dispatcher's: ``state_for`` compiles the same layout the
# generated code was generated from (hoisted types compared by address, held by id only as
# the Python side holds them, so a local class can die), and ``Dispatcher.install`` swaps
# the ``State`` on every publication; the ``State`` holds the snapshot's index dict itself,
# so an update in place ([Note: Updating a snapshot in place]) is seen by both paths at
# once. A dying entry kills its slots (residual ``never``, artifact the redirect), which the
# C path sees as the Python one does. Threads: the GIL; a call holds the ``State`` it
# started with, takes every borrowed reference after its last allocation and holds the
# slot before it runs any code (the ``tick``, the artifact).
# The facts it computes: "value" (builtin scalars only), "type", "id", "type_len" (builtin
# containers only), and the facts of the array and Triton kinds ([Note: Array facts]):
# ``array_token`` of a numpy array (a subclass too) from the array's struct fields (data,
# nd, descr, flags: numpy's stable public layout, checked once against numpy's own answers):
# the token Python interned, found by the dtype's address and the code of its ndim and flags,
# in a small table of the extension's own (each row holds its dtype and token) or else in
# ``array_facts``' cache (a dtype not in it, e.g. one with metadata or fields, or a fact not
# interned yet, is forwarded: Python computes and interns it); in a union dim, the part
# ``(id(ndarray), token)`` of an exact ndarray is one tuple per row, built once; ``int_class``
# of an int within 64 bits; ``data_ptr_aligned`` of an exact ndarray; ``dtype_key`` of a
# dtype argument (the "dtype" fact of EQUALS_MATCH) found in ``array_facts``' cache by its
# address (the row holds the dtype: an immutable one), else forwarded. Anything else those functions accept (an
# ``__array_interface__`` or DLPack object, a torch tensor's ``data_ptr()``, a bigger int)
# is forwarded before any of its code runs. tests/test_speedups.py checks each C fact
# against the Python definition on hypothesis-drawn values.
# ``jitguard.speedups_enabled()`` says whether new specialized functions get the C path;
# when the extension cannot be imported jitguard says so once, on the ``jitguard.dispatch``
# logger (a log line, not a warning: ``-W error`` must not turn it into a failure).
#
# [Note: One answer from both modes]
# In pure Python the specialized function *is* the generated dispatcher, a plain function;
# the C ``Dispatch`` in front of it must be indistinguishable. So every attribute that is a
# data descriptor of the fallback's type and not of ``Dispatch`` (``__code__``,
# ``__defaults__``, ``__kwdefaults__``, ``__annotations__``, ...) is read, set and deleted
# on the fallback; ``__name__``, ``__qualname__``, ``__doc__``, ``__module__`` are too, and
# every other attribute (``__wrapped__``, ``__signature__``, a user's) lives in the one
# ``__dict__`` both share. Setting one therefore acts as on a plain function, in both modes:
# ``s.__defaults__ = (7,)`` is what Python binds an omitted argument with (the C path never
# binds: a call that omits one is forwarded), and ``s.__code__ = h.__code__`` makes every
# call run that code. For the latter, ``install`` records the fallback's ``__code__`` with
# each State and the C path forwards while it is another (one pointer compare); the Python
# side never puts its generated code over one the user assigned, and installs no State
# while the user's is in place, so no entry is served by either path until the user puts
# the dispatcher's code back. The assigned code runs with the specialized function's own
# defaults (the read-at-call-time ``DEFAULT``, [Note: Defaults are read at call time]) and
# namespace; to change what the cache compiles, assign the code of the function it
# specializes (``s.__wrapped__.__code__``, [Note: A replaced __code__]).
# tests/test_cache_parity.py holds both modes and the plain function to one answer in a
# seeded differential fuzz.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from .. import native
from .._util import SCALAR_TYPES
from ..compiler import array_facts
from ..compiler.array_kinds import ARRAY_FACTS
from ..compiler.builtin_kinds import FACT_DTYPE
from ..compiler.kinds import (
    FACT_ID,
    FACT_TYPE,
    FACT_TYPE_LEN,
    FACT_VALUE,
    DispatchFact,
    dispatch_fact,
)
from .entry import Slot
from .facts import Dim
from .signature import DEFAULT, Signature

__all__ = ["ENV_VAR", "available", "install", "set_enabled", "speedups_enabled", "state_for", "why_not", "wrap"]

ENV_VAR = native.ENV_VAR
ABI = native.ABI  # the extension's ABI constant ([Note: Loading the extension])

_speedups: Any = native.module
_why_not: Optional[str] = native.why_not
if _speedups is not None:
    _speedups.set_slot_type(Slot)

_enabled = _speedups is not None

# The codes of ``_speedups.State``, as speedups.h declares them (tests/test_speedups.py holds
# the two equal, name for name).
MODE_FORWARD, MODE_NODIMS, MODE_EXACT, MODE_KEYED = 0, 1, 2, 3
PRE_NONE, PRE_IS, PRE_SET = 0, 1, 2
(EXPR_NONE, EXPR_VALUE, EXPR_ID, EXPR_LEN, EXPR_ARRAY, EXPR_INT_CLASS, EXPR_PTR, EXPR_UNION,
 EXPR_DTYPE) = range(9)
MAX_DIVISORS = 16

_SCALAR_IDS = frozenset(id(t) for t in SCALAR_TYPES)
# Builtin containers whose ``len`` runs no user code (exact types: a subclass may not be).
_LEN_IDS = frozenset(id(t) for t in (tuple, list, dict, str, bytes, set, frozenset))
# The built-in facts the C path computes, each exactly as its DispatchFact says; any other
# fact (a kind's own, one added later) makes the State forward every call.
_FACTS: dict[str, tuple[DispatchFact, int]] = {
    "value": (FACT_VALUE, EXPR_VALUE), "type": (FACT_TYPE, EXPR_NONE),
    "id": (FACT_ID, EXPR_ID), "type_len": (FACT_TYPE_LEN, EXPR_LEN),
}
# The shapes of ``Dim`` and ``layout.Layout`` these codes were written for: a dim on something
# other than the parameter itself, or a layout with more to it, is not computed here.
_DIM_FIELDS = ("position", "param", "fact", "kind", "source", "union")
_LAYOUT_FIELDS = ("dims", "hoisted", "exact", "types", "bases")


def speedups_enabled() -> bool:
    """Whether functions specialized from now on get the C hot path (the extension
    ``jitguard._src._speedups.ext`` is built and importable, and ``JITGUARD_PURE_PYTHON=1`` was
    not set when jitguard was imported). See [Note: The C hot path]."""
    return _enabled


def available() -> bool:
    """Whether the extension is loaded (``set_enabled(True)`` can turn the C path on)."""
    return _speedups is not None


def why_not() -> Optional[str]:
    """Why the C hot path is off (None when it is on)."""
    if _enabled:
        return None
    return _why_not or "turned off by set_enabled(False)"


def set_enabled(on: bool) -> bool:
    """Turn the C hot path on or off for functions specialized from now on (tests and
    benches run both modes in one process); returns the previous setting. Turning it on
    without the extension raises ``RuntimeError``."""
    global _enabled
    if on and _speedups is None:
        raise RuntimeError(f"the C hot path is not available: {_why_not}")
    old, _enabled = _enabled, bool(on)
    return old


def wrap(function: Callable[..., Any], sig: Signature, miss: Callable[..., Any]) -> Optional[Any]:
    """The C ``Dispatch`` object in front of the generated dispatcher ``function`` (whose miss
    path is ``miss``), or None (the C path is off, or ``fn`` has parameters that are not
    positional)."""
    if not _enabled or sig.var_positional or sig.var_keyword or sig.keyword_only:
        return None
    if len(sig.positional) != len(sig.params):
        return None
    return _speedups.Dispatch(function, len(sig.params), DEFAULT, miss)


def _dim_code(layout: Any, k: int) -> Optional[tuple[Any, ...]]:
    """One dim's codes ``(pos, pre, typed_part, expr, type id, gate ids)``, or None when
    the C path cannot compute its key part without running code of the value's type."""
    dim = layout.dims[k]
    if type(dim) is not Dim or dim._fields != _DIM_FIELDS or dim.kind is not None:
        return None  # a fact_of dim: the kind's own code computes it
    if dim.source is not None:
        return None  # a derived source's fact (``x.dtype``): the Python code reads it
    if dim.union is not None:
        branches = _union_code(dim.union)
        if branches is None:
            return None
        return (dim.position, PRE_NONE, 0, EXPR_UNION, None, (), branches)
    spec = dim.spec
    if spec is None:
        return None
    hoisted = layout.hoisted[k]
    pre, typed_part, tid = PRE_NONE, 0, None
    gate: frozenset[int] = frozenset()
    reach: Optional[frozenset[int]] = None  # the type ids that reach the key part
    if hoisted is not None:
        if hoisted[0] not in ("is", "id"):
            return None
        pre = PRE_IS
        tid = id(hoisted[1]) if hoisted[0] == "is" else hoisted[1]
        reach = frozenset((tid,))
    elif spec.typed:
        typed_part = 1
        if spec.gate == "scalar":
            gate = _SCALAR_IDS
        elif spec.gate == "types" and layout.types is not None:
            gate = layout.types[k]
        elif spec.gate is not None:
            return None
        if gate:
            pre, reach = PRE_SET, gate
    code = _fact_code(spec, reach)
    if code is None:
        return None
    expr, extra = code
    return (dim.position, pre, typed_part, expr, tid, tuple(sorted(gate)), extra)


def _fact_code(spec: DispatchFact, reach: Optional[frozenset[int]]) -> Optional[tuple[int, Any]]:
    """``(expr code, options)`` of a declared fact's key part for values of the types
    ``reach`` (None: any type), or None when the C path does not compute it."""
    known = _FACTS.get(spec.name)
    if known is not None and spec == known[0]:
        expr, extra = known[1], ()
    else:
        called = _fact_call(spec)
        if called is None:
            return None
        expr, extra = called
    if expr == EXPR_VALUE and (reach is None or not reach <= _SCALAR_IDS):
        return None  # hashed only for builtin scalars
    if expr == EXPR_LEN and (reach is None or not reach <= _LEN_IDS):
        return None  # len only of builtin containers
    return expr, extra


def _union_code(union: tuple[tuple[int, str], ...]) -> Optional[tuple[Any, ...]]:
    """The branches of a union dim ([Note: Union dims]), in the generated code's order:
    ``(type ids, expr code, options)`` each; None when one is not computed here."""
    by_fact: dict[str, set[int]] = {}
    for tid, fact in union:
        by_fact.setdefault(fact, set()).add(tid)
    branches = []
    for fact, tids in sorted(by_fact.items()):
        spec = dispatch_fact(fact)
        if spec is None or not spec.typed:
            return None
        if spec.expr is None:
            branches.append((tuple(sorted(tids)), EXPR_NONE, ()))
            continue
        code = _fact_code(spec, frozenset(tids))
        if code is None:
            return None
        branches.append((tuple(sorted(tids)), code[0], code[1]))
    return tuple(branches)


def _fact_call(spec: DispatchFact) -> Optional[tuple[int, tuple[Any, ...]]]:
    """``(expr code, options)`` of a fact computed by one of array_facts' functions, in the
    exact forms the array and Triton kinds declare; None for anything else."""
    consts = dict(spec.consts)
    if spec == FACT_DTYPE and consts.get("dtype_key") is array_facts.dtype_key:
        return (EXPR_DTYPE, ()) if _array_support() else None
    for (layout, aligned), fact in ARRAY_FACTS.items():
        if spec == fact and consts.get("array_token") is array_facts.TOKEN_FUNCTIONS[layout, aligned]:
            return (EXPR_ARRAY, (layout, aligned)) if _array_support() else None
    if spec.typed is None and spec.gate is None and consts.get("int_class") is array_facts.int_class:
        if spec.expr == "{int_class}({v})" and len(consts) == 1:
            divisors: Any = (16,)
        elif spec.expr == "{int_class}({v}, {divisors})" and len(consts) == 2:
            divisors = consts["divisors"]
        else:
            return None
        ok = (type(divisors) is tuple and len(divisors) <= MAX_DIVISORS
              and all(type(d) is int and 2 <= d < 2**62 for d in divisors))
        return (EXPR_INT_CLASS, divisors) if ok else None
    if consts.get("data_ptr_aligned") is array_facts.data_ptr_aligned and spec.typed == "id":
        if spec.expr == "{data_ptr_aligned}({v})" and len(consts) == 1:
            align: Any = 16
        elif spec.expr == "{data_ptr_aligned}({v}, {align})" and len(consts) == 2:
            align = consts["align"]
        else:
            return None
        ok = type(align) is int and 2 <= align < 2**62
        return (EXPR_PTR, (align,)) if ok and _array_support() else None
    return None


_arrays: Optional[bool] = None  # whether the C path reads numpy arrays' fields


def _array_support() -> bool:
    """Teach the extension numpy's array type once numpy is imported (never importing it):
    it reads an array's fields only once they agree with numpy's answers on a probe."""
    global _arrays
    if _arrays is not None or _speedups is None:
        return bool(_arrays)
    np = array_facts.numpy_or_none()
    if np is None:
        return False
    probe = np.arange(6, dtype=np.int64).reshape(2, 3)[:, 1:]
    data = probe.__array_interface__["data"][0]
    _arrays = bool(_speedups.set_array_support(np.ndarray, array_facts._dtype_keys,
                                               array_facts.InternedFact, probe, data,
                                               probe.ndim, probe.flags.num))
    return _arrays


def state_for(layout: Any, nested: bool, index: dict[Any, Any], linear: Any, followers: Any,
              tick: Optional[Callable[[], int]]) -> Optional[Any]:
    """The ``State`` of a key layout (``layout.Layout``) and its index; a State that forwards
    every call when the layout has a dim the C path does not compute."""
    if _speedups is None:
        return None
    if getattr(layout, "_fields", None) != _LAYOUT_FIELDS:
        return _speedups.State(MODE_FORWARD, False, index, linear, followers, tick, ())
    if not layout.dims:
        return _speedups.State(MODE_NODIMS, False, index, linear, followers, tick, ())
    codes = []
    for k in range(len(layout.dims)):
        code = _dim_code(layout, k)
        if code is None:
            return _speedups.State(MODE_FORWARD, False, index, linear, followers, tick, ())
        codes.append(code)
    mode = MODE_EXACT if layout.exact else MODE_KEYED
    return _speedups.State(mode, nested, index, linear, followers, tick, tuple(codes))


def install(dispatch: Any, state: Any) -> None:
    """Publish ``state`` to the C ``Dispatch`` object."""
    dispatch._install(state)
