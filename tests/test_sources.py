"""The concrete sources: names, guard sources, reading values, identity and validation."""

from __future__ import annotations

import collections
import dataclasses
import os
import pickle
import subprocess
import sys
import types
import weakref
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from jitguard import (
    AttrSource,
    BackwardStateSource,
    CellContentsSource,
    ChainedSource,
    ClosureSource,
    CodeSource,
    ConstantSource,
    ConstDictKeySource,
    DefaultsSource,
    EphemeralSource,
    FSDPNNModuleSource,
    GetItemSource,
    GlobalSource,
    GlobalStateSource,
    GuardBuilder,
    GuardSource,
    JitGuardError,
    LocalSource,
    NNModuleSource,
    RandomValueSource,
    ShapeEnvSource,
    Source,
    SourceError,
    SyntheticLocalSource,
    TensorProperty,
    TensorPropertySource,
    TypeSource,
    UnreadableSourceError,
    UnspecializedBuiltinNNModuleSource,
    UnspecializedNNModuleSource,
    WeakRefCallSource,
    compile_guards,
)
from jitguard._src.guards import source_dataclass
from jitguard._src.more_sources import ClosureCellSource
from jitguard._src.sources import Chained, is_plain_identifier

L, G = LocalSource, GlobalSource
X = L("x")


def EQUALS_MATCH(builder: Any, guard: Any) -> None:
    pass


# ---- name() ----------------------------------------------------------------------------


NAMES: list[tuple[Source, str]] = [
    (L("x"), "L['x']"),
    (G("cfg"), "G['cfg']"),
    (AttrSource(G("cfg"), "lr"), "G['cfg'].lr"),
    (AttrSource(AttrSource(L("self"), "layers"), "weight"), "L['self'].layers.weight"),
    (GetItemSource(L("d"), "key"), "L['d']['key']"),
    (GetItemSource(L("t"), 0), "L['t'][0]"),
    (GetItemSource(L("t"), -1), "L['t'][-1]"),
    (GetItemSource(L("d"), None), "L['d'][None]"),
    (GetItemSource(L("d"), b"k"), "L['d'][b'k']"),
    (GetItemSource(L("d"), 1.5), "L['d'][1.5]"),
    (GetItemSource(L("d"), 2j), "L['d'][2j]"),
    (GetItemSource(L("d"), complex(1, -2)), "L['d'][(1-2j)]"),
    (GetItemSource(L("d"), (1, "a")), "L['d'][(1, 'a')]"),
    (GetItemSource(L("t"), slice(1, 3)), "L['t'][1:3]"),
    (GetItemSource(L("t"), slice(None, None, 2)), "L['t'][::2]"),
    (GetItemSource(L("t"), slice(-1, None)), "L['t'][-1:]"),
    (TypeSource(L("x")), "type(L['x'])"),
    (TensorPropertySource(L("x"), TensorProperty.SIZE, 1), "L['x'].size()[1]"),
    (TensorPropertySource(L("x"), TensorProperty.STRIDE, 0), "L['x'].stride()[0]"),
    (TensorPropertySource(L("x"), TensorProperty.STORAGE_OFFSET), "L['x'].storage_offset()"),
    (AttrSource(L("x"), "a-b"), "getattr(L['x'], 'a-b')"),
    (AttrSource(L("x"), "class"), "getattr(L['x'], 'class')"),
    (AttrSource(L("x"), "\u00e9"), "getattr(L['x'], '\u00e9')"),
    (ConstDictKeySource(L("d"), 0), "list(dict.keys(L['d']))[0]"),
    (DefaultsSource(G("g"), 0), "G['g'].__defaults__[0]"),
    (DefaultsSource(G("g"), "k", is_kw=True), "G['g'].__kwdefaults__['k']"),
    (CodeSource(L("f")), "L['f'].__code__"),
    (ClosureSource(L("f")), "L['f'].__closure__"),
    (
        CellContentsSource(GetItemSource(ClosureSource(L("f")), 0)),
        "L['f'].__closure__[0].cell_contents",
    ),
    (WeakRefCallSource(L("w")), "L['w']()"),
    (NNModuleSource(L("m")), "L['m']"),
    (AttrSource(UnspecializedNNModuleSource(G("m")), "w"), "G['m'].w"),
    (RandomValueSource(3), "random_value_3"),
    (SyntheticLocalSource("s"), "SYNTHETIC_LOCAL['s']"),
    (ConstantSource("c"), "c"),
    (EphemeralSource("why"), "<ephemeral: why>"),
    (EphemeralSource(), "<ephemeral>"),
    (ShapeEnvSource(), ""),
    (GlobalStateSource(), ""),
    (BackwardStateSource(), ""),
    (L("it's"), """L["it's"]"""),
]


