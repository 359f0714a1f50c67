"""The generated check function: its source, reads, failures, identity binding and errors."""

from __future__ import annotations

import ast
import functools
import gc
import inspect
import io
import linecache
import re
import tokenize
import traceback
from typing import Any

import pytest

from _helpers import Counted, Obj, record_compiles
from jitguard import (
    AttrSource,
    CheckFunction,
    EmitContext,
    EphemeralSource,
    GetItemSource,
    GlobalSource,
    Guard,
    GuardBuilder,
    GuardCompileError,
    GuardKind,
    LocalSource,
    ShapeEnvSource,
    Source,
    compile_guards,
    register_constant_type,
    register_guard_kind,
)
from jitguard._src.compiler import codecache, writer

L = LocalSource
EQ = GuardBuilder.EQUALS_MATCH
TYPE = GuardBuilder.TYPE_MATCH


class Boom(Exception):
    pass


class HostileAttr:
    """__getattr__ raises something other than AttributeError."""

    def __getattr__(self, name: str) -> Any:
        raise Boom(f"no reading {name}")


class HostileLen:
    def __len__(self) -> int:
        raise Boom("no len")


class HostileKey:
    """Hashes fine until ``armed``; then __hash__ and __eq__ raise."""

    armed = False

    def __hash__(self) -> int:
        if HostileKey.armed:
            raise Boom("no hash")
        return 1

    def __eq__(self, other: object) -> bool:
        if HostileKey.armed:
            raise Boom("no eq")
        return other is self

    def __repr__(self) -> str:
        return "HostileKey()"


class RecordingStr(str):
    """A str subclass that records every __eq__ call."""

    calls = 0

    def __eq__(self, other: object) -> bool:
        RecordingStr.calls += 1
        return True

    __hash__ = str.__hash__


class Exact:
    """A registered constant type whose __eq__ raises once ``armed``."""

    armed = False

    def __eq__(self, other: object) -> bool:
        if Exact.armed:
            raise Boom("no eq")
        return isinstance(other, Exact)

    __hash__ = object.__hash__


register_constant_type(Exact)


def compiled(guards: list[Guard], frame: dict[str, Any], **kw: Any) -> CheckFunction:
    return compile_guards(guards, f_locals=frame, **kw)


def reasons(check: CheckFunction, *args: Any) -> list[str]:
    return [f.reason for f in check.explain(*args)]


def code_tokens(source: str) -> list[tokenize.TokenInfo]:
    """The tokens of ``source`` that are code (no comments, no layout)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER}
    return [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in skip]


def assigned_reads(source: str) -> list[str]:
    """The right-hand side of every ``vN = ...`` read, unparsed."""
    fn = ast.parse(source).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return [ast.unparse(node.value) for node in ast.walk(fn) if isinstance(node, ast.Assign)]


# ---- reads -------------------------------------------------------------------------------


def chain_guards() -> list[Guard]:
    m = L("m")
    a = AttrSource(m, "a")
    b = AttrSource(a, "b")
    return [
        m.make_guard(TYPE),
        a.make_guard(TYPE),
        AttrSource(b, "x").make_guard(EQ),
        AttrSource(b, "y").make_guard(EQ),
        AttrSource(a, "c").make_guard(EQ),
        b.make_guard(TYPE),
    ]


def chain_value() -> Obj:
    return Obj(a=Obj(b=Obj(x=1, y="y"), c=2.5))


def test_each_source_read_once_shared_prefix() -> None:
    """Every source is read into a variable once; a chain's prefix is shared."""
    check = compiled(chain_guards(), {"m": chain_value()}, arg_names=["m"])
    reads = assigned_reads(check.source)
    assert sorted(reads) == sorted(["l_m.a", "v0.b", "v0.c", "v1.x", "v1.y"])
    attrs = [n.attr for n in ast.walk(ast.parse(check.source)) if isinstance(n, ast.Attribute)]
    assert sorted(attrs) == ["a", "b", "c", "x", "y"]


