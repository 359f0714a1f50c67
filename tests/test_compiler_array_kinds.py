"""ARRAY_MATCH: passing and failing arrays with their failure texts pinned, what makes two
dtypes the same, arrays through ``__array_interface__`` and DLPack, and its one exact
dispatch fact; a DispatchFact that binds a helper function in its expression."""

from __future__ import annotations

import functools
from collections.abc import Hashable
from typing import Any, Optional

import numpy as np
import pytest

from _helpers import Hostile, accepts, reason, registry_candidates
from jitguard import (
    ArgPolicy,
    CheckFunction,
    GuardBuilder,
    GuardKindError,
    LocalSource,
    cache_of,
    compile_guards,
    register_guard_kind,
    specialize,
)
from jitguard._src.compiler.array_facts import array_fact, dtype_key
from jitguard._src.compiler.kinds import DispatchFact, EmitContext, GuardKind

L = LocalSource
ARRAY = GuardBuilder.ARRAY_MATCH


def check_on(value: Any, create_fn: Any = None) -> CheckFunction:
    guard = L("x").make_guard(create_fn or ARRAY)
    return compile_guards([guard], f_locals={"x": value}, arg_names=("x",))


HEAD = "check_array(L['x'], ndarray, float64, ndim=1, layout='C', writeable=True) failed: "


# ---- passing and failing values -------------------------------------------------------


def test_same_dtype_ndim_layout_passes() -> None:
    """Another array of the same dtype, ndim and layout passes, whatever its shape and
    contents."""
    check = check_on(np.zeros(3))
    assert accepts(check, np.ones(7))
    assert accepts(check, np.arange(5.0))


def test_dtype_mismatch_text() -> None:
    """A float32 array fails a float64 guard, saying both dtypes."""
    check = check_on(np.zeros(3))
    assert reason(check, np.zeros(3, np.float32)) == HEAD + "expected dtype float64, got float32"


def test_byte_order_is_part_of_the_dtype() -> None:
    """A big-endian float64 array is another dtype."""
    check = check_on(np.zeros(3))
    assert reason(check, np.zeros(3, ">f8")) == HEAD + "expected dtype float64, got >f8"


def test_ndim_mismatch_text() -> None:
    """A 2-d array fails a 1-d guard."""
    check = check_on(np.zeros(3))
    assert reason(check, np.zeros((3, 1))) == HEAD + "expected ndim 1, got 2"


def test_layout_classes() -> None:
    """C, F and A are numba's layouts: a 1-d contiguous array is C, a Fortran array F, a
    strided view A; each fails the others' guards."""
    c, f, a = np.zeros((2, 3)), np.zeros((2, 3), order="F"), np.zeros((4, 6))[::2, ::2]
    assert [array_fact(v)[2] for v in (c, f, a, np.zeros(3), np.zeros(6)[::2])] == [
        "C", "F", "A", "C", "A"]
    check = check_on(c)
    head = "check_array(L['x'], ndarray, float64, ndim=2, layout='C', writeable=True) failed: "
    assert reason(check, f) == head + (
        "expected layout C (C-contiguous), got F (Fortran-contiguous)")
    assert reason(check, a) == head + (
        "expected layout C (C-contiguous), got A (neither C- nor Fortran-contiguous)")
    assert accepts(check_on(a), np.zeros((5, 5))[:, ::3])


def test_layout_any_accepts_every_layout() -> None:
    """layout='any' leaves the layout unguarded."""
    check = check_on(np.zeros((2, 3)), functools.partial(ARRAY, layout="any"))
    assert check.leaves[0].code() == (
        "check_array(L['x'], ndarray, float64, ndim=2, layout='any', writeable=True)")
    for v in (np.zeros((2, 3), order="F"), np.zeros((4, 6))[::2, ::3]):
        assert accepts(check, v)


def test_stated_layout_must_be_the_values() -> None:
    """layout='C' on a Fortran array is refused when the guard is built, saying why."""
    with pytest.raises(GuardKindError, match=r"layout='C' asked, but the array's layout is F"):
        check_on(np.zeros((2, 3), order="F"), functools.partial(ARRAY, layout="C"))
    assert accepts(check_on(np.zeros((2, 3)), functools.partial(ARRAY, layout="C")),
                   np.ones((4, 4)))


