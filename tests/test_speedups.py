"""Tests for the C hot path (jitguard._src._speedups.ext, jitguard._src.dispatch.fast): the same
answers, counters and soundness as the pure-Python dispatcher, in both modes
([Note: The C hot path])."""

from __future__ import annotations

import gc
import os
import pickle
import random
import re
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitguard
from _helpers import set_in_place
from jitguard import CompileRequest, GuardBuilder, cache_of, specialize
from jitguard._src.dispatch import fast
from jitguard._src.dispatch.signature import DEFAULT

needs_c = pytest.mark.skipif(not fast.available(), reason=f"no C hot path: {fast.why_not()}")
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def served_in_c(f: Any) -> int:
    """How many calls of ``f`` the C path served (0 in pure Python)."""
    counts = getattr(f, "_counts", None)
    return counts()[0] if counts is not None else 0


def tagged(req: CompileRequest) -> Any:
    """A compiler whose artifact returns what it was compiled for, and the call's values."""
    baked = tuple(req.arguments.values())
    return lambda *args: (baked, args)


# ---- the mode --------------------------------------------------------------------------


def test_mode_decides_the_public_object(dispatch_mode: str) -> None:
    """With the C path a specialized function is a C Dispatch; without, the generated function."""
    def f(a: int, b: int) -> int:
        return a + b

    s = specialize(f)
    assert cache_of(s).dispatcher.c_path == (dispatch_mode == "c")
    assert jitguard.speedups_enabled() == (dispatch_mode == "c")
    if dispatch_mode == "c":
        assert type(s).__name__ == "Dispatch" and s._fallback is cache_of(s).dispatcher.function
    else:
        assert s is cache_of(s).dispatcher.function


def test_only_positional_signatures_get_the_c_path(dispatch_mode: str) -> None:
    """*args, keyword-only and **kwargs parameters keep the Python dispatcher alone."""
    def star(*a: Any) -> Any:
        return a

    def kwonly(a: int, *, k: int = 1) -> int:
        return a

    def kw(a: int, **k: Any) -> int:
        return a

    for fn in (star, kwonly, kw):
        assert not cache_of(specialize(fn)).dispatcher.c_path
    assert cache_of(specialize(lambda: 1)).dispatcher.c_path == (dispatch_mode == "c")


@needs_c
def test_hits_are_served_in_c(dispatch_mode: str) -> None:
    """1-3 int arguments: every hit after the first compile is served by the C path."""
    for n in (1, 2, 3):
        # global_state=False: with torch imported every entry would also guard torch's global
        # state, a residual check that the Python dispatcher runs.
        s = specialize({1: lambda a: a, 2: lambda a, b: a, 3: lambda a, b, c: a}[n],
                       global_state=False)
        args = tuple(range(1, n + 1))
        assert s(*args) == 1
        before = served_in_c(s)
        for _ in range(5):
            assert s(*args) == 1
        assert served_in_c(s) - before == (5 if dispatch_mode == "c" else 0)
        assert cache_of(s).stats().hits == 5


def test_hit_counts_are_exact_and_a_held_count_never_changes(dispatch_mode: str) -> None:
    """Hits are counted one by one past the small ints (2**30 - 1 would need another
    digit); a count someone holds keeps its value when the next hit is counted."""
    s = specialize(lambda a: a, global_state=False)
    assert s(1) == 1
    (entry,) = cache_of(s).entries()
    (slot,) = list(entry._slots.values())
    for k in range(1, 401):
        assert s(1) == 1
        assert slot.hits == k
    held = slot.hits
    assert s(1) == 1
    assert held == 400 and slot.hits == 401 and slot.hits is not held
    slot.hits = 2**30 - 2
    for k in range(3):
        assert s(1) == 1
        assert slot.hits == 2**30 - 1 + k
    assert cache_of(s).stats().hits == 2**30 + 1


def test_names_wrapping_and_introspection(dispatch_mode: str) -> None:
    """The specialized function keeps fn's names, doc, __wrapped__, __code__ and signature."""
    import inspect

    def area(w: int, h: int = 2) -> int:
        """Width times height."""
        return w * h

    s = specialize(area)
    assert (s.__name__, s.__qualname__, s.__doc__, s.__module__) == (
        "area", area.__qualname__, "Width times height.", __name__)
    assert s.__wrapped__ is area and cache_of(s).fn is area
    assert str(inspect.signature(s)) == str(inspect.signature(area))
    assert s.__code__.co_name == "area"  # the generated dispatcher's code, named after fn
    s.note = "mine"
    assert s.note == "mine" and s.__dict__["note"] == "mine"
    assert "area" in repr(s)