@pytest.mark.parametrize(("source", "expected"), NAMES, ids=[n for _, n in NAMES])
def test_name_forms(source: Source, expected: str) -> None:
    """Each source names its value in the specification's form."""
    assert source.name() == expected


def test_name_is_cached_and_stable() -> None:
    """A chained source's name is the same string every time."""
    s = AttrSource(GetItemSource(L("d"), "k"), "a")
    assert s.name() is s.name()


# ---- guard_source() --------------------------------------------------------------------


GUARD_SOURCES: list[tuple[Source, GuardSource]] = [
    (L("x"), GuardSource.LOCAL),
    (G("x"), GuardSource.GLOBAL),
    (AttrSource(G("x"), "a"), GuardSource.GLOBAL),
    (TypeSource(GetItemSource(L("x"), 0)), GuardSource.LOCAL),
    (ConstantSource("c"), GuardSource.CONSTANT),
    (RandomValueSource(0), GuardSource.RANDOM_VALUE),
    (SyntheticLocalSource("s"), GuardSource.SYNTHETIC_LOCAL),
    (ShapeEnvSource(), GuardSource.SHAPE_ENV),
    (GlobalStateSource(), GuardSource.GLOBAL),
    (BackwardStateSource(), GuardSource.BACKWARD_STATE),
    (EphemeralSource(), GuardSource.EPHEMERAL),
    (NNModuleSource(L("m")), GuardSource.LOCAL_SPECIALIZED_NN_MODULE),
    (NNModuleSource(G("m")), GuardSource.GLOBAL_SPECIALIZED_NN_MODULE),
    (AttrSource(NNModuleSource(L("m")), "w"), GuardSource.LOCAL_SPECIALIZED_NN_MODULE),
    (FSDPNNModuleSource(L("m")), GuardSource.LOCAL_FSDP_MODULE),
    (FSDPNNModuleSource(G("m")), GuardSource.GLOBAL_FSDP_MODULE),
    (UnspecializedNNModuleSource(L("m")), GuardSource.LOCAL_UNSPECIALIZED_NN_MODULE),
    (UnspecializedNNModuleSource(G("m")), GuardSource.GLOBAL_UNSPECIALIZED_NN_MODULE),
    (
        UnspecializedBuiltinNNModuleSource(L("m")),
        GuardSource.LOCAL_UNSPECIALIZED_BUILTIN_NN_MODULE,
    ),
    (
        UnspecializedBuiltinNNModuleSource(G("m")),
        GuardSource.GLOBAL_UNSPECIALIZED_BUILTIN_NN_MODULE,
    ),
    (
        NNModuleSource(AttrSource(NNModuleSource(L("m")), "sub")),
        GuardSource.LOCAL_SPECIALIZED_NN_MODULE,
    ),
]


@pytest.mark.parametrize(
    ("source", "expected"), GUARD_SOURCES, ids=[repr(s) for s, _ in GUARD_SOURCES]
)
def test_guard_source(source: Source, expected: GuardSource) -> None:
    """Each source reports where its root lives; chains inherit it, nn flavours relabel it."""
    assert source.guard_source() is expected


# ---- get_value on a real frame ---------------------------------------------------------


CFG = types.SimpleNamespace(lr=0.1)


def with_defaults(a: int, b: int = 2, *, k: int = 3) -> int:
    return a + b + k


class FakeTensor:
    """Duck-typed tensor metadata."""

    def size(self) -> tuple[int, ...]:
        return (2, 3)

    def stride(self) -> tuple[int, ...]:
        return (3, 1)

    def storage_offset(self) -> int:
        return 7