def test_each_source_read_once_at_runtime() -> None:
    """At run time each attribute is fetched once per call, however many guards use it."""
    inner = Counted(x=1, y=2)
    outer = Counted(b=inner, c=3)
    m = L("m")
    b = AttrSource(m, "b")
    guards = [
        m.make_guard(TYPE),
        b.make_guard(TYPE),
        AttrSource(b, "x").make_guard(EQ),
        AttrSource(b, "y").make_guard(EQ),
        AttrSource(m, "c").make_guard(EQ),
        AttrSource(m, "c").make_guard(GuardBuilder.NOT_NONE),
    ]
    check = compiled(guards, {"m": outer}, arg_names=["m"])
    outer.reads.clear()
    inner.reads.clear()
    assert check.fn(outer) is True
    assert outer.reads == {"b": 1, "c": 1}
    assert inner.reads == {"x": 1, "y": 1}


def _item_guards(n: int, read: range) -> list[Guard]:
    xs = L("xs")
    return [xs.make_guard(GuardBuilder.SEQUENCE_LENGTH),
            *(GetItemSource(xs, i).make_guard(EQ) for i in read)]


@pytest.mark.parametrize("kind", [list, tuple])
def test_items_of_a_pinned_sequence_read_in_one_unpacking(kind: type) -> None:
    """Items of a list or tuple whose type and length a test pinned are read in one
    unpacking ([Note: Unpacked items]); the check accepts and rejects as item reads would,
    and a failure still names the item."""
    check = compiled(_item_guards(4, range(4)), {"xs": kind([1, 2, 3, 4])}, arg_names=["xs"])
    assert re.search(r"^ +v\d+, v\d+, v\d+, v\d+ = l_xs +# L\['xs'\]\[0\], \.\.\., \[3\]$",
                     check.source, re.M), check.source
    assert "l_xs[" not in check.source
    assert check.fn(kind([1, 2, 3, 4])) is True
    assert check.fn(kind([1, 2, 3, 5])) is False
    assert check.fn(kind([1, 2, 3])) is False
    assert check.fn(kind([1, 2, 3, 4, 5])) is False
    assert check.fn([1, 2, 3, 4] if kind is tuple else (1, 2, 3, 4)) is False
    assert reasons(check, kind([1, 9, 3, 4])) == ["L['xs'][1] == 2 failed: got 9"]


def test_items_read_one_by_one_without_a_pinned_length_or_when_few() -> None:
    """No unpacking where no test pinned the length (an unpacking would be stricter than
    the guards), nor where fewer than half of the items are read."""
    xs = L("xs")
    unpinned = [xs.make_guard(TYPE), *(GetItemSource(xs, i).make_guard(EQ) for i in range(4))]
    check = compiled(unpinned, {"xs": [1, 2, 3, 4]}, arg_names=["xs"])
    assert "l_xs[" in check.source and " = l_xs\n" not in check.source
    assert check.fn([1, 2, 3, 4, 5]) is True  # more items: the guards do not mind
    few = compiled(_item_guards(8, range(1)), {"xs": list(range(1, 9))}, arg_names=["xs"])
    assert "l_xs[" in few.source
    assert few.fn([1, 0, 0, 0, 0, 0, 0, 0]) is True


def test_mapping_mode_reads_each_local_once() -> None:
    """In mapping mode each local is one L[...] subscript, bound by name."""
    guards = [L("x").make_guard(TYPE), L("x").make_guard(EQ), L("y").make_guard(EQ)]
    check = compiled(guards, {"x": 1, "y": "s"})
    reads = assigned_reads(check.source)
    assert len(reads) == 2 and all(re.fullmatch(r"L\[___\w+\]", r) for r in reads)
    assert check.source.startswith("def check_guards(L):")


def test_shallow_checks_guard_deep_reads() -> None:
    """A failing type check stops the check before anything is read through the value."""

    class NotObj(Counted):
        pass

    guards = [L("m").make_guard(TYPE), AttrSource(L("m"), "c").make_guard(EQ)]
    check = compiled(guards, {"m": Obj(c=1)}, arg_names=["m"])
    impostor = NotObj(c=1)
    assert check.fn(impostor) is False
    assert impostor.reads == {}


# ---- constants ---------------------------------------------------------------------------