def test_pickled_by_reference(dispatch_mode: str) -> None:
    """A module-level specialized function pickles by name, like a function."""
    mod = type(sys)("jitguard_test_pickled_mod")
    sys.modules[mod.__name__] = mod
    try:
        exec("from jitguard import specialize\n@specialize\ndef twice(x):\n    return 2 * x\n",
             mod.__dict__)
        assert pickle.loads(pickle.dumps(mod.twice)) is mod.twice
    finally:
        del sys.modules[mod.__name__]


def test_methods_static_and_class_methods(dispatch_mode: str) -> None:
    """A specialized method binds like a function; staticmethod and classmethod work."""
    class C:
        def __init__(self, k: int) -> None:
            self.k = k

        @specialize(global_state=False)
        def m(self, x: int) -> int:
            return self.k + x

        @specialize
        @staticmethod
        def s(x: int) -> int:
            return x * 10

        @specialize
        @classmethod
        def c(cls, x: int) -> str:
            return f"{cls.__name__}{x}"

    a, b = C(1), C(2)
    for _ in range(3):
        assert (a.m(5), b.m(5), C.m(b, 5)) == (6, 7, 7)
        assert (C.s(3), a.s(4)) == (30, 40)
        assert (C.c(1), a.c(2)) == ("C1", "C2")
    assert cache_of(C.m).stats().compiles == 1  # self is guarded by type
    if dispatch_mode == "c":
        assert served_in_c(C.m) > 0


# ---- calls the C path forwards ------------------------------------------------------------


