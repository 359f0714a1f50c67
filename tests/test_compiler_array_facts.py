"""Properties of the array facts over many arrays (dtypes structured, byte-swapped, with
metadata; C, F and strided layouts; read-only and unaligned views), and the differential
fuzz of every registered kind that holds on an array: compiled check against the reference
evaluator, and a specialized function that never serves a call from another array's entry."""

from __future__ import annotations

import gc
import pickle
import weakref
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from _helpers import registry_candidates, set_in_place
from jitguard import ArgPolicy, GuardBuilder, LocalSource, cache_of, compile_guards, specialize
from jitguard._src.compiler import array_facts
from jitguard._src.compiler.array_facts import (
    array_fact,
    array_token,
    data_pointer,
    data_ptr_aligned,
    dtype_key,
    intern_fact,
)

_plain = st.one_of(
    hnp.scalar_dtypes(),
    hnp.byte_string_dtypes(min_len=1, max_len=4),
    hnp.unicode_string_dtypes(min_len=1, max_len=4),
)
_swapped = _plain.map(lambda d: d.newbyteorder())
_structured = hnp.array_dtypes(subtype_strategy=_plain, min_size=1, max_size=3,
                               allow_subarrays=True)
_aligned = _structured.map(lambda d: np.dtype(d.descr, align=True)
                           if all(n for n in d.names) else d)
_meta = _plain.map(lambda d: np.dtype(d, metadata={"tag": 1}))
dtypes = st.one_of(_plain, _swapped, _structured, _aligned, _meta,
                   st.sampled_from([np.dtype("O"), np.dtype("q"), np.dtype("l")]))

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)
HOW = ("C", "F", "strided", "transposed", "readonly", "unaligned")


def make(dtype: Any, shape: tuple[int, ...], how: str) -> Any:
    """An array of ``dtype`` and ``shape`` laid out as ``how`` says."""
    if how == "F":
        return np.zeros(shape, dtype, order="F")
    if how == "strided":
        index = tuple(slice(None, None, 2) for _ in shape) or ...  # () would give a scalar
        return np.zeros(tuple(2 * s for s in shape), dtype)[index]
    if how == "transposed":
        return np.zeros(shape, dtype).T
    if how == "readonly":
        a = np.zeros(shape, dtype)
        a.flags.writeable = False
        return a
    if how == "unaligned":
        n = int(np.prod(shape)) * dtype.itemsize
        return np.ndarray(shape, dtype, buffer=np.zeros(n + 1, np.uint8), offset=1)
    return np.zeros(shape, dtype)


arrays = st.builds(make, dtypes, shapes, st.sampled_from(HOW))


def _flags_fact(a: Any) -> tuple[Any, ...]:
    layout = "C" if a.flags.c_contiguous else ("F" if a.flags.f_contiguous else "A")
    return (a.ndim, layout, a.flags.writeable, a.flags.aligned)


@settings(max_examples=300, deadline=None)
@given(arrays, arrays)
def test_equal_facts_mean_the_same_array_kind(a: Any, b: Any) -> None:
    """Equal facts imply what numpy itself says alike: dtype ==, dtype str and class, ndim,
    contiguity class, writeability and alignment; and a fact equals itself for an array
    built alike."""
    if array_fact(a, True, True) == array_fact(b, True, True):
        assert a.dtype == b.dtype and a.dtype.str == b.dtype.str
        assert type(a.dtype) is type(b.dtype)
        assert a.dtype.metadata == b.dtype.metadata
        assert _flags_fact(a) == _flags_fact(b)
    if dtype_key(a.dtype) == dtype_key(b.dtype):
        assert a.dtype == b.dtype and a.dtype.itemsize == b.dtype.itemsize
    assert array_fact(a) == array_fact(a.view())
    assert dtype_key(a.dtype) == dtype_key(np.dtype(a.dtype))
    assert data_pointer(a) == a.__array_interface__["data"][0]
    assert data_ptr_aligned(a) == (a.__array_interface__["data"][0] % 16 == 0)


@settings(max_examples=150, deadline=None)
@given(arrays, st.lists(arrays, max_size=6))
def test_registry_kinds_on_arrays_agree_with_reference(build: Any, others: list[Any]) -> None:
    """Every registered kind that holds on an array (ARRAY_MATCH with each option set,
    DATA_PTR_ALIGNED, TYPE_MATCH, ...): the compiled check and the reference evaluator
    agree on other arrays, and on the array it was built on both accept."""
    source = LocalSource("x")
    fns = registry_candidates(source, build)
    names = {getattr(fn, "func", fn).__name__ for fn in fns}
    assert {"ARRAY_MATCH", "DATA_PTR_ALIGNED"} <= names
    for fn in fns:
        check = compile_guards([source.make_guard(fn)], f_locals={"x": build},
                               arg_names=("x",))
        assert check.fn(build) is True
        for value in others:
            assert check.fn(value) is check.reference(value), (check.source, value)


def _policy() -> ArgPolicy:
    policy = ArgPolicy()
    policy.register(np.ndarray, lambda ctx, s, v: ctx.guard(s, GuardBuilder.ARRAY_MATCH))
    return policy