def test_read_only_array_fails_a_writeable_guard() -> None:
    """Writeability is always guarded, both ways."""
    ro = np.zeros(3)
    ro.flags.writeable = False
    assert reason(check_on(np.zeros(3)), ro) == HEAD + (
        "expected a writeable array, got a read-only array")
    assert accepts(check_on(ro), np.zeros(4)[:3].copy()) is False
    assert check_on(ro).leaves[0].code().endswith("writeable=False)")


def _unaligned(n: int) -> Any:
    buf = np.zeros(n * 8 + 1, np.uint8)
    return np.ndarray((n,), np.float64, buffer=buf, offset=1)


def test_alignment_guarded_only_when_asked() -> None:
    """An unaligned view passes the plain guard and fails one built with aligned=True."""
    odd = _unaligned(3)
    assert not odd.flags.aligned
    assert accepts(check_on(np.zeros(3)), odd)
    check = check_on(np.zeros(3), functools.partial(ARRAY, aligned=True))
    assert reason(check, odd) == (
        "check_array(L['x'], ndarray, float64, ndim=1, layout='C', writeable=True, "
        "aligned=True) failed: expected an aligned array, got an unaligned array")
    assert accepts(check_on(odd, functools.partial(ARRAY, aligned=True)), _unaligned(5))


def test_type_is_exact() -> None:
    """An ndarray subclass fails an ndarray guard (and the reverse); a list fails."""
    check = check_on(np.zeros(3))
    assert reason(check, np.zeros(3).view(np.matrix)) == HEAD + "expected type ndarray, got matrix"
    assert reason(check, [1.0, 2.0]) == HEAD + "expected type ndarray, got list"
    assert accepts(check, Hostile()) is False


def test_non_array_is_refused_at_build() -> None:
    """Building on a value that is no array says what an array is."""
    with pytest.raises(GuardKindError, match=r"ARRAY_MATCH on L\['x'\]: a list is not an array: "
                       r"no numpy ndarray, __array_interface__ or DLPack"):
        check_on([1, 2])
    with pytest.raises(GuardKindError, match="takes layout="):
        check_on(np.zeros(3), functools.partial(ARRAY, layout="K"))


class Lying(np.ndarray):
    """An ndarray subclass whose dtype, ndim and flags properties lie or raise."""

    @property
    def dtype(self) -> Any:  # type: ignore[override]
        raise RuntimeError("dtype read")

    @property
    def ndim(self) -> int:  # type: ignore[override]
        return 99

    @property
    def flags(self) -> Any:  # type: ignore[override]
        raise RuntimeError("flags read")


def test_subclass_properties_never_run() -> None:
    """A subclass is read through ndarray's own descriptors: its properties never run."""
    v = np.zeros((2, 2)).view(Lying)
    assert array_fact(v) == array_fact(np.zeros((2, 2)))
    check = check_on(v)
    assert accepts(check, np.ones((3, 3)).view(Lying))
    assert accepts(check, np.ones(3).view(Lying)) is False


# ---- dtypes ------------------------------------------------------------------------------


def test_dtype_identity_is_stricter_than_numpy_eq() -> None:
    """numpy's == ignores metadata, the aligned-struct flag and the dtype class; a dtype's
    key does not."""
    pairs = [
        (np.dtype("i8"), np.dtype("i8", metadata={"vlen": str})),
        (np.dtype([("a", "i8"), ("b", "i8")], align=True), np.dtype([("a", "i8"), ("b", "i8")])),
        (np.dtype("q"), np.dtype("l")),
    ]
    for a, b in pairs:
        assert a == b and dtype_key(a) != dtype_key(b)
    assert dtype_key(np.dtype("=f8")) == dtype_key(np.dtype("f8"))
    assert dtype_key(np.dtype("<i4")) != dtype_key(np.dtype(">i4"))