class Referent:
    pass


def make_closure() -> Any:
    captured = ["cell"]

    def inner() -> list[str]:
        return captured

    return inner


def capture_frame(x: Any, d: Any, t: Any, f: Any, w: Any, m: Any) -> types.FrameType:
    random_value_0 = 0.5  # noqa: F841  (read through the frame by RandomValueSource)
    synth = "synthetic"  # noqa: F841
    return sys._getframe()


REFERENT = Referent()
FRAME = capture_frame(
    x=FakeTensor(),
    d={"key": "v", 2: "two"},
    t=[10, 20, 30, 40],
    f=make_closure(),
    w=weakref.ref(REFERENT),
    m=types.SimpleNamespace(weight="W"),
)
CONSTANT_c = 42

VALUES: list[tuple[Source, Any]] = [
    (L("x"), FRAME.f_locals["x"]),
    (G("CFG"), CFG),
    (AttrSource(G("CFG"), "lr"), 0.1),
    (GetItemSource(L("d"), "key"), "v"),
    (GetItemSource(L("d"), 2), "two"),
    (GetItemSource(L("t"), 0), 10),
    (GetItemSource(L("t"), -1), 40),
    (GetItemSource(L("t"), slice(1, 3)), [20, 30]),
    (GetItemSource(L("t"), slice(None, None, 2)), [10, 30]),
    (TypeSource(L("x")), FakeTensor),
    (TensorPropertySource(L("x"), TensorProperty.SIZE, 1), 3),
    (TensorPropertySource(L("x"), TensorProperty.STRIDE, 0), 3),
    (TensorPropertySource(L("x"), TensorProperty.STORAGE_OFFSET), 7),
    (ConstDictKeySource(L("d"), 1), 2),
    (DefaultsSource(G("with_defaults"), 0), 2),
    (DefaultsSource(G("with_defaults"), "k", is_kw=True), 3),
    (CodeSource(G("with_defaults")), with_defaults.__code__),
    (CellContentsSource(GetItemSource(ClosureSource(L("f")), 0)), ["cell"]),
    (WeakRefCallSource(L("w")), REFERENT),
    (AttrSource(NNModuleSource(L("m")), "weight"), "W"),
    (FSDPNNModuleSource(L("m")), FRAME.f_locals["m"]),
    (RandomValueSource(0), 0.5),
    (SyntheticLocalSource("synth"), "synthetic"),
    (ConstantSource("CONSTANT_c"), 42),
]


@pytest.mark.parametrize(("source", "expected"), VALUES, ids=[s.name() for s, _ in VALUES])
def test_get_value_on_real_frame(source: Source, expected: Any) -> None:
    """get_value reads a real frame's locals and globals."""
    value = source.get_value(FRAME.f_locals, FRAME.f_globals)
    assert value == expected
    if not isinstance(expected, (int, float, str, list)):
        assert value is expected


LG_VALUES = [
    (s, v)
    for s, v in VALUES
    if not isinstance(s, (RandomValueSource, SyntheticLocalSource, ConstantSource))
]


@pytest.mark.parametrize(("source", "expected"), LG_VALUES, ids=[s.name() for s, _ in LG_VALUES])
def test_name_evaluates_like_get_value_on_real_frame(source: Source, expected: Any) -> None:
    """An L/G source's name evaluated with L and G gives get_value's value."""
    env = {"L": FRAME.f_locals, "G": FRAME.f_globals}
    assert eval(compile(source.name(), "<s>", "eval"), env) == expected


def test_get_value_missing_key_raises_key_error() -> None:
    """A root missing from the frame raises KeyError."""
    with pytest.raises(KeyError):
        L("nope").get_value({}, {})
    with pytest.raises(KeyError):
        AttrSource(G("nope"), "a").get_value({}, {})


@pytest.mark.parametrize(
    "source",
    [
        ShapeEnvSource(),
        GlobalStateSource(),
        BackwardStateSource(),
        EphemeralSource("tmp"),
        AttrSource(EphemeralSource("tmp"), "a"),
    ],
    ids=repr,
)
def test_unreadable_sources_raise(source: Source) -> None:
    """Sources without a frame value raise UnreadableSourceError (a LookupError)."""
    with pytest.raises(UnreadableSourceError, match="no value in a frame") as info:
        source.get_value({"x": 1}, {"x": 1})
    assert isinstance(info.value, LookupError) and isinstance(info.value, JitGuardError)