def test_constants_never_pasted() -> None:
    """No constant (key, attribute, value) is text in the code: only in comments."""
    secret = "s3cr3t-value\n'\"#"
    d = {"k3y": secret, 12345: b"bytes!", "t": ("tup", 678)}
    frame = {"d": d, "o": Obj(**{"not an identifier": 2.75}), "n": 424242}
    guards = [
        GetItemSource(L("d"), "k3y").make_guard(EQ),
        GetItemSource(L("d"), 12345).make_guard(EQ),
        GetItemSource(L("d"), "t").make_guard(EQ),
        L("d").make_guard(GuardBuilder.DICT_KEYS_MATCH),
        L("d").make_guard(functools.partial(GuardBuilder.DICT_CONTAINS, key="needle", invert=True)),
        AttrSource(L("o"), "not an identifier").make_guard(EQ),
        L("n").make_guard(EQ),
    ]
    check = compiled(guards, frame)
    tokens = code_tokens(check.source)
    assert [t.string for t in tokens if t.type in (tokenize.STRING, tokenize.NUMBER)] == []
    code_text = " ".join(t.string for t in tokens)
    for text in ("s3cr3t", "k3y", "12345", "bytes!", "678", "needle", "identifier", "424242",
                 "2.75"):
        assert text not in code_text
    # Comments show what is guarded, with escapes: the newline in the secret cannot end one.
    assert "L['d']['k3y'] == 's3cr3t-value\\n" in check.source
    assert all(line.startswith(("def ", "    ")) for line in check.source.splitlines())
    assert check.fn(frame) is True
    assert check.fn({**frame, "d": {**d, "k3y": "other"}}) is False


def test_coinciding_constants_do_not_change_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal scalar constants (a == b == 5) give the same code as distinct ones (5, 6): the
    second check reuses the first's compiled code, and each answers for its own values."""
    calls = record_compiles(monkeypatch)

    def check_for(a: Any, b: Any, c: Any, name: str) -> CheckFunction:
        frame = {"a": a, "b": b, "c": c}
        return compiled([L(k).make_guard(EQ) for k in frame], frame, arg_names=list(frame),
                        name=name)

    same = check_for(5, 5, 5.0, "same")
    distinct = check_for(5, 6, 5.0, "distinct")
    assert len(calls) == 1
    assert same.fn(5, 5, 5.0) is True and same.fn(5, 6, 5.0) is False
    assert same.fn(5, 5, 5) is False  # 5 is not 5.0: the types differ
    assert distinct.fn(5, 6, 5.0) is True and distinct.fn(5, 5, 5.0) is False


class ManyObjects(GuardKind):
    """Test kind: the value is a tuple holding exactly these objects, each bound under a
    hint that ends in digits like the others (x1 + 23 and x12 + 3 must not collide)."""

    name = "TEST_MANY_OBJECTS"

    def expect(self, value: Any, guard: Any, **options: Any) -> Any:
        return tuple(value)

    def holds(self, value: Any, params: Any) -> bool:
        return type(value) is tuple and len(value) == len(params) and all(
            v is p for v, p in zip(value, params, strict=True)
        )

    def emit(self, var: str, params: Any, ctx: EmitContext) -> str:
        hints = ("x1", "x12", "x", "x_1")
        parts = [f"{var}[{i}] is {ctx.const(p, hints[i % 4])}" for i, p in enumerate(params)]
        exact = f"type({var}) is {ctx.const(tuple, 'tuple_')} and len({var}) == {len(params)}"
        return " and ".join([exact, *parts])

    def code(self, name: str, params: Any) -> str:
        return f"{name} holds {len(params)} given objects"

    def reason(self, name: str, value: Any, params: Any) -> str:
        return f"{name} holds other objects"


def test_bound_names_are_unique() -> None:
    """Constants bound under hints that end in digits never share a name: a check of 120
    distinct objects accepts exactly those objects, and fails when any one is swapped."""
    kind = register_guard_kind(ManyObjects(), replace=True)
    objs = tuple(object() for _ in range(120))
    check = compiled([L("t").make_guard(kind)], {"t": objs}, arg_names=["t"])
    assert check.fn(objs) is True
    for i in (0, 1, 2, 3, 12, 23, 119):
        swapped = (*objs[:i], object(), *objs[i + 1:])
        assert check.fn(swapped) is False, i