def test_keywords_and_other_argument_counts(dispatch_mode: str) -> None:
    """Keyword calls, missing and extra arguments behave as in Python (same errors)."""
    def f(a: int, b: int = 10) -> tuple[int, int]:
        return (a, b)

    s = specialize(f)
    assert s(1, 2) == s(1, 2) == s(a=1, b=2) == s(1, b=2) == (1, 2)
    assert s(1) == s(1) == (1, 10)
    with pytest.raises(TypeError) as got:
        s()
    with pytest.raises(TypeError) as want:
        f()  # type: ignore[call-arg]
    assert str(got.value) == str(want.value)
    with pytest.raises(TypeError, match="positional argument"):
        s(1, 2, 3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        s(1, c=3)  # type: ignore[call-arg]


def test_a_default_added_or_changed_later_is_used(dispatch_mode: str) -> None:
    """Defaults are read at call time: added to a required parameter, or rebound."""
    def f(a: int, b: int) -> tuple[int, int]:
        return (a, b)

    s = specialize(f)
    assert s(1, 2) == s(1, 2) == (1, 2)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'b'"):
        s(1)
    f.__defaults__ = (5,)
    assert s(1) == s(1) == (1, 5)
    f.__defaults__ = (6,)
    assert s(1) == (1, 6) and s(1, 2) == (1, 2)


def test_the_default_sentinel_passed_by_hand_is_filled(dispatch_mode: str) -> None:
    """Passing the internal DEFAULT sentinel positionally reads the default, as in Python."""
    def f(a: int, b: int = 3) -> tuple[int, int]:
        return (a, b)

    s = specialize(f)
    assert s(1, 3) == s(1, 3) == (1, 3)
    assert s(1, DEFAULT) == (1, 3)


# ---- soundness ---------------------------------------------------------------------------


class CountingInt(int):
    """An int subclass that counts calls of its __hash__ and __eq__."""

    calls = 0

    def __hash__(self) -> int:
        CountingInt.calls += 1
        return int.__hash__(self)

    def __eq__(self, other: object) -> bool:
        CountingInt.calls += 1
        return int.__eq__(self, other)


class Sized:
    """Counts calls of __len__ and __hash__."""

    calls = 0

    def __len__(self) -> int:
        Sized.calls += 1
        return 3

    def __hash__(self) -> int:
        Sized.calls += 1
        return 7


def _hostile_calls(mode: str) -> list[int]:
    CountingInt.calls = Sized.calls = 0
    s = specialize(lambda a, b: (type(a).__name__, type(b).__name__), recompile_limit=50)
    out = []
    for a, b in [(1, 2), (1, 2), (CountingInt(1), 2), (CountingInt(1), 2), (1, Sized()),
                 (1, Sized()), ((1, 2), 2), ((1, 2), 2), (CountingInt(5), Sized())]:
        s(a, b)
        out.append(CountingInt.calls + Sized.calls)
    return out


@needs_c
def test_hostile_objects_see_the_same_calls_in_both_modes() -> None:
    """The C path never calls a user __hash__/__eq__/__len__ the Python dispatcher would not."""
    old = fast.set_enabled(True)
    try:
        in_c = _hostile_calls("c")
    finally:
        fast.set_enabled(False)
    try:
        in_py = _hostile_calls("py")
    finally:
        fast.set_enabled(old)
    assert in_c == in_py


def test_an_int_subclass_never_hits_an_int_entry(dispatch_mode: str) -> None:
    """A value of an int subclass (equal, same hash) is not an int: no hit on the int entry."""
    s = specialize(lambda n: n, compiler=tagged, automatic_dynamic=False)
    assert s(1) == s(1) == ((1,), (1,))
    baked, _ = s(CountingInt(1))
    assert type(baked[0]) is CountingInt
    assert cache_of(s).stats().compiles == 2


def test_invalidated_entry_never_hits(dispatch_mode: str) -> None:
    """An entry whose guarded object died is not used; a new object compiles anew."""
    class Obj:
        pass

    def compiler(req: CompileRequest) -> Any:
        baked = id(req.arguments["o"])
        return lambda o, n: baked

    s = specialize(lambda o, n: None, compiler=compiler)
    o = Obj()
    first = id(o)
    assert s(o, 1) == s(o, 1) == first
    hits = cache_of(s).stats().hits
    del o
    gc.collect()
    o2 = Obj()
    assert s(o2, 1) == id(o2)
    assert cache_of(s).stats().invalidations == 1
    assert cache_of(s).stats().hits == hits


def test_local_class_dies_with_entries_held_by_type(dispatch_mode: str) -> None:
    """The dispatcher (C State included) holds a local class only by id: it can die."""
    def make() -> Any:
        class Local:
            pass
        return Local

    cls = make()
    s = specialize(lambda x: 1, policy=None, dynamic=["x"])
    assert s(cls()) == s(cls()) == 1
    ref = weakref.ref(cls)
    del cls
    gc.collect()
    assert ref() is None
    other = make()
    assert s(other()) == 1


def test_evicted_entry_stops_hitting(dispatch_mode: str) -> None:
    """maxsize: hits stamp the slot (least recently used goes first), evicted entries miss."""
    s = specialize(lambda n: n, compiler=tagged, maxsize=2, automatic_dynamic=False)
    s(1), s(2), s(1), s(1)  # 2 is now the least recently used
    s(3)  # evicts 2
    stats = cache_of(s).stats()
    assert stats.evictions == 1 and stats.compiles == 3
    assert s(1) == ((1,), (1,)) and cache_of(s).stats().compiles == 3
    assert s(2) == ((2,), (2,)) and cache_of(s).stats().compiles == 4


def test_threads_while_entries_are_added(dispatch_mode: str) -> None:
    """Threads calling while other calls compile and republish always get the right entry."""
    s = specialize(lambda a, b: None, compiler=tagged, recompile_limit=None,
                   automatic_dynamic=False)
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            start.wait(timeout=10)
            for _ in range(300):
                a, b = rng.randrange(40), rng.choice((0, 1, "x", None, 2.5))
                baked, got = s(a, b)
                if baked != (a, b) or got != (a, b) or type(baked[1]) is not type(b):
                    raise AssertionError(f"wrong entry for {(a, b)}: {baked}")
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stats = cache_of(s).stats()
    assert stats.hits + stats.misses == 6 * 300 and stats.failures == 0


# ---- parity: the same answers and counters in both modes ------------------------------------

VALUES: list[Any] = [0, 1, 2, -1, True, False, 0.0, -0.0, 1.5, float("nan"), "x", "y", b"x",
                     None, (1,), (1, 2), [1], 1 + 2j, CountingInt(1)]


def _run(mode: str, calls: list[tuple[int, int]], maxsize: Any, dynamic: bool) -> Any:
    old = fast.set_enabled(mode == "c")
    try:
        s = specialize(lambda a, b: None, compiler=tagged, recompile_limit=None,
                       maxsize=maxsize, automatic_dynamic=dynamic)
    finally:
        fast.set_enabled(old)
    results = []
    for i, j in calls:
        a, b = VALUES[i], VALUES[j]
        baked, _ = s(a, b)
        results.append(repr(baked))
    cache = cache_of(s)
    return results, cache.stats(), [(e.compile_id.frame_compile_id, e.hits) for e in cache.entries()]


@needs_c
@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(st.tuples(st.integers(0, len(VALUES) - 1), st.integers(0, len(VALUES) - 1)),
                   max_size=40),
    maxsize=st.sampled_from([None, 3]),
    dynamic=st.booleans(),
)
def test_same_answers_stats_and_hits_in_both_modes(
    calls: list[tuple[int, int]], maxsize: Any, dynamic: bool
) -> None:
    """Random call sequences: identical results, CacheStats and per-entry hits in both modes."""
    assert _run("c", calls, maxsize, dynamic) == _run("py", calls, maxsize, dynamic)