@settings(max_examples=60, deadline=None)
@given(st.lists(arrays, min_size=1, max_size=12))
def test_specialized_function_serves_each_array_its_own_entry(calls: list[Any]) -> None:
    """Through the dispatcher's one exact key: every call is served by the entry compiled for
    an array with its fact, never another's."""

    def compiler(request: Any) -> Any:
        (x,) = request.values
        built = (type(x), array_fact(x))
        return lambda x: built

    f = specialize(lambda x: None, compiler=compiler, policy=_policy(), recompile_limit=None,
                   global_state=False)
    for a in calls + calls:
        assert f(a) == (type(a), array_fact(a))
    assert cache_of(f).stats().compiles == len({array_fact(a) for a in calls})


# ---- interned facts (array_token) ------------------------------------------------------

OPTIONS = [(True, False), (True, True), (False, False), (False, True)]


@settings(max_examples=200, deadline=None)
@given(arrays, arrays)
def test_one_token_per_fact(a: Any, b: Any) -> None:
    """array_token is the interned array_fact: the same object exactly when the facts are
    equal, for every option set, asked once or again (from its cache)."""
    for layout, aligned in OPTIONS:
        for _ in range(2):
            ta, tb = array_token(a, layout, aligned), array_token(b, layout, aligned)
            fa, fb = array_fact(a, layout, aligned), array_fact(b, layout, aligned)
            assert ta.fact == fa and tb.fact == fb
            assert (ta is tb) == (fa == fb)
            assert ta is intern_fact(fa)


def _inline_tokens() -> dict[tuple[bool, bool], Any]:
    """The array kinds' inline key expressions (the dispatcher's copy of array_token's hot
    path), each as a function of the value."""
    from jitguard._src.compiler.array_kinds import ARRAY_FACTS

    out = {}
    for options, fact in ARRAY_FACTS.items():
        names = {n: n for n, _ in fact.consts}
        assert fact.expr is not None
        text = fact.expr.format(**names, v="v", type="type", id="id", len="len",
                                tuple="tuple", dict="dict", tmp="t_")
        out[options] = eval(f"lambda v: {text}", {**dict(fact.consts), "type": type, "id": id})
    return out


@settings(max_examples=200, deadline=None)
@given(arrays)
def test_inline_token_is_array_token(a: Any) -> None:
    """The dispatcher's inline copy of array_token's hot path gives array_token's token, on
    the first call (nothing cached) and after, for an array, a subclass view and an
    ``__array_interface__`` object."""
    class Sub(np.ndarray):
        pass

    class Iface:
        def __init__(self, arr: Any) -> None:
            self.__array_interface__ = arr.__array_interface__

    def outcome(fn: Any, *args: Any) -> Any:
        # numpy may refuse to read an interface it wrote (numpy 2.2: an aligned structured
        # dtype's padding field, "field 'f2' occurs more than once"): both must then raise alike
        try:
            return fn(*args)
        except (TypeError, ValueError) as e:
            return type(e)

    inline = _inline_tokens()
    for value in (a, a.view(Sub), Iface(a)):
        for (layout, aligned), token in inline.items():
            for _ in range(2):
                assert outcome(token, value) is outcome(array_token, value, layout, aligned)
    a.flags.writeable = False
    for (layout, aligned), token in inline.items():
        assert token(a) is array_token(a, layout, aligned)


def test_token_follows_the_array_changed_in_place() -> None:
    """The token cache is keyed by the dtype object and the array's ndim and flags as they
    are on each call: flags, shape and dtype changed in place give the new fact's token."""
    a = np.zeros(8)
    first = array_token(a, True, True)
    a.flags.writeable = False
    assert array_token(a, True, True).fact == array_fact(a, True, True) != first.fact
    a.flags.writeable = True
    assert array_token(a, True, True) is first
    set_in_place(a, shape=(2, 4))
    assert array_token(a, True, True).fact == array_fact(a, True, True) != first.fact
    set_in_place(a, shape=(8,), dtype=np.int64)  # the same buffer, another dtype
    assert array_token(a, True, True).fact == array_fact(a, True, True) != first.fact
    strided = np.zeros(16)[::2]
    assert array_token(strided).fact[2] == "A" and array_token(strided, False).fact[2] is None


def test_renamed_structured_dtype_gets_another_token() -> None:
    """A structured dtype (or one with metadata) is never in the token cache: its fact is
    computed on every call, so names assigned in place give another token."""
    arr = np.zeros(2, np.dtype([("a", "f8"), ("b", "i4")]))
    before = array_token(arr)
    assert array_token(arr) is before
    arr.dtype.names = ("x", "y")
    after = array_token(arr)
    assert after is not before and after.fact == array_fact(arr)
    meta = np.zeros(2, np.dtype("f8", metadata={"a": 1}))
    array_token(meta)
    assert id(arr.dtype) not in array_facts._dtype_keys
    assert id(meta.dtype) not in array_facts._dtype_keys


def test_a_dead_token_leaves_the_table() -> None:
    """The table holds tokens weakly: once nothing holds a fact's token its row goes, and
    the fact interned again gets a new token (no old one is alive to be confused with)."""
    fact = ("a fact only this test makes", object())
    token = intern_fact(fact)
    assert intern_fact(fact) is token and fact in array_facts._interned
    ref = weakref.ref(token)
    del token
    gc.collect()
    assert ref() is None and fact not in array_facts._interned
    assert intern_fact(fact).fact is fact


def test_token_pickles_to_the_interned_token() -> None:
    """A token pickled and loaded is the token of its fact (interned again)."""
    a = np.zeros(3, ">i4")
    token = array_token(a)
    assert pickle.loads(pickle.dumps(token)) is token