def test_same_structure_reuses_compiled_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recompile with other constants reuses the compiled code; answers stay exact."""
    calls = record_compiles(monkeypatch)

    def guards() -> list[Guard]:
        return [L("n").make_guard(EQ), GetItemSource(L("d"), "k").make_guard(EQ),
                L("d").make_guard(GuardBuilder.DICT_KEYS_MATCH),
                L("flag").make_guard(GuardBuilder.CONSTANT_MATCH)]

    def build(n: int, k: str, flag: bool, name: str) -> CheckFunction:
        frame = {"n": n, "d": {"k": k}, "flag": flag}
        return compiled(guards(), frame, arg_names=["n", "d", "flag"], name=name)

    first = build(12345, "a", True, "f1")
    second = build(12345, "b", True, "f2")
    third = build(54321, "b", False, "f3")
    assert len(calls) == 1 and "12345" not in calls[0] and "#" not in calls[0]
    assert "True" not in calls[0].split("return True")[0]
    assert first.fn.__code__ is not second.fn.__code__
    assert first.fn.__code__.co_code == third.fn.__code__.co_code
    assert third.fn.__code__.co_filename == third.filename
    assert third.fn.__name__ == "check_f3"
    # [Note: Code names on 3.13]: there the code keeps the text's fixed name
    assert third.fn.__code__.co_name == (writer.CODE_NAME if codecache.RENAME_INTERNS
                                         else "check_f3")
    assert (first.fn(12345, {"k": "a"}, True), first.fn(12345, {"k": "b"}, True)) == (True, False)
    assert (second.fn(12345, {"k": "b"}, True), second.fn(54321, {"k": "b"}, True)) == (True, False)
    assert (third.fn(54321, {"k": "b"}, False), third.fn(54321, {"k": "b"}, True)) == (True, False)
    assert third.fn(54321, {"k": "b"}, 0) is False
    first.invalidate("gone")  # swaps first's code only
    assert first.fn(12345, {"k": "a"}, True) is False
    assert third.fn(54321, {"k": "b"}, False) is True
    other = compiled([L("n").make_guard(GuardBuilder.TYPE_MATCH)], {"n": 1}, arg_names=["n"])
    assert len(calls) == 2 and other.fn(2) is True


def test_identity_never_shares_an_equal_constant() -> None:
    """ID_MATCH on a str or int is about that object, even if an equal constant is bound."""
    name = "".join(["cf", "g"])  # equal to the local's name 'cfg', but another object
    assert name == "cfg" and name is not "cfg"  # noqa: F632
    big = int("1" * 30)
    frame = {"cfg": Obj(val=name, big=big), "n": int("1" * 30)}
    guards = [
        AttrSource(L("cfg"), "val").make_guard(GuardBuilder.ID_MATCH),
        AttrSource(L("cfg"), "big").make_guard(GuardBuilder.ID_MATCH),
        L("n").make_guard(EQ),
    ]
    check = compiled(guards, frame)
    assert check.fn(frame) is True
    assert check.fn({**frame, "cfg": Obj(val="cfg", big=big)}) is False
    assert check.reference({**frame, "cfg": Obj(val="cfg", big=big)}) is False
    assert check.fn({**frame, "cfg": Obj(val=name, big=frame["n"])}) is False


# ---- the function's file -------------------------------------------------------------------


def test_registered_in_linecache() -> None:
    """The source is in linecache under <jitguard check NAME#N>, for tracebacks and inspect."""
    check = compiled([L("n").make_guard(EQ)], {"n": 7}, name="my_fn")
    assert re.fullmatch(r"<jitguard check my_fn#\d+>", check.filename)
    assert check.fn.__code__.co_filename == check.filename
    lines = check.source.splitlines()
    assert linecache.getline(check.filename, 1).rstrip("\n") == lines[0]
    assert lines[0] == "def check_my_fn(L):"
    assert inspect.getsource(check.fn) == check.source
    other = compiled([L("n").make_guard(EQ)], {"n": 7}, name="my_fn")
    assert other.filename != check.filename


def test_traceback_shows_generated_line() -> None:
    """A BaseException escaping the check shows the generated line in its traceback."""

    class Stop(BaseException):
        pass

    class Raiser:
        @property
        def a(self) -> Any:
            raise Stop()

    check = compiled([AttrSource(L("o"), "a").make_guard(GuardBuilder.NOT_NONE)],
                     {"o": Obj(a=1)}, arg_names=["o"], name="tb")
    with pytest.raises(Stop) as info:
        check.fn(Raiser())
    text = "".join(traceback.format_exception(info.value))
    # [Note: Code names on 3.13]: there the code keeps the text's fixed name
    name = writer.CODE_NAME if codecache.RENAME_INTERNS else "check_tb"
    assert f'File "{check.filename}", line 3, in {name}' in text
    assert "v0 = l_o.a  # L['o'].a" in text