# ---- flags -----------------------------------------------------------------------------


def test_is_dict_key() -> None:
    """ConstDictKeySource, and anything chained on one, is a dict key."""
    k = ConstDictKeySource(L("d"), 0)
    assert k.is_dict_key()
    assert AttrSource(k, "a").is_dict_key()
    assert not GetItemSource(L("d"), 0).is_dict_key()
    assert not X.is_dict_key()


def test_is_ephemeral() -> None:
    """EphemeralSource, and anything chained on one, is ephemeral."""
    assert EphemeralSource().is_ephemeral()
    assert GetItemSource(EphemeralSource(), 0).is_ephemeral()
    assert not X.is_ephemeral() and not AttrSource(X, "a").is_ephemeral()


def test_is_plain_identifier() -> None:
    """Only ASCII, non-keyword identifiers may follow a dot."""
    assert is_plain_identifier("weight") and is_plain_identifier("_x1")
    assert not is_plain_identifier("class")
    assert not is_plain_identifier("a-b")
    assert not is_plain_identifier("\u00e9")
    assert not is_plain_identifier("")


# ---- identity --------------------------------------------------------------------------


def test_sources_are_frozen() -> None:
    """Sources cannot be mutated."""
    for s in (X, G("g"), AttrSource(X, "a"), GetItemSource(X, 0), EphemeralSource("e")):
        field = dataclasses.fields(s)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(s, field, None)


def test_equality_and_hash_by_value() -> None:
    """Sources built alike are equal, hash alike and work as one dict key."""
    a = AttrSource(GetItemSource(L("d"), "k"), "a")
    b = AttrSource(GetItemSource(L("d"), "k"), "a")
    assert a == b and hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert a != AttrSource(GetItemSource(L("d"), "k"), "b")
    assert a != AttrSource(GetItemSource(L("d"), "j"), "a")


def test_different_kinds_are_unequal() -> None:
    """Sources of different kinds never compare equal, even with the same name or field."""
    assert L("x") != G("x")
    assert L("x") != SyntheticLocalSource("x")
    assert L("m") != NNModuleSource(L("m"))
    assert NNModuleSource(L("m")) != FSDPNNModuleSource(L("m"))
    assert CodeSource(X) != ClosureSource(X)
    assert len({L("x"), G("x"), SyntheticLocalSource("x")}) == 3


def test_local_is_input_is_metadata() -> None:
    """LocalSource's is_input does not take part in equality or hash."""
    a, b = L("x"), L("x", is_input=True)
    assert a == b and hash(a) == hash(b)
    assert b.is_input is True
    assert AttrSource(a, "w") == AttrSource(b, "w")


def test_slice_index_equals_tuple_form() -> None:
    """A slice index is stored as a (start, stop, step) tuple flagged as a slice."""
    a = GetItemSource(L("t"), slice(1, 3))
    assert a == GetItemSource(L("t"), (1, 3, None), index_is_slice=True)
    assert a.index == (1, 3, None) and a.index_is_slice
    assert a != GetItemSource(L("t"), (1, 3, None))


def test_hash_is_cached_but_not_pickled() -> None:
    """Pickling round-trips a source without its per-process caches."""
    s = AttrSource(GetItemSource(L("d"), "key"), "a")
    hash(s)
    s.name()
    loaded = pickle.loads(pickle.dumps(s))
    assert loaded == s and hash(loaded) == hash(s) and loaded.name() == s.name()
    assert not [k for k in pickle.loads(pickle.dumps(s)).__dict__ if k.startswith("_jitguard")]


_PICKLE = """
import pickle, sys
from jitguard import AttrSource, GetItemSource, GlobalSource, LocalSource
s = AttrSource(GetItemSource(GlobalSource("cfg"), "key"), "lr")
{body}
"""