# ---- the State codes -------------------------------------------------------------------------


@needs_c
def test_layouts_the_c_path_cannot_compute_forward_everything() -> None:
    """A dim computed by a kind's fact_of (or any unknown part) makes the State forward."""
    from jitguard._src.dispatch.dispatcher import FOLLOWERS, LINEAR
    from jitguard._src.dispatch.facts import Dim
    from jitguard._src.dispatch.layout import Layout

    class K:
        name = "K"

    kind_dim = Dim(0, "a", "custom", K())  # type: ignore[arg-type]
    state = fast.state_for(Layout((kind_dim,), (None,), False), False, {}, LINEAR, FOLLOWERS,
                           None)
    assert state.mode == fast.MODE_FORWARD
    value_dim = Dim(0, "a", "value")
    state = fast.state_for(Layout((value_dim,), (("is", int),), True), False, {}, LINEAR,
                           FOLLOWERS, None)
    assert state.mode == fast.MODE_EXACT
    # A "value" part hoisted under a type that is not a builtin scalar would be hashed: no.
    state = fast.state_for(Layout((value_dim,), (("id", id(Sized)),), True), False, {}, LINEAR,
                           FOLLOWERS, None)
    assert state.mode == fast.MODE_FORWARD


@needs_c
def test_len_parts_only_for_builtin_containers() -> None:
    """A "type_len" part is computed in C only when every type reaching it is a builtin one."""
    from jitguard._src.dispatch.dispatcher import FOLLOWERS, LINEAR
    from jitguard._src.dispatch.facts import Dim
    from jitguard._src.dispatch.layout import Layout

    dim = Dim(0, "a", "type_len")
    ok = Layout((dim,), (("id", id(tuple)),), True, (frozenset({id(tuple)}),))
    assert fast.state_for(ok, False, {}, LINEAR, FOLLOWERS, None).mode == fast.MODE_EXACT
    mixed = Layout((dim,), (None,), False, (frozenset({id(tuple), id(Sized)}),))
    assert fast.state_for(mixed, False, {}, LINEAR, FOLLOWERS, None).mode == fast.MODE_FORWARD


def _header_codes() -> dict[str, int]:
    """Every code speedups.h declares (its ``enum { NAME = n, ... }`` members and its
    ``#define NAME n`` numbers, or ``#define NAME OTHER`` of one of those), by name."""
    header = (Path(fast.__file__).resolve().parents[1] / "_speedups" / "speedups.h").read_text()
    header = re.sub(r"/\*.*?\*/", "", header, flags=re.S)
    codes: dict[str, int] = {}
    for body in re.findall(r"enum\s*\{(.*?)\}", header, flags=re.S):
        for name, value in re.findall(r"(\w+)\s*=\s*(\d+)", body):
            codes[name] = int(value)
    for name, value in re.findall(r"^#define\s+(\w+)\s+(\w+)\s*$", header, flags=re.M):
        codes[name] = int(value) if value.isdigit() else codes[value]
    return codes


def test_state_codes_are_the_headers() -> None:
    """The State codes fast.py speaks (MODE_, PRE_, EXPR_, MAX_DIVISORS) and native.ABI are
    the ones speedups.h declares, one for one: a code added or renumbered on one side only
    fails here, in either dispatcher mode and without the extension built."""
    from jitguard._src import native

    header = _header_codes()
    prefixes = ("MODE_", "PRE_", "EXPR_")
    in_c = {n: v for n, v in header.items() if n.startswith(prefixes) and n != "EXPR_LAST"}
    in_py = {n: getattr(fast, n) for n in dir(fast) if n.startswith(prefixes)}
    assert in_py == in_c and len(in_c) >= 15
    assert header["EXPR_LAST"] == max(v for n, v in in_c.items() if n.startswith("EXPR_"))
    assert fast.MAX_DIVISORS == header["MAX_DIVISORS"]
    assert native.ABI == header["SPEEDUPS_ABI"]


# ---- switching off, and failing to load ------------------------------------------------------


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": SRC, **env}
    return subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                          text=True, env=full, timeout=120)


def test_env_var_forces_pure_python() -> None:
    """JITGUARD_PURE_PYTHON=1: no C path, and nothing is logged (it was asked for)."""
    out = _python(
        "import jitguard\n"
        "from jitguard import specialize, cache_of\n"
        "s = specialize(lambda a: a)\n"
        "print(jitguard.speedups_enabled(), cache_of(s).dispatcher.c_path, s(3), s(3))\n",
        JITGUARD_PURE_PYTHON="1",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "3", "3"]
    assert out.stderr == ""