def test_dtype_class_difference_is_explained() -> None:
    """When two dtypes print alike, the reason says what differs."""
    check = check_on(np.zeros(2, "l"))
    head = "check_array(L['x'], ndarray, int64, ndim=1, layout='C', writeable=True) failed: "
    assert reason(check, np.zeros(2, "q")) == head + (
        "expected dtype int64 of class Int64DType, got int64 of class LongLongDType")
    meta = np.zeros(2, np.dtype("l", metadata={"vlen": str}))
    assert reason(check, meta) == head + (
        "expected dtype int64 with metadata None, got metadata {'vlen': <class 'str'>}")


def test_structured_dtypes() -> None:
    """Field names, order, offsets, titles and the aligned flag are all part of a structured
    dtype; an equal one built again matches."""
    base = np.dtype([("a", "<i4"), ("b", "<f8")])
    check = check_on(np.zeros(2, base))
    assert accepts(check, np.zeros(3, np.dtype([("a", "<i4"), ("b", "<f8")])))
    for other in (
        np.dtype([("b", "<i4"), ("a", "<f8")]),
        np.dtype([("a", "<i4"), ("b", ">f8")]),
        np.dtype([("a", "<i4"), ("b", "<f8")], align=True),
        np.dtype([(("t", "a"), "<i4"), ("b", "<f8")]),
        np.dtype({"names": ["a", "b"], "formats": ["<i4", "<f8"], "offsets": [0, 8]}),
    ):
        assert accepts(check, np.zeros(2, other)) is False, other
    sub = np.dtype(("i4", (2, 3)))
    assert dtype_key(np.dtype([("m", sub)])) != dtype_key(np.dtype([("m", ("i4", (3, 2)))]))


# ---- other arrays ----------------------------------------------------------------------


class Interface:
    """An array known only by its ``__array_interface__``."""

    def __init__(self, a: Any) -> None:
        self.a = a

    @property
    def __array_interface__(self) -> dict[str, Any]:
        return self.a.__array_interface__


class DLPacked:
    """An array known only through DLPack."""

    def __init__(self, a: Any, device: tuple[int, int] = (1, 0)) -> None:
        self.a, self.device = a, device

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


def test_array_interface_objects() -> None:
    """An object with ``__array_interface__`` is guarded as the array it describes (a
    read-only one included), under its own exact type."""
    check = check_on(Interface(np.zeros((2, 2))))
    assert check.leaves[0].code() == (
        "check_array(L['x'], Interface, float64, ndim=2, layout='C', writeable=True)")
    assert accepts(check, Interface(np.ones((3, 3))))
    ro = np.zeros((2, 2))
    ro.flags.writeable = False
    assert accepts(check, Interface(ro)) is False
    assert accepts(check, Interface(np.zeros((2, 2), np.int8))) is False
    assert accepts(check, np.zeros((2, 2))) is False


def test_dlpack_objects() -> None:
    """A DLPack object on the CPU is guarded as numpy.from_dlpack sees it; one on another
    device is refused at build time and fails at check time."""
    check = check_on(DLPacked(np.zeros(4, np.float32)))
    assert accepts(check, DLPacked(np.ones(9, np.float32)))
    assert accepts(check, DLPacked(np.ones(9, np.float64))) is False
    assert accepts(check, DLPacked(np.zeros(4, np.float32), device=(2, 0))) is False
    with pytest.raises(GuardKindError, match=r"its DLPack device is \(2, 0\), not the CPU"):
        check_on(DLPacked(np.zeros(4), device=(2, 0)))


# ---- dispatch ----------------------------------------------------------------------------


def _types_policy() -> ArgPolicy:
    policy = ArgPolicy()
    policy.register(np.ndarray, lambda ctx, s, v: ctx.guard(s, ARRAY))
    return policy