def test_unpickled_source_hashes_right_in_another_process(tmp_path: Any) -> None:
    """A source pickled after hashing finds its equal in a process with another hash seed."""
    path = tmp_path / "src.pkl"
    dump = f"hash(s); s.name(); open({str(path)!r}, 'wb').write(pickle.dumps(s))"
    load = (
        f"t = pickle.loads(open({str(path)!r}, 'rb').read())\n"
        "assert t == s, (t, s)\n"
        "assert hash(t) == hash(s), 'stale hash'\n"
        "assert {s: 1}[t] == 1\n"
        "assert t.name() == \"G['cfg']['key'].lr\"\n"
    )
    for seed, body in (("1", dump), ("2", load)):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-c", _PICKLE.format(body=body)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr


# ---- validation ------------------------------------------------------------------------


Point = collections.namedtuple("Point", "x y")


class OddFloat(float):
    def __repr__(self) -> str:
        return "odd"


BAD: list[Any] = [
    lambda: L(1),
    lambda: G(None),
    lambda: AttrSource(X, "a.b"),
    lambda: AttrSource(X, 1),
    lambda: AttrSource("L['x']", "a"),
    lambda: TypeSource(None),
    lambda: GetItemSource(X, object()),
    lambda: GetItemSource(X, [1]),
    lambda: GetItemSource(X, float("nan")),
    lambda: GetItemSource(X, float("inf")),
    lambda: GetItemSource(X, complex(1, float("nan"))),
    lambda: GetItemSource(X, Point(1, 2)),
    lambda: GetItemSource(X, OddFloat(1.0)),
    lambda: GetItemSource(X, (1, [2])),
    lambda: GetItemSource(X, (1, 2), index_is_slice=True),
    lambda: GetItemSource(X, (1.0, 2, None), index_is_slice=True),
    lambda: GetItemSource(X, slice(True, 2)),
    lambda: ConstDictKeySource(X, "0"),
    lambda: ConstDictKeySource(X, True),
    lambda: DefaultsSource(G("g"), "0"),
    lambda: DefaultsSource(G("g"), 0, is_kw=True),
    lambda: TensorPropertySource(X, TensorProperty.SIZE),
    lambda: TensorPropertySource(X, TensorProperty.STRIDE, "0"),
    lambda: TensorPropertySource(X, TensorProperty.STORAGE_OFFSET, 0),
    lambda: TensorPropertySource(X, "size", 0),
]


@pytest.mark.parametrize("build", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_construction_raises_source_error(build: Any) -> None:
    """Arguments that cannot name a value raise SourceError (a ValueError)."""
    with pytest.raises(SourceError) as info:
        build()
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: LocalSource(3), r"LocalSource needs a str name, got 3"),
        (lambda: GlobalSource(None), r"GlobalSource needs a str name, got None"),
        (lambda: AttrSource("x", "a"), r"AttrSource needs a Source as base, got 'x'"),
        (lambda: GetItemSource(None, 0), r"GetItemSource needs a Source as base, got None"),
        (lambda: AttrSource(X, 3), r"AttrSource member must be a str, got 3"),
        (lambda: ConstDictKeySource(X, "k"), r"ConstDictKeySource index must be an int"),
        (lambda: TensorPropertySource(X, "size", 0), r"prop must be a TensorProperty"),
        (lambda: TensorPropertySource(X, TensorProperty.SIZE, "0"), r"needs an int index"),
        (lambda: GetItemSource(X, slice("a", None)), r"slice bounds must be ints or None"),
        (lambda: DefaultsSource(X, "k"), r"idx_key must be a int \(position\), got 'k'"),
        (lambda: DefaultsSource(X, 0, is_kw=True), r"must be a str \(keyword default name\)"),
        (lambda: ClosureCellSource(X, 3, 0), r"ClosureCellSource needs a variable name"),
    ],
)
def test_an_argument_of_the_wrong_type_is_a_type_error(build: Any, says: str) -> None:
    """A source given an argument of the wrong type raises at the call a SourceTypeError,
    which is a TypeError (and a SourceError), naming what was expected and what came."""
    from jitguard.errors import SourceTypeError

    with pytest.raises(TypeError, match=says) as info:
        build()
    assert isinstance(info.value, SourceTypeError) and isinstance(info.value, SourceError)