def test_linecache_entry_dropped_with_the_check() -> None:
    """When the CheckFunction is collected its linecache entry goes too."""
    check = compiled([L("n").make_guard(EQ)], {"n": 7})
    filename = check.filename
    assert filename in linecache.cache
    del check
    gc.collect()
    assert filename not in linecache.cache


def test_same_guards_same_source() -> None:
    """Compiling the same guards twice gives the same source text."""
    frame = {"m": chain_value()}
    a = compiled(chain_guards(), frame, arg_names=["m"])
    b = compiled(chain_guards(), frame, arg_names=["m"])
    assert a.source == b.source


# ---- positional and mapping mode -----------------------------------------------------------


def test_positional_and_mapping_modes_agree() -> None:
    """Positional (arg_names=) and mapping mode accept and reject the same frames."""
    frame = {"m": chain_value(), "n": 3}
    guards = [*chain_guards(), L("n").make_guard(EQ)]
    by_map = compiled(guards, frame)
    by_pos = compiled(guards, frame, arg_names=["m", "n"])
    assert by_pos.source.startswith("def check_guards(l_m, l_n):")
    variants = [
        frame,
        {**frame, "n": 4},
        {**frame, "m": Obj(a=1)},
        {**frame, "m": Obj(a=Obj(b=Obj(x=1, y="z"), c=2.5))},
        {**frame, "m": Obj(a=Obj(b=Obj(x=1, y="y"), c=2.5))},
    ]
    for v in variants:
        assert by_map.fn(v) is by_pos.fn(v["m"], v["n"]) is by_map.reference(v)
        assert by_pos.explain(v["m"], v["n"]) == [] or by_map.explain(v) != []
    assert by_pos(frame["m"], frame["n"]) is True  # __call__ is fn


def test_positional_odd_argument_names() -> None:
    """Argument names that are not plain identifiers get safe parameter names."""
    frame = {"ﬁ": 1, "a b": 2, "class": 3, "x": 4}
    guards = [L(k).make_guard(EQ) for k in frame]
    check = compiled(guards, frame, arg_names=list(frame))
    assert check.source.startswith("def check_guards(l0_, l1_, l2_, l_x):")
    assert check.fn(1, 2, 3, 4) is True
    assert check.fn(1, 2, 3, 5) is False
    assert check.reference(1, 2, 3, 4) is True


def test_global_sources_read_at_call_time() -> None:
    """A global is read from f_globals when the check runs, in both modes."""
    f_globals = {"cfg": Obj(lr=0.1)}
    guards = [GlobalSource("cfg").make_guard(TYPE), AttrSource(GlobalSource("cfg"), "lr").make_guard(EQ)]
    for kw in ({}, {"arg_names": []}):
        check = compile_guards(guards, f_locals={}, f_globals=f_globals, **kw)
        args = () if kw else ({},)
        assert check.fn(*args) is True
        f_globals["cfg"].lr = 0.2
        assert check.fn(*args) is False
        assert reasons(check, *args) == ["G['cfg'].lr == 0.1 failed: got 0.2"]
        f_globals["cfg"].lr = 0.1


def test_positional_wrong_argument_count_for_explain() -> None:
    """explain/reference with the wrong number of arguments is a TypeError naming them."""
    check = compiled([L("n").make_guard(EQ)], {"n": 7}, arg_names=["n"])
    with pytest.raises(TypeError, match=r"takes 1 arguments \['n'\], got 2"):
        check.explain(1, 2)
    mapping = compiled([L("n").make_guard(EQ)], {"n": 7})
    with pytest.raises(TypeError, match="one mapping of locals"):
        mapping.reference(1, 2)