def test_one_exact_key_for_many_dtypes() -> None:
    """Entries for 8 dtypes share one exact dim: the dispatcher computes the token once
    (array_token's hot path inline) and looks the key up; every call hits its own entry."""
    dtypes = ["f8", "f4", "i8", "i4", "u1", "c16", ">f8", "i2"]
    f = specialize(lambda x: x.dtype.str, policy=_types_policy(), recompile_limit=None,
                   global_state=False)  # (torch's states, once loaded, are checked apart)
    arrays = [np.zeros(4, d) for d in dtypes]
    assert [f(a) for a in arrays] == [np.dtype(d).str for d in dtypes]
    assert [f(a) for a in reversed(arrays)] == [np.dtype(d).str for d in reversed(dtypes)]
    cache = cache_of(f)
    assert cache.stats().compiles == 8 and cache.stats().hits == 8
    source = cache.dispatcher.source
    prefix = cache.dispatcher.sig.prefix
    lookup = next(line for line in source.splitlines() if f"{prefix}s = " in line)
    assert "dims [x:array], exact" in source and "array_token(x))]" in lookup
    assert lookup.count(".flags.num") == 1


def test_dispatch_never_calls_array_fact_on_other_types() -> None:
    """A call with a value of a type no entry expects never reaches array_fact (the type
    test comes first): a hostile object misses cleanly."""
    f = specialize(lambda x: "arr", policy=_types_policy(), recompile_limit=2)
    assert f(np.zeros(2)) == "arr"
    assert f(Hostile()) == "arr"  # compiled for it (as an object), its hooks never ran
    assert cache_of(f).stats().compiles == 2


# ---- a DispatchFact binding a helper -------------------------------------------------


def _parity(v: Any) -> Optional[int]:
    return v & 1 if type(v) is int else None


class ParityMatch(GuardKind):
    """``_parity(value)`` as at build time; its fact binds ``_parity`` as a constant."""

    name = "TEST_PARITY_MATCH"
    dispatch_facts = (DispatchFact("test_parity", "{parity}({v})",
                                   consts=(("parity", _parity),)),)

    def expect(self, value: Any, guard: Any, **options: Any) -> Optional[int]:
        return _parity(value)

    def holds(self, value: Any, params: Optional[int]) -> bool:
        return _parity(value) == params

    def emit(self, var: str, params: Optional[int], ctx: EmitContext) -> str:
        return f"{ctx.const(_parity, 'parity')}({var}) == {ctx.const(params, 'p')}"

    def code(self, name: str, params: Optional[int]) -> str:
        return f"parity({name}) == {params}"

    def fact(self, params: Optional[int]) -> Optional[tuple[str, Hashable]]:
        return ("test_parity", params)

    def fact_of(self, fact: str, value: Any) -> Hashable:
        return _parity(value)


def test_fact_consts_are_bound_in_the_dispatcher() -> None:
    """A fact's ``consts`` are bound under prefixed names in the dispatcher's namespace; the
    key is exact (no residual is read)."""
    parity = register_guard_kind(ParityMatch(), replace=True)

    def compiler(request: Any) -> Any:
        request.add_guard("n", parity)
        n = request.values[0]
        return lambda n, _p=n & 1: ("odd", "even")[1 - _p]

    f = specialize(lambda n: n, compiler=compiler, dynamic=["n"], global_state=False)
    assert [f(3), f(4), f(5), f(6)] == ["odd", "even", "odd", "even"]
    cache = cache_of(f)
    assert cache.stats().compiles == 2
    assert "_parity(n)]" in cache.dispatcher.source and ", exact" in cache.dispatcher.source


def test_fact_const_names_are_checked() -> None:
    """A const named like one of the expression's own names is refused."""

    class Bad(ParityMatch):
        name = "TEST_BAD_CONST"
        dispatch_facts = (DispatchFact("test_bad_const", "{v}", consts=(("len", len),)),)

    with pytest.raises(GuardKindError, match="binds 'len', which is not an identifier or is one of"):
        register_guard_kind(Bad())


# ---- registry ----------------------------------------------------------------------------


def test_array_match_is_drawn_by_the_registry_fuzz() -> None:
    """The registry offers ARRAY_MATCH (with each sample option set) for an array, never for
    an int or a list."""
    names = [getattr(fn, "func", fn).__name__ for fn in registry_candidates(L("x"), np.zeros(2))]
    assert names.count("ARRAY_MATCH") == 3
    for other in (3, [1.0]):
        assert all(getattr(fn, "func", fn).__name__ != "ARRAY_MATCH"
                   for fn in registry_candidates(L("x"), other))