def test_dotted_member_error_says_how_to_chain() -> None:
    """A dotted AttrSource member is refused with a hint to chain sources."""
    with pytest.raises(SourceError, match="chain one AttrSource per attribute"):
        AttrSource(X, "a.b")


@pytest.mark.parametrize(
    "build",
    [
        lambda b: AttrSource(b, "a"),
        lambda b: GetItemSource(b, 0),
        lambda b: TypeSource(b),
        lambda b: NNModuleSource(b),
        lambda b: ConstDictKeySource(b, 0),
    ],
)
def test_no_chained_source_on_synthetic_local(build: Any) -> None:
    """A synthetic local allows no sub-guards: chaining on it is a SourceError."""
    with pytest.raises(SourceError, match="allows no sub-guards"):
        build(SyntheticLocalSource("s"))


# ---- hypothesis: hostile names ---------------------------------------------------------

HOSTILE = [
    "'",
    '"',
    "'''",
    '"""',
    "\\",
    "\\'",
    "\n",
    "\r\n",
    "]",
    "[",
    "'] + G['x",
    "#",
    "# comment",
    "__import__('os')",
    "\u00e9",
    "\U0001d518",
    "\x00",
    "",
    " ",
    "class",
    "None",
    "a-b",
    "{x}",
    "%s",
]

hostile_text = st.sampled_from(HOSTILE) | st.text(max_size=10)
scalar_keys = (
    hostile_text
    | st.integers()
    | st.binary(max_size=6)
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=False, allow_infinity=False)
)
keys = st.recursive(
    scalar_keys, lambda inner: st.tuples(inner) | st.tuples(inner, inner), max_leaves=4
)
attr_names = hostile_text.filter(lambda s: "." not in s)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("attr"), attr_names),
        st.tuples(st.just("item"), keys),
        st.tuples(st.just("dictkey"), st.integers(min_value=0, max_value=2)),
        st.tuples(st.just("relabel"), st.sampled_from([NNModuleSource, FSDPNNModuleSource])),
    ),
    max_size=4,
)


class Box:
    """Holds any attribute name; hashable by identity."""


class HDict(dict):  # type: ignore[type-arg]
    """A dict hashable by identity, so that it can itself be a dict key."""

    __hash__ = object.__hash__  # type: ignore[assignment]


def _build(root: Source, chain: list[tuple[str, Any]], leaf: Any) -> tuple[Source, Any]:
    """The source for ``chain`` on ``root`` and the root value under which it reads ``leaf``."""
    src = root
    for kind, arg in chain:
        if kind == "attr":
            src = AttrSource(src, arg)
        elif kind == "item":
            src = GetItemSource(src, arg)
        elif kind == "dictkey":
            src = ConstDictKeySource(src, arg)
        else:
            src = arg(src)
    value = leaf
    for kind, arg in reversed(chain):
        if kind == "attr":
            box = Box()
            try:
                setattr(box, arg, value)
            except TypeError:
                assume(False)
            value = box
        elif kind == "item":
            value = HDict({arg: value})
        elif kind == "dictkey":
            d = HDict({("filler", i): None for i in range(arg)})
            d[value] = None
            value = d
    return src, value


@settings(max_examples=150, deadline=None)
@given(root_name=hostile_text, is_global=st.booleans(), chain=steps, take_type=st.booleans())
def test_hostile_names_are_valid_expressions_that_read_the_value(
    root_name: str, is_global: bool, chain: list[tuple[str, Any]], take_type: bool
) -> None:
    """For hostile keys and attributes, name() compiles and evaluates like get_value."""
    leaf = Box()
    root: Source = G(root_name) if is_global else L(root_name)
    src, value = _build(root, chain, leaf)
    f_locals, f_globals = ({}, {root_name: value}) if is_global else ({root_name: value}, {})
    assert src.get_value(f_locals, f_globals) is leaf
    if take_type:
        src = TypeSource(src)
    name = src.name()
    assert "\n" not in name
    code = compile(name, "<s>", "eval")
    got = eval(code, {"L": f_locals, "G": f_globals})
    assert got is src.get_value(f_locals, f_globals)
    assert got is (Box if take_type else leaf)