# ---- reading failures ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "frame", "bad", "reason"),
    [
        (AttrSource(L("o"), "a"), {"o": Obj(a=1)}, {"o": Obj()},
         "L['o'].a could not be read: AttributeError: 'Obj' object has no attribute 'a'"),
        (GetItemSource(L("d"), "k"), {"d": {"k": 1}}, {"d": {}},
         "L['d']['k'] could not be read: KeyError: 'k'"),
        (GetItemSource(L("xs"), 5), {"xs": [0] * 6}, {"xs": [0]},
         "L['xs'][5] could not be read: IndexError: list index out of range"),
        (L("n"), {"n": 1}, {},
         "L['n'] could not be read: KeyError: 'n'"),
        (AttrSource(L("o"), "a"), {"o": Obj(a=1)}, {"o": HostileAttr()},
         "L['o'].a could not be read: Boom: no reading a"),
    ],
)
def test_read_failures_return_false(source: Source, frame: dict[str, Any], bad: dict[str, Any],
                                    reason: str) -> None:
    """A source that cannot be read makes the check False (never raise); explain says why."""
    check = compiled([source.make_guard(EQ)], frame)
    assert check.fn(frame) is True
    assert check.fn(bad) is False
    assert check.reference(bad) is False
    assert reasons(check, bad) == [reason]


def test_broken_base_reported_for_each_guard_under_it() -> None:
    """When a base cannot be read, the guards below it say which source failed, once."""
    guards = [AttrSource(AttrSource(L("o"), "a"), k).make_guard(EQ) for k in ("x", "y")]
    check = compiled(guards, {"o": Obj(a=Obj(x=1, y=2))})
    msg = "L['o'].a could not be read: AttributeError: 'Obj' object has no attribute 'a'"
    assert reasons(check, {"o": Obj()}) == [msg]


def test_hostile_getattr_in_hasattr() -> None:
    """hasattr on an object whose __getattr__ raises a non-AttributeError fails the check."""
    check = compiled([AttrSource(L("o"), "a").make_guard(GuardBuilder.HASATTR)], {"o": Obj(a=1)})
    assert check.fn({"o": HostileAttr()}) is False
    assert reasons(check, {"o": HostileAttr()}) == [
        "hasattr(L['o'], 'a') failed: checking raised Boom: no reading a"
    ]


def test_hostile_len() -> None:
    """A __len__ that raises fails LENGTH_CHECK; explain says it raised."""
    check = compiled([L("xs").make_guard(GuardBuilder.LENGTH_CHECK)], {"xs": [1, 2]})
    assert check.fn({"xs": HostileLen()}) is False
    assert reasons(check, {"xs": HostileLen()}) == [
        "len(L['xs']) == 2 failed: checking raised Boom: no len"
    ]


def test_hostile_hash_and_eq_of_keys() -> None:
    """Keys whose __hash__/__eq__ raise at check time fail DICT_CONTAINS and DICT_KEYS_MATCH."""
    key = HostileKey()
    contains = functools.partial(GuardBuilder.DICT_CONTAINS, key=key)
    check = compiled([L("d").make_guard(contains)], {"d": {key: 1}})
    keys = compiled([L("d").make_guard(GuardBuilder.DICT_KEYS_MATCH)], {"d": {key: 1}})
    same, fresh = {"d": {key: 1}}, {"d": {HostileKey(): 1}}
    try:
        HostileKey.armed = True
        assert check.fn(same) is False
        assert check.reference(same) is False
        assert reasons(check, same) == [
            "<HostileKey object> in L['d'] failed: checking raised Boom: no hash"
        ]
        assert keys.fn(same) is True  # the same key object: no __eq__ needed
        assert keys.fn(fresh) is False
        assert keys.reference(fresh) is False
    finally:
        HostileKey.armed = False


def test_hostile_eq_of_a_registered_constant() -> None:
    """A registered constant type whose __eq__ raises fails EQUALS_MATCH, never raises."""
    check = compiled([L("x").make_guard(EQ)], {"x": Exact()})
    try:
        Exact.armed = True
        assert check.fn({"x": Exact()}) is False
        assert reasons(check, {"x": Exact()})[0].endswith("checking raised Boom: no eq")
    finally:
        Exact.armed = False


def test_equals_match_never_calls_user_eq() -> None:
    """EQUALS_MATCH on a str checks the exact type first: a subclass's __eq__ never runs."""
    check = compiled([L("s").make_guard(EQ)], {"s": "abc"})
    RecordingStr.calls = 0
    assert check.fn({"s": RecordingStr("zzz")}) is False
    assert check.reference({"s": RecordingStr("zzz")}) is False
    assert RecordingStr.calls == 0