def test_missing_extension_falls_back_and_says_so_once() -> None:
    """Without the extension jitguard runs in pure Python and logs one line (not a warning:
    -W error does not fail), on the jitguard.dispatch logger."""
    out = _python(
        "import sys\n"
        "sys.modules['jitguard._src._speedups.ext'] = None  # as if it were not built\n"
        "import jitguard, importlib\n"
        "from jitguard import specialize\n"
        "from jitguard._src.dispatch import fast\n"
        "s = specialize(lambda a: a); s(1); s(1)\n"
        "importlib.import_module('jitguard')\n"
        "print(jitguard.speedups_enabled(), type(s).__name__)\n"
        "try:\n"
        "    fast.set_enabled(True)\n"
        "except RuntimeError as e:\n"
        "    print('refused:', e)\n",
        JITGUARD_PURE_PYTHON="0",
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "False function"
    assert lines[1].startswith("refused: the C hot path is not available")
    said = [line for line in out.stderr.splitlines() if "pure Python" in line]
    assert len(said) == 1 and "jitguard._src._speedups.ext" in said[0]


def test_speedups_enabled_is_public() -> None:
    """jitguard.speedups_enabled() reports the mode new specialized functions get."""
    assert jitguard.speedups_enabled() == fast.speedups_enabled()
    if fast.available():
        old = fast.set_enabled(False)
        try:
            assert jitguard.speedups_enabled() is False
        finally:
            fast.set_enabled(old)


def test_guard_kinds_unchanged_for_c_layouts(dispatch_mode: str) -> None:
    """A guard added by the compiler beyond the key (a residual) is checked in both modes."""
    def compiler(req: CompileRequest) -> Any:
        req.add_guard("x", GuardBuilder.TYPE_MATCH)
        return lambda x, y: ("ok", x, y)

    s = specialize(lambda x, y: None, compiler=compiler, dynamic=["y"])
    assert s(1, 2) == ("ok", 1, 2) and s(1, 3) == ("ok", 1, 3)
    assert s(1, "a") == ("ok", 1, "a")
    assert cache_of(s).stats().compiles == 2


# ---- array facts and int classes in C (differential: C == the Python definitions) -----------

def _numpy() -> Any:
    return pytest.importorskip("numpy")


def _c() -> Any:
    from jitguard._src._speedups import ext as _speedups

    fast._array_support()
    return _speedups


DTYPES = ["f8", "<f4", ">f4", "i8", ">i2", "u1", "b1", "c16", "f2", "M8[ns]", "m8[s]", "S5", "U3",
          "V4", [("a", "<i4"), ("b", ">f8")], {"names": ["x"], "formats": ["i2"], "offsets": [4],
                                                "itemsize": 8}, ("f4", (2, 3)), "O"]


@st.composite
def arrays(draw: Any) -> Any:
    """numpy arrays of many dtypes, shapes, orders and strides, some read-only or offset."""
    np = _numpy()
    spec = draw(st.sampled_from(DTYPES))
    dtype = np.dtype(spec)
    if draw(st.booleans()) and dtype.names is None:
        dtype = np.dtype(dtype, metadata={"tag": draw(st.sampled_from(["a", "b"]))})
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    a = np.zeros(shape, dtype=dtype, order=draw(st.sampled_from(["C", "F"])))
    how = draw(st.sampled_from(["plain", "step", "T", "offset", "bytes"]))
    if how == "step" and a.ndim:
        a = a[::2]
    elif how == "T":
        a = a.T
    elif how == "offset" and dtype.kind in "biufc" and dtype.subdtype is None:
        raw = np.zeros(dtype.itemsize * 4 + 1, dtype=np.uint8)[1:]  # misaligned data
        a = raw.view(dtype)
    elif how == "bytes":
        a = np.frombuffer(bytes(16), dtype=np.uint8)  # read-only
    if draw(st.booleans()) and a.flags.writeable:
        a.flags.writeable = False
    return a


@needs_c
@settings(max_examples=300, deadline=None)
@given(a=arrays(), layout=st.booleans(), aligned=st.booleans())
def test_array_fact_in_c_equals_python(a: Any, layout: bool, aligned: bool) -> None:
    """array_fact computed from the struct equals the Python definition (or is not computed
    in C: a dtype not in the key cache, i.e. with metadata or fields, which can change in
    place)."""
    from jitguard._src.compiler.array_facts import array_fact

    want = array_fact(a, layout, aligned)  # fills the dtype-key cache as the Python path does
    try:
        got = _c().array_fact(a, layout, aligned)
    except LookupError:
        base = a.dtype.subdtype[0] if a.dtype.subdtype is not None else a.dtype
        assert a.dtype.metadata or base.metadata or base.names is not None, a.dtype
        return
    assert got == want and type(got) is tuple and [type(p) for p in got] == [type(p) for p in want]


@needs_c
def test_array_fact_in_c_reads_subclasses_like_python_and_never_other_objects() -> None:
    """An ndarray subclass (even with hostile properties) is read from the struct, as the
    Python definition does; a non-array (with __array_interface__) is left to Python."""
    from jitguard._src.compiler.array_facts import array_fact

    np = _numpy()

    class Sub(np.ndarray):
        @property
        def dtype(self) -> Any:  # type: ignore[override]
            raise AssertionError("a subclass property ran")

    s = np.zeros(3).view(Sub)
    assert _c().array_fact(s) == array_fact(s)

    class Iface:
        @property
        def __array_interface__(self) -> Any:
            raise AssertionError("C ran user code")

    with pytest.raises(LookupError):
        _c().array_fact(Iface())
    with pytest.raises(LookupError):
        _c().array_fact([1.0, 2.0])


INTS = st.one_of(
    st.integers(-2**70, 2**70), st.integers(-40, 40), st.sampled_from(
        [1, 0, -1, 16, 32, 48, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**63 - 1, 2**63, -2**63,
         -2**63 - 1, 2**64 - 1, 2**64]),
)


@needs_c
@settings(max_examples=400, deadline=None)
@given(x=st.one_of(INTS, st.booleans(), st.floats(allow_nan=False), st.none(), st.text(max_size=2)),
       divisors=st.one_of(st.just((16,)), st.lists(st.integers(2, 2**40), max_size=4).map(tuple)))
def test_int_class_in_c_equals_python(x: Any, divisors: tuple[int, ...]) -> None:
    """int_class in C equals the Python definition (values past 64 bits are left to Python)."""
    from jitguard._src.compiler.array_facts import int_class

    want = int_class(x, divisors)
    try:
        got = _c().int_class(x, divisors)
    except LookupError:
        assert type(x) is int and not -2**63 <= x < 2**63
        return
    assert got == want and type(got) is type(want)


@needs_c
@settings(max_examples=300, deadline=None)
@given(a=arrays(), layout=st.booleans(), aligned=st.booleans())
def test_array_token_in_c_is_pythons(a: Any, layout: bool, aligned: bool) -> None:
    """The C path's array token is the very object Python's array_token returns, from its
    own table or (emptied) from array_facts' cache; a dtype not in that cache (metadata,
    fields) is left to Python."""
    from jitguard._src.compiler.array_facts import array_token

    want = array_token(a, layout, aligned)
    for clear in (False, True, False):
        if clear:
            _c().clear_tokens()
        try:
            got = _c().array_token(a, layout, aligned)
        except LookupError:
            base = a.dtype.subdtype[0] if a.dtype.subdtype is not None else a.dtype
            assert a.dtype.metadata or base.metadata or base.names is not None, a.dtype
            return
        assert got is want


@needs_c
def test_array_token_in_c_follows_changes_in_place() -> None:
    """After a token is in the C table, flags, shape or dtype changed in place give the new
    fact's token (or a forward), never the old one."""
    from jitguard._src.compiler.array_facts import array_fact, array_token

    np = _numpy()
    a = np.zeros(8)
    first = array_token(a, True, True)
    assert _c().array_token(a, True, True) is first

    def c_token() -> Any:
        try:
            return _c().array_token(a, True, True)
        except LookupError:  # not in the caches yet: Python computes it
            return array_token(a, True, True)

    a.flags.writeable = False
    assert c_token().fact == array_fact(a, True, True) != first.fact
    a.flags.writeable = True
    set_in_place(a, shape=(2, 4))
    assert c_token().fact == array_fact(a, True, True) != first.fact
    set_in_place(a, shape=(8,), dtype=np.int64)
    assert c_token().fact == array_fact(a, True, True) != first.fact


@needs_c
@settings(max_examples=100, deadline=None)
@given(spec=st.sampled_from(DTYPES), meta=st.booleans())
def test_dtype_key_in_c_is_pythons(spec: Any, meta: bool) -> None:
    """dtype_key in C is the key Python cached for that very dtype object; a dtype not in
    the cache (metadata, fields: they can change in place), and any other object, are left
    to Python."""
    from jitguard._src.compiler.array_facts import dtype_key

    np = _numpy()
    d = np.dtype(spec)
    if meta and d.names is None:
        d = np.dtype(d, metadata={"tag": 1})
    want = dtype_key(d)
    try:
        got = _c().dtype_key(d)
    except LookupError:
        base = d.subdtype[0] if d.subdtype is not None else d
        assert d.metadata or base.metadata or base.names is not None, d
    else:
        assert got is want
    for other in ("f8", 1.0, np.zeros(2), np.float64):
        with pytest.raises(LookupError):
            _c().dtype_key(other)


def test_dtype_arguments_hit_and_renamed_fields_miss(dispatch_mode: str) -> None:
    """Entries keyed on a dtype argument's class and key hit (in C with the C path, for the
    dtypes the key cache holds); a structured dtype renamed in place after a hit compiles
    again, in both modes."""
    np = _numpy()

    def compiler(req: CompileRequest) -> Any:
        baked = req.arguments["d"].descr
        return lambda d: baked

    f = specialize(lambda d: None, compiler=compiler, global_state=False, recompile_limit=None)
    plain = [np.dtype(c) for c in ("f8", "f4", "i8", "q", "u1", "c16", ">f8")]
    rec = np.dtype([("a", "f8"), ("b", "i4")])
    for _ in range(3):
        for d in (*plain, rec):
            assert f(d) == d.descr
    assert cache_of(f).stats().compiles == len(plain) + 1
    assert served_in_c(f) >= (2 * len(plain) if dispatch_mode == "c" else 0)
    rec.names = ("x", "y")
    assert f(rec) == [("x", "<f8"), ("y", "<i4")] == f(rec)
    stats = cache_of(f).stats()
    assert stats.compiles == len(plain) + 2 and stats.hits == 2 * (len(plain) + 1) + 1


def test_arrays_changed_in_place_after_a_hit_miss(dispatch_mode: str) -> None:
    """An entry hit for an array is never used for it once its writeability, shape, dtype
    or structured field names change in place: each change compiles (or hits) the entry of
    the new fact, in both modes."""
    np = _numpy()
    from jitguard._src.compiler.array_facts import array_fact

    def compiler(req: CompileRequest) -> Any:
        baked = array_fact(req.arguments["x"], True, True)
        return lambda x: baked

    f = specialize(lambda x: None, policy="types", global_state=False, recompile_limit=None,
                   compiler=compiler)
    a = np.zeros(8)
    rec = np.zeros(8, np.dtype([("p", "f4"), ("q", "i4")]))
    for _ in range(3):  # the first round compiles, the others hit the same entries
        for change in ("none", "readonly", "shape", "dtype", "renamed"):
            if change == "readonly":
                a.flags.writeable = False
            elif change == "shape":
                set_in_place(a, shape=(2, 4))
            elif change == "dtype":
                set_in_place(a, dtype=np.int64)
            elif change == "renamed":
                rec.dtype.names = ("q", "p") if rec.dtype.names == ("p", "q") else ("p", "q")
            for x in (a, rec):
                assert f(x) == array_fact(x, True, True)
                assert f(x) == array_fact(x, True, True)  # a hit, of the same entry
            a = np.zeros(8)
    stats = cache_of(f).stats()
    assert stats.compiles == 6  # a: plain, read-only, 2-d, int64; rec: two orders of names
    assert stats.hits == 3 * 5 * 2 * 2 - 6 and stats.failures == 0
    assert (served_in_c(f) > 0) == (dispatch_mode == "c")


@needs_c
@settings(max_examples=200, deadline=None)
@given(offset=st.integers(0, 31), align=st.sampled_from([2, 4, 8, 16, 32, 64]))
def test_data_ptr_aligned_in_c_equals_python(offset: int, align: int) -> None:
    """data_ptr_aligned of an exact ndarray in C equals the Python definition; anything
    else (a subclass, which may define data_ptr) is left to Python."""
    from jitguard._src.compiler.array_facts import data_ptr_aligned

    np = _numpy()
    a = np.zeros(64, dtype=np.uint8)[offset:]
    assert _c().data_ptr_aligned(a, align) == data_ptr_aligned(a, align)

    class Sub(np.ndarray):
        def data_ptr(self) -> int:
            return 3

    with pytest.raises(LookupError):
        _c().data_ptr_aligned(a.view(Sub), align)


def _array_policy() -> Any:
    np = _numpy()
    policy = jitguard.ArgPolicy()
    policy.register(np.ndarray, lambda ctx, s, v: ctx.guard(s, GuardBuilder.ARRAY_MATCH),
                    subclasses=False)
    policy.register(int, lambda ctx, s, v: ctx.guard(s, GuardBuilder.INT_CLASS))
    return policy


def test_array_and_int_class_hits(dispatch_mode: str) -> None:
    """ARRAY_MATCH and INT_CLASS entries: hits on any of 8 dtypes are served (in C with the C
    path), a new dtype or class compiles once, and a read-only array is its own entry."""
    np = _numpy()
    f = specialize(lambda x, n: (x.dtype.str, n), policy=_array_policy(), recompile_limit=64,
                   global_state=False,
                   compiler=lambda r: (lambda x, n, _d=r.arguments["x"].dtype.str,
                                       _c=r.arguments["n"] % 16: (_d, _c)))
    arrays = [np.zeros(4, dt) for dt in ("f8", "f4", "i8", "i4", "u1", "c16", "f2", "i2")]
    for a in arrays:
        assert f(a, 16) == (a.dtype.str, 0) and f(a, 3) == (a.dtype.str, 3)
    compiles = cache_of(f).stats().compiles
    before = served_in_c(f)
    for a in arrays:
        assert f(a, 32) == (a.dtype.str, 0) and f(a, 5) == (a.dtype.str, 3)
    assert cache_of(f).stats().compiles == compiles
    assert served_in_c(f) - before == (16 if dispatch_mode == "c" else 0)
    ro = np.zeros(4)
    ro.flags.writeable = False
    f(ro, 16)
    assert cache_of(f).stats().compiles == compiles + 1


# ---- residual checks run in C (a layout that is not exact) ------------------------------------


def _knob_reads(mode: str) -> tuple[list[Any], list[int], Any, int]:
    """Calls of a function whose entries all guard a registered global state (a residual no
    key proves): results, how often the state was read per call, the stats, C-served calls."""
    from jitguard import register_global_state
    from jitguard._src.global_state import global_states

    knob = {"v": 1, "reads": 0}

    def read() -> int:
        knob["reads"] += 1
        return knob["v"]

    old = fast.set_enabled(mode == "c")
    register_global_state("test_speedups_knob", read)
    try:
        s = specialize(lambda a, b: None, compiler=tagged, automatic_dynamic=True)
        out, reads = [], []
        for a, b, v in [(1, 2, 1), (1, 2, 1), (1, 3, 1), (1, 4, 1), (1, 4, 1), (1, 4, 2),
                        (1, 4, 2), (2, 4, 2), ("x", 4, 2), ("x", 4, 2), (1, 2, 1)]:
            knob["v"] = v
            before = knob["reads"]
            out.append(s(a, b))
            reads.append(knob["reads"] - before)
        return out, reads, cache_of(s).stats(), served_in_c(s)
    finally:
        global_states.unregister("test_speedups_knob")
        fast.set_enabled(old)


@needs_c
def test_residuals_run_once_and_in_c() -> None:
    """With a residual on every entry, the C path runs the generated code's loop itself:
    same results, stats and number of guard evaluations per call as pure Python, and the
    hits are served in C."""
    in_c = _knob_reads("c")
    in_py = _knob_reads("py")
    assert in_c[:3] == in_py[:3]
    assert in_py[3] == 0 and in_c[3] == in_c[2].hits > 0


def test_follower_and_linear_hits(dispatch_mode: str) -> None:
    """A dynamic entry behind static ones (a follower) and a call whose type fails the
    hoisted type (the linear entries) are hits, with the same counts in both modes."""
    s = specialize(lambda n: None, compiler=tagged, recompile_limit=None)
    s(1), s(2)  # the second call makes n dynamic: entry 2 guards type(n) is int
    for _ in range(3):
        assert s(1) == ((1,), (1,))
        assert s(100)[1] == (100,)
        assert s("a")[1] == ("a",)
    stats = cache_of(s).stats()
    assert stats.hits + stats.misses == 11 and stats.failures == 0


def test_union_dim_of_mixed_types(dispatch_mode: str) -> None:
    """Entries of mixed types (scalars by type, arrays by ARRAY_MATCH: a union dim) hit in
    both modes, in C with the C path, each value its own entry."""
    np = _numpy()

    def compiler(req: CompileRequest) -> Any:
        x = req.arguments["x"]
        baked = (type(x).__name__, str(getattr(x, "dtype", "")))
        return lambda x: baked

    f = specialize(lambda x: None, policy="types", global_state=False, recompile_limit=50,
                   compiler=compiler)
    values = [True, 1, 1.5, 2j, np.float32(1), np.int64(3), np.zeros(8), np.zeros(8, "f4")]
    for v in values:
        f(v)
    assert "x:typed" in cache_of(f).dispatcher.source.splitlines()[0]
    before = served_in_c(f)
    for v in values:
        assert f(v) == (type(v).__name__, str(getattr(v, "dtype", "")))
    assert cache_of(f).stats().compiles == len(values)
    assert cache_of(f).stats().hits == len(values)
    assert served_in_c(f) - before == (len(values) if dispatch_mode == "c" else 0)