@settings(max_examples=100, deadline=None)
@given(root_name=hostile_text, chain=steps)
def test_hostile_emit_matches_get_value(root_name: str, chain: list[tuple[str, Any]]) -> None:
    """The compiled path (emit with bound constants) reads the same value as get_value."""
    leaf = Box()
    src, value = _build(L(root_name), chain, leaf)
    namespace: dict[str, Any] = {}

    def bind(obj: Any, hint: str) -> str:
        name = f"_{hint}_{len(namespace)}"
        namespace[name] = obj
        return name

    def expr(s: Source) -> str:
        if isinstance(s, LocalSource):
            return f"L[{bind(s.local_name, 'name')}]"
        assert isinstance(s, ChainedSource)
        return s.emit(expr(s.base), bind)

    text = expr(src)
    compile(text, "<emit>", "eval")
    assert eval(text, {"L": {root_name: value}, **namespace}) is leaf


# ---- the source protocol: a new source is one small class ---------------------------------


@source_dataclass
class LastItem(Chained):
    """The last item of a sequence, written only as the protocol asks: render and access."""

    def render(self, base: str, bind: Any) -> str:
        return f"{base}[{bind(-1, 'last')}]"

    def access(self, base_value: Any) -> Any:
        return base_value[-1]


@source_dataclass
class Doubled(ChainedSource):
    """A chained source that says only how to compute its value (no code of its own)."""

    def name(self) -> str:
        return f"2 * {self.base.name()}"

    def access(self, base_value: Any) -> Any:
        return 2 * base_value


@source_dataclass
class Slot(Source):
    """A root source that says only where it sits in the frame."""

    key: str

    def name(self) -> str:
        return f"L[{self.key!r}]"

    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL

    def frame_slot(self) -> Any:
        return ("L", self.key)


def test_new_chained_source_needs_only_render_and_access() -> None:
    """A chained source defined here, with one render, has its name, its base's guard
    source and chain, reads the same value both ways, and guards like a built-in one."""
    src = LastItem(AttrSource(L("m"), "xs"))
    assert src.name() == "L['m'].xs[-1]"
    assert src.guard_source() is GuardSource.LOCAL
    assert src.chain() == (src, AttrSource(L("m"), "xs"), L("m"))
    m = types.SimpleNamespace(xs=[1, 2])
    assert src.get_value({"m": m}, {}) == 2
    check = compile_guards(
        [src.make_guard(GuardBuilder.EQUALS_MATCH)], f_locals={"m": m}, arg_names=["m"]
    )
    assert check.fn(types.SimpleNamespace(xs=[9, 2])) is True
    assert check.fn(types.SimpleNamespace(xs=[2, 1])) is False
    assert check.fn(types.SimpleNamespace(xs=[])) is False
    assert "L['m'].xs[-1]" in check.source  # the comment: the name
    assert all("-1" not in line.split("#")[0] for line in check.source.splitlines())
    assert [f.reason for f in check.explain(types.SimpleNamespace(xs=[2, 1]))] == [
        "L['m'].xs[-1] == 2 failed: got 1"
    ]


def test_chained_source_with_only_access_still_compiles() -> None:
    """A ChainedSource that writes no code is read in the check through its access."""
    src = Doubled(L("n"))
    check = compile_guards([src.make_guard(GuardBuilder.EQUALS_MATCH)], f_locals={"n": 3})
    assert check.fn({"n": 3}) is True and check.fn({"n": 4}) is False
    assert [f.reason for f in check.explain({"n": 4})] == ["2 * L['n'] == 6 failed: got 8"]


def test_root_source_needs_only_a_frame_slot() -> None:
    """A root source defined here, with a frame slot, reads the frame both ways."""
    src = Slot("k")
    assert src.get_value({"k": 5}, {}) == 5 and src.chain() == (src,)
    check = compile_guards([src.make_guard(GuardBuilder.EQUALS_MATCH)], f_locals={"k": 5})
    assert check.fn({"k": 5}) is True and check.fn({"k": 6}) is False
    assert Source().frame_slot() is None