def test_verbose_gives_result_and_reasons() -> None:
    """verbose() returns a truthy result, or a falsy one carrying the failures."""
    check = compiled([L("n").make_guard(EQ)], {"n": 7})
    ok = check.verbose({"n": 7})
    assert bool(ok) is True and ok.failures == []
    bad = check.verbose({"n": 8})
    assert bool(bad) is False
    assert [str(f) for f in bad.failures] == ["L['n'] == 7 failed: got 8"]


# ---- identity binding: weakly held objects ---------------------------------------------------


def make_local_object() -> Any:
    class Local:
        pass

    return Local()


def test_id_match_dead_object_invalidates() -> None:
    """When an ID_MATCH'd object dies the check is invalid, fails, and says why."""
    obj = make_local_object()
    check = compiled([L("o").make_guard(GuardBuilder.ID_MATCH)], {"o": obj}, arg_names=["o"])
    assert "id(l_o) == ___id_" in check.source
    fn = check.fn
    seen: list[CheckFunction] = []
    check.on_invalidate(seen.append)
    assert fn(obj) is True and check.valid
    del obj
    gc.collect()
    assert check.valid is False
    assert check.invalid_reason == "Cache line invalidated because L['o'] got deallocated"
    assert seen == [check]
    assert fn(make_local_object()) is False and check.fn(None) is False
    assert check.reference(None) is False
    assert reasons(check, None)[0] == "Cache line invalidated because L['o'] got deallocated"
    late: list[CheckFunction] = []
    check.on_invalidate(late.append)  # already invalid: runs at once
    assert late == [check]


def test_type_match_dead_local_class_invalidates() -> None:
    """TYPE_MATCH on a local class: when the class dies, the check is invalid."""
    obj = make_local_object()
    check = compiled([L("o").make_guard(TYPE)], {"o": obj})
    assert "id(type(v0)) == ___id_" in check.source
    assert check.fn({"o": obj}) is True
    del obj
    gc.collect()
    assert check.valid is False
    assert check.invalid_reason == "Cache line invalidated because L['o'] got deallocated"
    assert check.fn({"o": make_local_object()}) is False


def test_reused_id_never_hits() -> None:
    """A new object at a dead object's address never passes the old ID_MATCH. (Address
    reuse is up to the allocator, and other threads or gc callbacks can take the freed slot
    first: the whole procedure is retried until reuse is seen, and must see it. The object
    dies by reference count, with no cyclic collection in the window: a collection runs the
    finalizers of earlier tests' garbage, whose allocations can take the freed slot.)"""
    class Slot:
        pass

    tries = 50
    for _ in range(tries):
        obj = Slot()
        old_id = id(obj)
        check = compiled([L("o").make_guard(GuardBuilder.ID_MATCH)], {"o": obj}, arg_names=["o"])
        fn = check.fn
        keep = []
        reused = None
        gc.disable()
        try:
            del obj
            for _ in range(10_000):
                candidate = Slot()
                if id(candidate) == old_id:
                    reused = candidate
                    break
                keep.append(candidate)
        finally:
            gc.enable()
        if reused is not None:
            assert fn(reused) is False
            assert check.fn(reused) is False
            return
    raise AssertionError(f"CPython reused no address in {tries} tries (allocator changed?)")


def test_fn_outliving_its_check_function_still_invalidates() -> None:
    """A generated fn kept after its CheckFunction is dropped still fails once its object dies."""
    obj = make_local_object()
    check = compiled([L("o").make_guard(GuardBuilder.ID_MATCH)], {"o": obj}, arg_names=["o"])
    fn = check.fn
    (name,) = [k for k in fn.__globals__ if k.startswith("___id_")]
    del check
    gc.collect()
    assert fn(obj) is True
    del obj
    gc.collect()
    assert fn.__globals__[name] == -1
    assert fn(make_local_object()) is False


def test_many_weak_bindings_compile_in_linear_time() -> None:
    """Binding thousands of objects weakly stays fast (one walk over the leaves)."""
    import time

    objs = [make_local_object() for _ in range(4000)]
    guards = [GetItemSource(L("xs"), i).make_guard(GuardBuilder.ID_MATCH) for i in range(4000)]
    start = time.perf_counter()
    check = compiled(guards, {"xs": objs}, arg_names=["xs"])
    assert time.perf_counter() - start < 3.0
    assert check.fn(objs) is True
    objs.pop()
    gc.collect()
    assert check.invalid_reason == "Cache line invalidated because L['xs'][3999] got deallocated"