def _run(code: str) -> str:
    import subprocess
    import sys
    import textwrap

    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_numpy_is_not_imported_by_jitguard() -> None:
    """import jitguard, and guarding ints and lists with every kind, leaves numpy out of
    sys.modules; with numpy unimportable ARRAY_MATCH still refuses a non-array clearly."""
    out = _run(
        """
        import sys
        import jitguard
        from jitguard import GuardBuilder, GuardKindError, LocalSource, compile_guards
        guards = [LocalSource("n").make_guard(GuardBuilder.INT_CLASS)]
        check = compile_guards(guards, f_locals={"n": 32}, arg_names=("n",))
        assert check.fn(48) and not check.fn(7)
        assert "numpy" not in sys.modules
        sys.modules["numpy"] = None
        try:
            compile_guards([LocalSource("x").make_guard(GuardBuilder.ARRAY_MATCH)],
                           f_locals={"x": [1]}, arg_names=("x",))
        except GuardKindError as e:
            print(e)
        """
    )
    assert out.strip() == (
        "ARRAY_MATCH on L['x']: a list is not an array: no numpy ndarray, "
        "__array_interface__ or DLPack (__dlpack__ and __dlpack_device__)")


# ---- np.dtype as a constant --------------------------------------------------------------


def test_dtype_is_an_equality_constant() -> None:
    """EQUALS_MATCH holds a dtype: an equal dtype (another object) passes; another dtype, a
    string, or the same dtype with metadata fail, with numpy's repr in the text."""
    check = check_on(np.dtype("f8"), GuardBuilder.EQUALS_MATCH)
    assert check.leaves[0].code() == "L['x'] == dtype('float64')"
    assert accepts(check, np.zeros(1).dtype) and accepts(check, np.dtype("=f8"))
    assert reason(check, np.dtype("f4")) == (
        "L['x'] == dtype('float64') failed: got dtype('float32') (Float32DType, expected "
        "Float64DType)")
    assert reason(check, "f8") == (
        "L['x'] == dtype('float64') failed: got 'f8' (str, expected Float64DType)")
    for other in (np.dtype("f8", metadata={"a": 1}), np.dtype(">f8"), np.float64):
        assert accepts(check, other) is False
    assert accepts(check_on(np.dtype("l"), GuardBuilder.CONSTANT_MATCH), np.dtype("q")) is False


def test_dtype_arguments_are_guarded_by_value() -> None:
    """A dtype argument is guarded by value by default: a fresh equal dtype object hits,
    through an exact key on the dtype's class and dtype_key."""
    f = specialize(lambda d: d.str, global_state=False)
    assert f(np.dtype([("a", "i4")])) == f(np.dtype([("a", "i4")])) == "|V4"
    assert [f(np.dtype(d)) for d in ("f8", ">f8", "f8", "q", "l")] == [
        "<f8", ">f8", "<f8", "<i8", "<i8"]
    cache = cache_of(f)
    assert cache.stats().compiles == 5 and cache.stats().hits == 2
    assert cache.dispatcher.source.splitlines()[0].rstrip().endswith("dims [d:dtype], exact")


def test_structured_dtype_renamed_in_place_misses() -> None:
    """A structured dtype whose field names are assigned in place is a new dtype to the
    guard and the dispatcher: the entry for the old names is never used again."""
    dt = np.dtype([("a", "f8"), ("b", "i4")])
    arr = np.zeros(2, dt)
    check = check_on(arr)
    assert accepts(check, arr)
    f = specialize(lambda x: x.dtype.names, policy=_types_policy(), recompile_limit=None,
                   global_state=False)
    assert f(arr) == ("a", "b") and f(arr) == ("a", "b")
    arr.dtype.names = ("x", "y")  # the same dtype object, renamed
    assert dtype_key(arr.dtype) != dtype_key(np.dtype([("a", "f8"), ("b", "i4")]))
    assert not accepts(check, arr)
    assert f(arr) == ("x", "y")
    assert cache_of(f).stats().compiles == 2