def test_explicit_invalidate_fails_earlier_fn() -> None:
    """invalidate() makes the generated function fail, even through an earlier reference."""
    check = compiled([L("n").make_guard(EQ)], {"n": 7}, arg_names=["n"])
    fn = check.fn
    calls: list[CheckFunction] = []
    check.on_invalidate(calls.append)
    check.invalidate("stale")
    check.invalidate("again")  # idempotent
    assert fn(7) is False and check.fn(7) is False and check(7) is False
    assert check.invalid_reason == "stale" and calls == [check]
    assert "invalid: stale" in repr(check)


def test_long_lived_objects_bound_strongly() -> None:
    """Module-level classes and builtins are bound with `is` and never invalidate."""
    check = compiled([L("o").make_guard(TYPE), L("f").make_guard(GuardBuilder.ID_MATCH)],
                     {"o": Obj(), "f": len})
    assert "id(" not in check.source
    assert check.fn({"o": Obj(), "f": len}) is True
    assert check.valid


# ---- compile errors ---------------------------------------------------------------------------


def test_check_frame_rejects_own_frame() -> None:
    """With check_frame (default) guards that reject their own frame are a GuardCompileError."""
    guard = AttrSource(L("o"), "a").make_guard(GuardBuilder.HASATTR)
    with pytest.raises(GuardCompileError, match=r"reject the frame they were built from:\n"
                       r"  - hasattr\(L\['o'\], 'a'\) failed"):
        compile_guards([guard], f_locals={"o": Obj()})
    check = compile_guards([guard], f_locals={"o": Obj()}, check_frame=False)
    assert check.fn({"o": Obj()}) is False
    assert check.fn({"o": Obj(a=1)}) is True


def test_check_frame_catches_nondeterministic_reads() -> None:
    """A source whose value changes between reads fails check_frame."""

    class Flip:
        n = 0

        @property
        def v(self) -> int:
            Flip.n += 1
            return Flip.n

    with pytest.raises(GuardCompileError, match="reject the frame"):
        compile_guards([AttrSource(L("o"), "v").make_guard(EQ)], f_locals={"o": Flip()})


@pytest.mark.parametrize(
    ("guards", "kw", "match"),
    [
        ([EphemeralSource("t").make_guard(TYPE)], {"f_locals": {}},
         r"cannot guard on <ephemeral: t>: EphemeralSource names"),
        ([ShapeEnvSource().make_guard(TYPE)], {"f_locals": {}}, "cannot guard on : ShapeEnvSource"),
        ([GlobalSource("g").make_guard(TYPE)], {"f_locals": {}},
         r"G\['g'\] reads a global but no f_globals was given"),
        ([GlobalSource("g").make_guard(TYPE)], {"f_locals": {}, "f_globals": {}},
         r"cannot read G\['g'\] in the frame being compiled: KeyError"),
        ([L("y").make_guard(TYPE)], {"f_locals": {"x": 1}},
         r"cannot read L\['y'\] in the frame being compiled: KeyError"),
        ([L("y").make_guard(TYPE)], {"f_locals": {"x": 1, "y": 2}, "arg_names": ["x"]},
         r"L\['y'\] is not among the check's arguments \['x'\]"),
        ([L("x").make_guard(TYPE)], {"f_locals": {"x": 1}, "arg_names": ["x", "x"]},
         "arg_names has duplicates"),
    ],
)
def test_compile_errors(guards: list[Guard], kw: dict[str, Any], match: str) -> None:
    """Guards that cannot be compiled raise GuardCompileError saying why."""
    with pytest.raises(GuardCompileError, match=match):
        compile_guards(guards, **kw)


def test_compile_guards_takes_guards_only() -> None:
    """compile_guards('n') or a list holding a non-Guard is a TypeError naming what it takes."""
    with pytest.raises(TypeError, match=r"compile_guards takes an iterable of Guards "
                       r"\(source\.make_guard\(GuardBuilder\.KIND\)\), got str 'n'"):
        compile_guards("n")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"guards\[1\] is int 1, not a Guard"):
        compile_guards([L("x").make_guard(EQ), 1], f_locals={"x": 1})  # type: ignore[list-item]
    with pytest.raises(TypeError, match="got int 5"):
        compile_guards(5)  # type: ignore[arg-type]
