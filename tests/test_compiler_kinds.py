"""The built-in guard kinds: what passes, what fails, the exact failure text, export info."""

from __future__ import annotations

import enum
import functools
import math
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Optional

import pytest
import sympy

from jitguard import (
    AttrSource,
    CheckFunction,
    DuplicateInputs,
    EmitContext,
    GetItemSource,
    GlobalStateSource,
    Guard,
    GuardBuilder,
    GuardCompileError,
    GuardKind,
    GuardKindError,
    LocalSource,
    ShapeEnvSource,
    ShapeGuard,
    SLoc,
    Source,
    compile_guards,
    global_states,
    guard_kinds,
    register_global_state,
    register_guard_kind,
)
from jitguard._src.compiler import bulk

L = LocalSource


class Config:
    """A module-level class: TYPE_MATCH holds it strongly."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


class SubConfig(Config):
    pass


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def build(
    source: Source, create_fn: Callable[..., Any], frame: dict[str, Any], **kw: Any
) -> tuple[Guard, CheckFunction]:
    """One guard on ``source``, compiled against ``frame`` (mapping mode)."""
    guard = source.make_guard(create_fn)
    return guard, compile_guards([guard], f_locals=frame, **kw)


def reasons(check: CheckFunction, *args: Any) -> list[str]:
    return [f.reason for f in check.explain(*args)]


def assert_rejects(check: CheckFunction, frame: dict[str, Any], reason: str) -> None:
    """The check and the reference reject ``frame``, and explain gives exactly ``reason``."""
    assert check.fn(frame) is False
    assert check.reference(frame) is False
    assert reasons(check, frame) == [reason]


def assert_accepts(check: CheckFunction, frame: dict[str, Any]) -> None:
    assert check.fn(frame) is True
    assert check.reference(frame) is True
    assert check.explain(frame) == []


# ---- TYPE_MATCH, ID_MATCH -------------------------------------------------------------


def test_type_match_exact_type() -> None:
    """TYPE_MATCH passes the exact class and fails others with `got <type>`."""
    _, check = build(L("cfg"), GuardBuilder.TYPE_MATCH, {"cfg": Config()})
    assert_accepts(check, {"cfg": Config(a=1)})
    assert_rejects(check, {"cfg": {}}, "type(L['cfg']) is Config failed: got dict")


def test_type_match_rejects_subclass() -> None:
    """TYPE_MATCH is exact: a subclass instance fails."""
    _, check = build(L("cfg"), GuardBuilder.TYPE_MATCH, {"cfg": Config()})
    assert_rejects(check, {"cfg": SubConfig()}, "type(L['cfg']) is Config failed: got SubConfig")


def test_type_match_export_info() -> None:
    """TYPE_MATCH records its kind, its code and a weakref to the guarded class."""
    guard, _ = build(L("cfg"), GuardBuilder.TYPE_MATCH, {"cfg": Config()})
    assert guard.guard_types == ["TYPE_MATCH"]
    assert guard.code_list == ["type(L['cfg']) is Config"]
    assert isinstance(guard.guarded_class_weakref, weakref.ReferenceType)
    assert guard.guarded_class_weakref() is Config
    assert guard.obj_weakref is None


def test_id_match_same_object() -> None:
    """ID_MATCH passes the very object and fails an equal one, naming both addresses."""
    obj, other = Config(), Config()
    guard, check = build(L("o"), GuardBuilder.ID_MATCH, {"o": obj})
    assert_accepts(check, {"o": obj})
    assert_rejects(
        check,
        {"o": other},
        f"L['o'] is <Config object at {hex(id(obj))}> failed: got <Config object> at "
        f"{hex(id(other))}",
    )
    assert guard.guard_types == ["ID_MATCH"]
    assert guard.code_list == [f"L['o'] is <Config object at {hex(id(obj))}>"]
    assert guard.obj_weakref is not None and guard.obj_weakref() is obj


def test_id_match_builtin_function() -> None:
    """ID_MATCH on a builtin names it and fails on any other callable."""
    _, check = build(L("f"), GuardBuilder.ID_MATCH, {"f": len})
    assert_accepts(check, {"f": len})
    assert_rejects(
        check,
        {"f": abs},
        f"L['f'] is <function len> failed: got <builtin_function_or_method object> at "
        f"{hex(id(abs))}",
    )


def test_id_match_unweakrefable_object_held_strongly() -> None:
    """ID_MATCH on an object that allows no weakref (a list) holds it and uses `is`."""
    xs = [1, 2]
    _, check = build(L("xs"), GuardBuilder.ID_MATCH, {"xs": xs})
    assert " is ___" in check.source and "id(" not in check.source
    assert_accepts(check, {"xs": xs})
    assert check.fn({"xs": [1, 2]}) is False


# ---- EQUALS_MATCH, CONSTANT_MATCH, NONE/NOT_NONE/BOOL ---------------------------------


def test_equals_match_int() -> None:
    """EQUALS_MATCH on an int: `L['n'] == 7 failed: got 8`."""
    guard, check = build(L("n"), GuardBuilder.EQUALS_MATCH, {"n": 7})
    assert_accepts(check, {"n": 7})
    assert_rejects(check, {"n": 8}, "L['n'] == 7 failed: got 8")
    assert guard.guard_types == ["EQUALS_MATCH"]
    assert guard.code_list == ["L['n'] == 7"]


@pytest.mark.parametrize(
    ("built", "other", "reason"),
    [
        (1, 1.0, "L['v'] == 1 failed: got 1.0 (float, expected int)"),
        (1, True, "L['v'] == 1 failed: got True (bool, expected int)"),
        (1.0, 1, "L['v'] == 1.0 failed: got 1 (int, expected float)"),
        (1.0, True, "L['v'] == 1.0 failed: got True (bool, expected float)"),
        (True, 1, "L['v'] == True failed: got 1 (int, expected bool)"),
        ("a", b"a", "L['v'] == 'a' failed: got b'a' (bytes, expected str)"),
        ((1, 2), (1.0, 2), "L['v'] == (1, 2) failed: got (1.0, 2)"),
        ((1, 2), [1, 2], "L['v'] == (1, 2) failed: got [1, 2] (list, expected tuple)"),
        (frozenset({1}), frozenset({True}), "L['v'] == frozenset({1}) failed: got frozenset({True})"),
    ],
)
def test_equals_match_is_type_exact(built: Any, other: Any, reason: str) -> None:
    """EQUALS_MATCH tells 1, 1.0 and True (and str/bytes, tuple/list) apart, at every level."""
    _, check = build(L("v"), GuardBuilder.EQUALS_MATCH, {"v": built})
    assert_accepts(check, {"v": built})
    assert_rejects(check, {"v": other}, reason)


def test_equals_match_nan_matches_nan() -> None:
    """A NaN constant matches a float NaN of the same bits and nothing else: ``-nan`` (whose
    sign ``math.copysign`` shows) is another value."""
    _, check = build(L("x"), GuardBuilder.EQUALS_MATCH, {"x": float("nan")})
    assert_accepts(check, {"x": float("nan")})
    assert_accepts(check, {"x": math.nan})
    assert_rejects(check, {"x": -math.nan}, "L['x'] == nan failed: got nan (bits fff8000000000000)")
    assert_rejects(check, {"x": 0.0}, "L['x'] == nan failed: got 0.0")
    assert_rejects(check, {"x": "nan"}, "L['x'] == nan failed: got 'nan' (str, expected float)")


def test_equals_match_nan_inside_tuple_and_complex() -> None:
    """NaN inside a tuple or a complex matches NaN in the same place."""
    nan = float("nan")
    _, check = build(L("t"), GuardBuilder.EQUALS_MATCH, {"t": (1, nan)})
    assert_accepts(check, {"t": (1, float("nan"))})
    assert_rejects(check, {"t": (1, 2.0)}, "L['t'] == (1, nan) failed: got (1, 2.0)")
    _, check = build(L("c"), GuardBuilder.EQUALS_MATCH, {"c": complex(nan, 1)})
    assert_accepts(check, {"c": complex(nan, 1)})
    assert_rejects(check, {"c": complex(nan, 2)}, "L['c'] == (nan+1j) failed: got (nan+2j)")


def test_equals_match_enum_member() -> None:
    """EQUALS_MATCH on an enum member passes the member and fails its value."""
    _, check = build(L("c"), GuardBuilder.EQUALS_MATCH, {"c": Color.RED})
    assert_accepts(check, {"c": Color.RED})
    assert_rejects(check, {"c": Color.BLUE}, "L['c'] == <Color object> failed: got <Color object>")
    assert check.fn({"c": 1}) is False


def test_equals_match_slice_is_type_exact() -> None:
    """A slice constant's bounds are type-exact too: slice(0, 2) is not slice(0.0, 2)."""
    _, check = build(L("s"), GuardBuilder.EQUALS_MATCH, {"s": slice(0, 2)})
    assert_accepts(check, {"s": slice(0, 2)})
    assert check.fn({"s": slice(0.0, 2)}) is False
    assert check.fn({"s": slice(False, 2)}) is False
    assert check.reference({"s": slice(0.0, 2)}) is False


def test_equals_match_rejects_non_constants() -> None:
    """EQUALS_MATCH on a list, or a tuple holding one, is a GuardKindError naming the type."""
    with pytest.raises(GuardKindError, match=r"EQUALS_MATCH on L\['v'\]: a list is not a constant"):
        build(L("v"), GuardBuilder.EQUALS_MATCH, {"v": [1]})
    with pytest.raises(GuardKindError, match="a tuple is not a constant"):
        build(L("v"), GuardBuilder.EQUALS_MATCH, {"v": (1, [2])})
    with pytest.raises(GuardKindError, match="a slice is not a constant"):
        build(L("v"), GuardBuilder.EQUALS_MATCH, {"v": slice(0, [2])})


@pytest.mark.parametrize(
    ("value", "kind", "code", "bad", "reason"),
    [
        (True, "BOOL_MATCH", "L['v'] is True", 1, "L['v'] is True failed: got 1"),
        (False, "BOOL_MATCH", "L['v'] is False", 0, "L['v'] is False failed: got 0"),
        (None, "NONE_MATCH", "L['v'] is None", 0, "L['v'] is None failed: got 0"),
        (7, "EQUALS_MATCH", "L['v'] == 7", 7.0, "L['v'] == 7 failed: got 7.0 (float, expected int)"),
        ("s", "EQUALS_MATCH", "L['v'] == 's'", "t", "L['v'] == 's' failed: got 't'"),
    ],
)
def test_constant_match_picks_kind(value: Any, kind: str, code: str, bad: Any, reason: str) -> None:
    """CONSTANT_MATCH resolves to BOOL_MATCH, NONE_MATCH or EQUALS_MATCH by the value."""
    guard, check = build(L("v"), GuardBuilder.CONSTANT_MATCH, {"v": value})
    assert [leaf.kind.name for leaf in check.leaves] == [kind]
    assert guard.guard_types == [kind]
    assert guard.code_list == [code]
    assert_accepts(check, {"v": value})
    assert_rejects(check, {"v": bad}, reason)


def test_none_match() -> None:
    """NONE_MATCH passes None only."""
    _, check = build(L("v"), GuardBuilder.NONE_MATCH, {"v": None})
    assert_accepts(check, {"v": None})
    assert_rejects(check, {"v": False}, "L['v'] is None failed: got False")


def test_not_none() -> None:
    """NOT_NONE passes anything but None."""
    _, check = build(L("v"), GuardBuilder.NOT_NONE, {"v": 0})
    assert_accepts(check, {"v": Config()})
    assert_rejects(check, {"v": None}, "L['v'] is not None failed: got None")


def test_bool_match_is_identity_not_truthiness() -> None:
    """BOOL_MATCH passes True itself, not 1 or a truthy object."""
    _, check = build(L("v"), GuardBuilder.BOOL_MATCH, {"v": True})
    assert_accepts(check, {"v": True})
    assert check.fn({"v": 1}) is False
    assert_rejects(check, {"v": "yes"}, "L['v'] is True failed: got 'yes'")


def test_bool_match_needs_a_bool() -> None:
    """BOOL_MATCH on a non-bool is a GuardKindError pointing at CONSTANT_MATCH."""
    with pytest.raises(GuardKindError, match="expected a bool, found int; use CONSTANT_MATCH"):
        build(L("v"), GuardBuilder.BOOL_MATCH, {"v": 1})


# ---- LENGTH_CHECK, SEQUENCE_LENGTH, DICT_KEYS_MATCH, DICT_CONTAINS ---------------------


def test_length_check() -> None:
    """LENGTH_CHECK compares len() only, whatever the type."""
    guard, check = build(L("xs"), GuardBuilder.LENGTH_CHECK, {"xs": [1, 2, 3]})
    assert_accepts(check, {"xs": "abc"})
    assert_rejects(check, {"xs": [1]}, "len(L['xs']) == 3 failed: got 1")
    assert_rejects(check, {"xs": 5}, "len(L['xs']) == 3 failed: checking raised TypeError: "
                   "object of type 'int' has no len()")
    assert guard.code_list == ["len(L['xs']) == 3"]


def test_sequence_length() -> None:
    """SEQUENCE_LENGTH checks exact type, then length, reporting whichever failed."""
    guard, check = build(L("xs"), GuardBuilder.SEQUENCE_LENGTH, {"xs": [1, 2, 3]})
    assert_accepts(check, {"xs": [4, 5, 6]})
    assert_rejects(check, {"xs": (1, 2, 3)}, "type(L['xs']) is list failed: got tuple")
    assert_rejects(check, {"xs": [1]}, "len(L['xs']) == 3 failed: got 1")
    assert guard.code_list == ["type(L['xs']) is list and len(L['xs']) == 3"]
    assert guard.guarded_class_weakref is not None and guard.guarded_class_weakref() is list


def test_dict_keys_match() -> None:
    """DICT_KEYS_MATCH checks the exact dict type and the keys in order."""
    guard, check = build(L("d"), GuardBuilder.DICT_KEYS_MATCH, {"d": {"a": 1, "b": 2}})
    assert_accepts(check, {"d": {"a": 9, "b": 9}})
    assert_rejects(
        check, {"d": {"b": 1, "a": 2}}, "list(dict.keys(L['d'])) == ['a', 'b'] failed: got ['b', 'a']"
    )
    assert_rejects(check, {"d": [("a", 1)]}, "type(L['d']) is dict failed: got list")
    assert guard.code_list == ["list(dict.keys(L['d'])) == ['a', 'b']"]


def test_dict_keys_match_ordereddict_order() -> None:
    """DICT_KEYS_MATCH on an OrderedDict also compares the order it iterates in, which
    move_to_end changes and dict.keys does not see."""
    import collections

    od = collections.OrderedDict(a=1, b=2)
    guard, check = build(L("d"), GuardBuilder.DICT_KEYS_MATCH, {"d": od})
    assert_accepts(check, {"d": collections.OrderedDict(a=5, b=6)})
    assert guard.code_list == ["list(dict.keys(L['d'])) == ['a', 'b'] and list(L['d'].keys()) == ['a', 'b']"]
    moved = collections.OrderedDict(a=1, b=2)
    moved.move_to_end("a")
    assert list(dict.keys(moved)) == ["a", "b"]
    assert_rejects(
        check, {"d": moved},
        "list(dict.keys(L['d'])) == ['a', 'b'] and list(L['d'].keys()) == ['a', 'b'] failed: "
        "got ['a', 'b'] (iterating as ['b', 'a'])",
    )
    # a dict whose two orders differ when compiled: both are compared as they were
    _, check = build(L("d"), GuardBuilder.DICT_KEYS_MATCH, {"d": moved})
    again = collections.OrderedDict(a=0, b=0)
    again.move_to_end("a")
    assert_accepts(check, {"d": again})
    assert_rejects(
        check, {"d": collections.OrderedDict(b=0, a=0)},
        "list(dict.keys(L['d'])) == ['a', 'b'] and list(L['d'].keys()) == ['b', 'a'] failed: "
        "got ['b', 'a'] (iterating as ['b', 'a'])",
    )


def test_dict_keys_match_key_types_and_subclasses() -> None:
    """DICT_KEYS_MATCH (one C call for keys of builtin types when the extension is in use)
    tells 1 from True, a str from an equal str subclass, and reads a dict subclass's keys
    as ``dict.keys`` orders them, not as its own ``keys()`` says."""

    class Str(str):
        pass

    class Sneaky(dict):  # type: ignore[type-arg]
        def keys(self) -> Any:
            return ["a", 1]

        def __iter__(self) -> Any:
            return iter(["a", 1])

    _, check = build(L("d"), GuardBuilder.DICT_KEYS_MATCH, {"d": {"a": 0, 1: 0}})
    assert_accepts(check, {"d": {"a": 5, 1: 5}})
    assert_accepts(check, {"d": {"".join(["a"]): 5, 10 ** 20 // 10 ** 20: 5}})  # equal, not same
    for other in ({"a": 0, True: 0}, {Str("a"): 0, 1: 0}, {1: 0, "a": 0}, {"a": 0},
                  {"a": 0, 1: 0, 2: 0}):
        assert not check.fn(other), other
    _, sub = build(L("d"), GuardBuilder.DICT_KEYS_MATCH, {"d": Sneaky({"a": 0, 1: 0})})
    assert_accepts(sub, {"d": Sneaky({"a": 0, 1: 0})})
    assert not sub.fn(Sneaky({"b": 0, 2: 0}))


@pytest.mark.parametrize("n", [0, 1, 2, 9])
def test_keys_are_helper_agrees_in_c_and_python(n: int) -> None:
    """``bulk.keys_are`` (C when the extension is there) says what the Python meaning says:
    same keys in order; another order, a missing or extra key, a key of another type, a
    non-dict; a key equal by ``==`` that is another object."""
    keys = tuple(f"k{i}" for i in range(n))
    d = dict.fromkeys(keys, 0)
    cases: list[tuple[Any, tuple[Any, ...]]] = [
        (d, keys), (d, keys[::-1]), (d, keys[:-1]), (d, (*keys, "x")), ([*keys], keys),
        (dict.fromkeys(["".join(k) for k in keys]), keys),
        (d, tuple(k.encode() for k in keys)), ({1: 0, 2: 0}, (1, 2)), ({1: 0, 2: 0}, (True, 2)),
        ({1.0: 0}, (1,)), ({None: 0}, (None,)),
    ]
    for value, want in cases:
        assert bulk.keys_are(value, want) is bulk.keys_are_py(value, want), (value, want)
    assert bulk.keys_are(d, keys) is True
    if n > 1:
        assert bulk.keys_are(d, keys[::-1]) is False


def test_dict_keys_match_needs_a_dict() -> None:
    """DICT_KEYS_MATCH on a non-dict is a GuardKindError."""
    with pytest.raises(GuardKindError, match="expected a dict, found list"):
        build(L("d"), GuardBuilder.DICT_KEYS_MATCH, {"d": []})


def test_dict_contains_and_invert() -> None:
    """DICT_CONTAINS takes key= and invert= through functools.partial."""
    contains = functools.partial(GuardBuilder.DICT_CONTAINS, key="a")
    guard, check = build(L("d"), contains, {"d": {"a": 1}})
    assert_accepts(check, {"d": {"a": 2, "b": 3}})
    assert_rejects(check, {"d": {"b": 3}}, "'a' in L['d'] failed")
    assert guard.code_list == ["'a' in L['d']"]

    lacks = functools.partial(GuardBuilder.DICT_CONTAINS, key="a", invert=True)
    guard, check = build(L("d"), lacks, {"d": {}})
    assert_accepts(check, {"d": {"b": 1}})
    assert_rejects(check, {"d": {"a": 1}}, "'a' not in L['d'] failed")
    assert guard.code_list == ["'a' not in L['d']"]


def test_dict_contains_options_are_checked() -> None:
    """DICT_CONTAINS without key=, or with an unknown option, is a GuardKindError."""
    with pytest.raises(GuardKindError, match="takes key= and optional invert="):
        build(L("d"), GuardBuilder.DICT_CONTAINS, {"d": {}})
    with pytest.raises(GuardKindError, match="takes key= and optional invert="):
        build(L("d"), functools.partial(GuardBuilder.DICT_CONTAINS, key=1, other=2), {"d": {}})
    with pytest.raises(GuardKindError, match="options must be keywords"):
        build(L("d"), functools.partial(GuardBuilder.DICT_CONTAINS, "a"), {"d": {}})


def test_options_on_kinds_that_take_none() -> None:
    """A kind that takes no options rejects any."""
    with pytest.raises(GuardKindError, match=r"TYPE_MATCH takes no options, got \['key'\]"):
        build(L("d"), functools.partial(GuardBuilder.TYPE_MATCH, key=1), {"d": {}})


# ---- HASATTR, NOT_HASATTR ---------------------------------------------------------------


def test_hasattr_tests_the_base() -> None:
    """HASATTR on AttrSource(o, 'a') reads o and tests hasattr(o, 'a')."""
    guard, check = build(AttrSource(L("o"), "a"), GuardBuilder.HASATTR, {"o": Config(a=1)})
    assert [s.name() for s in check.leaves[0].sources] == ["L['o']"]
    assert_accepts(check, {"o": Config(a=None)})
    assert_rejects(check, {"o": Config()}, "hasattr(L['o'], 'a') failed")
    assert guard.code_list == ["hasattr(L['o'], 'a')"]


def test_not_hasattr() -> None:
    """NOT_HASATTR passes when the base lacks the attribute."""
    guard, check = build(AttrSource(L("o"), "a"), GuardBuilder.NOT_HASATTR, {"o": Config()})
    assert_accepts(check, {"o": Config(b=1)})
    assert_rejects(check, {"o": Config(a=1)}, "not hasattr(L['o'], 'a') failed")
    assert guard.code_list == ["not hasattr(L['o'], 'a')"]


def test_hasattr_needs_an_attr_source() -> None:
    """HASATTR on a root, or on a chained source that is not an attribute, is an error."""
    with pytest.raises(GuardCompileError, match="needs a chained source"):
        build(L("o"), GuardBuilder.HASATTR, {"o": Config()})
    with pytest.raises(GuardKindError, match="needs an AttrSource"):
        build(GetItemSource(L("o"), 0), GuardBuilder.HASATTR, {"o": [1]})


# ---- FUNCTION_MATCH, WEAKREF_ALIVE ----------------------------------------------------


def _closure(value: Any) -> Callable[[], Any]:
    def inner() -> Any:
        return value

    return inner


def test_function_match_code_and_closure() -> None:
    """FUNCTION_MATCH passes a function with the same code whose cells hold the same objects."""
    held = Config()
    fn = _closure(held)
    guard, check = build(L("f"), GuardBuilder.FUNCTION_MATCH, {"f": fn})
    code = f"L['f'].__code__ is <code object at {hex(id(fn.__code__))}> and its 1 closure cells " \
        "hold the same objects"
    assert guard.code_list == [code]
    assert_accepts(check, {"f": _closure(held)})  # a new function object, same code and cell
    assert_rejects(check, {"f": _closure(Config())}, f"{code} failed: the closure differs")
    assert_rejects(check, {"f": lambda: held}, f"{code} failed: a different code object")
    assert_rejects(check, {"f": 3}, f"{code} failed: got 3")


def test_function_match_without_closure() -> None:
    """FUNCTION_MATCH on a plain function checks its code and that it has no closure."""
    _, check = build(L("f"), GuardBuilder.FUNCTION_MATCH, {"f": build})
    assert_accepts(check, {"f": build})
    assert check.fn({"f": reasons}) is False


def test_function_match_on_a_builtin_is_id_match() -> None:
    """FUNCTION_MATCH on a non-Python callable resolves to ID_MATCH."""
    guard, check = build(L("f"), GuardBuilder.FUNCTION_MATCH, {"f": len})
    assert guard.guard_types == ["ID_MATCH"]
    assert_accepts(check, {"f": len})
    assert check.fn({"f": abs}) is False


def test_weakref_alive() -> None:
    """WEAKREF_ALIVE passes while the referent lives."""
    obj = Config()
    ref = weakref.ref(obj)
    _, check = build(L("w"), GuardBuilder.WEAKREF_ALIVE, {"w": ref})
    assert_accepts(check, {"w": ref})
    dead = weakref.ref(Config())
    assert_rejects(check, {"w": dead}, "L['w']() is not None failed: the referent is dead")


# ---- DUPLICATE_INPUT, NO_ALIASING -------------------------------------------------------


def test_duplicate_input_via_partial() -> None:
    """DUPLICATE_INPUT(source_b=) passes when both sources are the same object."""
    obj = Config()
    dup = functools.partial(GuardBuilder.DUPLICATE_INPUT, source_b=L("b"))
    guard, check = build(L("a"), dup, {"a": obj, "b": obj})
    assert guard.code_list == ["L['a'] is L['b']"]
    assert_accepts(check, {"a": obj, "b": obj})
    assert_rejects(check, {"a": obj, "b": Config()}, "L['a'] is L['b'] failed: they are different objects")


def test_duplicate_input_via_env_expr() -> None:
    """A DuplicateInputs environment expression compiles to the same check."""
    obj = Config()
    check = compile_guards(env_exprs=[DuplicateInputs(L("a"), L("b"))], f_locals={"a": obj, "b": obj})
    assert [leaf.kind.name for leaf in check.leaves] == ["DUPLICATE_INPUT"]
    assert_accepts(check, {"a": obj, "b": obj})
    assert_rejects(check, {"a": obj, "b": 1}, "L['a'] is L['b'] failed: they are different objects")


def test_duplicate_input_needs_source_b() -> None:
    """DUPLICATE_INPUT without source_b= is a GuardKindError."""
    with pytest.raises(GuardKindError, match="takes source_b="):
        build(L("a"), GuardBuilder.DUPLICATE_INPUT, {"a": 1})


def test_no_aliasing_two_sources() -> None:
    """NO_ALIASING of two sources fails when they hold the same object."""
    a, b = Config(), Config()
    no_alias = functools.partial(GuardBuilder.NO_ALIASING, others=(L("b"),))
    _, check = build(L("a"), no_alias, {"a": a, "b": b})
    assert_accepts(check, {"a": a, "b": Config()})
    assert_rejects(
        check, {"a": a, "b": a}, "no two of L['a'], L['b'] are the same object failed: L['a'] is L['b']"
    )


def test_no_aliasing_three_sources() -> None:
    """NO_ALIASING of three sources names the first aliased pair."""
    a, b, c = Config(), Config(), Config()
    no_alias = functools.partial(GuardBuilder.NO_ALIASING, others=(L("b"), L("c")))
    guard, check = build(L("a"), no_alias, {"a": a, "b": b, "c": c})
    assert guard.code_list == ["no two of L['a'], L['b'], L['c'] are the same object"]
    assert_accepts(check, {"a": a, "b": b, "c": c})
    assert_rejects(
        check,
        {"a": a, "b": b, "c": b},
        "no two of L['a'], L['b'], L['c'] are the same object failed: L['b'] is L['c']",
    )


@pytest.mark.parametrize("n", [3, 16, 17, 200])
def test_no_aliasing_of_many_sources(n: int) -> None:
    """NO_ALIASING over many sources (one C call when the extension is in use, pairwise up
    to 16 values, a table of addresses above) accepts distinct objects and rejects any
    pair of the same one, wherever it sits."""
    names = [f"a{i}" for i in range(n)]
    objs = {name: Config() for name in names}
    no_alias = functools.partial(GuardBuilder.NO_ALIASING, others=tuple(L(x) for x in names[1:]))
    _, check = build(L(names[0]), no_alias, objs)
    assert_accepts(check, dict(objs))
    for i, j in ((0, 1), (0, n - 1), (n - 2, n - 1), (n // 2, n // 3)):
        if i == j:
            continue
        aliased = {**objs, names[j]: objs[names[i]]}
        assert not check.fn(aliased), (i, j)


def test_no_aliasing_helper_agrees_in_c_and_python() -> None:
    """``bulk.distinct`` (C when the extension is there) says what the Python meaning says,
    on nothing, one value, distinct values and repeats, at every size up to 300."""
    pool = [object() for _ in range(300)]
    for n in (0, 1, 2, 5, 16, 17, 40, 300):
        values = pool[:n]
        assert bulk.distinct(*values) is bulk.distinct_py(*values) is True
        for i in range(1, n):
            repeated = [*values[:i], values[i - 1], *values[i + 1:]]
            assert bulk.distinct(*repeated) is bulk.distinct_py(*repeated) is False


def test_no_aliasing_needs_others() -> None:
    """NO_ALIASING without a non-empty others= is a GuardKindError."""
    with pytest.raises(GuardKindError, match="takes others="):
        build(L("a"), functools.partial(GuardBuilder.NO_ALIASING, others=()), {"a": 1})


# ---- GLOBAL_STATE -----------------------------------------------------------------------


@pytest.fixture
def knob() -> Iterator[list[Any]]:
    """A custom guarded global state `test_knob`, registered for one test."""
    cell = [1]
    register_global_state("test_knob", lambda: cell[0], describe=lambda v: f"<knob {v}>")
    try:
        yield cell
    finally:
        global_states.unregister("test_knob")


def test_global_state_custom_state(knob: list[Any]) -> None:
    """GLOBAL_STATE checks every guarded state; the reason names the one that changed."""
    guard = GlobalStateSource().make_guard(GuardBuilder.GLOBAL_STATE)
    check = compile_guards([guard], f_locals={})
    assert guard.guard_types == ["GLOBAL_STATE"]
    assert guard.code_list is not None and "test_knob" in guard.code_list[0]
    assert_accepts(check, {})
    knob[0] = 2
    assert_rejects(check, {}, "GLOBAL_STATE changed: test_knob (expected <knob 1>, got <knob 2>)")
    knob[0] = 1
    assert_accepts(check, {})


def test_global_state_read_that_raises(knob: list[Any]) -> None:
    """A state whose read raises fails the check, and the reason says so."""
    check = compile_guards([GlobalStateSource().make_guard(GuardBuilder.GLOBAL_STATE)], f_locals={})
    knob[0] = 1
    knob.clear()  # cell[0] now raises IndexError
    assert check.fn({}) is False
    assert reasons(check, {}) == [
        "GLOBAL_STATE changed: test_knob (reading it raised IndexError: list index out of range)"
    ]


def test_global_state_unregistered_after_compile_is_still_checked(knob: list[Any]) -> None:
    """The states are fixed at compile time: the check keeps reading them."""
    check = compile_guards([GlobalStateSource().make_guard(GuardBuilder.GLOBAL_STATE)], f_locals={})
    assert "test_knob" in check.source
    knob[0] = 5
    assert check.fn({}) is False


# ---- SHAPE_ENV --------------------------------------------------------------------------


def test_shape_env_guards() -> None:
    """Shape guards compile to integer checks over their symbols' sources; reasons show the SLoc."""
    s0, s1 = sympy.symbols("s0 s1", integer=True)
    sloc = SLoc("framework.py:12", "model.py:3 in forward")
    marker = ShapeEnvSource().make_guard(GuardBuilder.SHAPE_ENV)
    check = compile_guards(
        [marker],
        shape_guards=[
            ShapeGuard(sympy.Ge(s0, 2), sloc, False),
            ShapeGuard(sympy.Eq(sympy.Mod(s1, 8), 0), sloc, False),
            sympy.Lt(s0, s1),
        ],
        symbol_sources={s0: L("n"), "s1": L("m")},
        f_locals={"n": 4, "m": 16},
    )
    # The marker guard is a leaf that checks nothing; each shape guard is one more leaf.
    assert [leaf.kind.name for leaf in check.leaves] == ["SHAPE_ENV"] * 4
    assert check.source.count("# SHAPE_ENV: (") == 3
    assert_accepts(check, {"n": 2, "m": 8})
    assert reasons(check, {"n": 1, "m": 12}) == [
        "(L['n'] >= 2) failed: L['n'] = 1  # model.py:3 in forward (framework.py:12)",
        "((L['m'] % 8) == 0) failed: L['m'] = 12  # model.py:3 in forward (framework.py:12)",
    ]
    assert reasons(check, {"n": 40, "m": 16}) == ["(L['n'] < L['m']) failed: L['n'] = 40, L['m'] = 16"]
    assert check.fn({"n": 40, "m": 16}) is False


def test_shape_env_functions() -> None:
    """Max, Min, floor division and rationals evaluate as sympy says."""
    s0 = sympy.Symbol("s0", integer=True)
    exprs = [sympy.Eq(sympy.Max(s0, 3), s0), sympy.Le(sympy.floor(s0 / 2), 4),
             sympy.Gt(sympy.Rational(1, 3) * s0, 1)]
    check = compile_guards(shape_guards=exprs, symbol_sources={s0: L("n")}, f_locals={"n": 4})
    for n in range(-2, 12):
        expected = all(bool(e.subs(s0, n)) for e in exprs)
        assert check.fn({"n": n}) is expected, n
        assert check.reference({"n": n}) is expected, n


def test_shape_env_float_values_are_not_truncated() -> None:
    """A symbol whose source holds a float is compared as that float by the check and by the
    reference alike (2.5 is not 2; NaN equals nothing)."""
    s0 = sympy.Symbol("s0")
    check = compile_guards(shape_guards=[sympy.Eq(s0, 2)], symbol_sources={s0: L("f")},
                           f_locals={"f": 2.0})
    for value, expected in ((2.0, True), (2, True), (2.5, False), (float("nan"), False)):
        assert check.fn({"f": value}) is expected, value
        assert check.reference({"f": value}) is expected, value


def test_shape_env_missing_symbol_source() -> None:
    """A shape guard whose symbol has no source is a GuardCompileError naming the symbol."""
    s0 = sympy.Symbol("s0")
    with pytest.raises(GuardCompileError, match="no source for symbol"):
        compile_guards(shape_guards=[s0 > 2], f_locals={})


def test_shape_env_unknown_function() -> None:
    """A sympy function with no Python form is a GuardCompileError suggesting registration."""
    s0 = sympy.Symbol("s0")
    weird = sympy.Function("weird")
    with pytest.raises(GuardCompileError, match="register_sympy_function"):
        compile_guards(shape_guards=[sympy.Eq(weird(s0), 1)], symbol_sources={s0: L("n")},
                       f_locals={"n": 1}, check_frame=False)


# ---- a user-registered kind --------------------------------------------------------------


class IsMultiple(GuardKind):
    """Test kind: the value is an int multiple of ``of`` (an option)."""

    name = "TEST_IS_MULTIPLE"
    cost = 3

    def expect(self, value: Any, guard: Any, **options: Any) -> int:
        if set(options) != {"of"}:
            raise GuardKindError(f"{self.name} takes of=")
        return int(options["of"])

    def holds(self, value: Any, params: int) -> bool:
        return type(value) is int and value % params == 0

    def emit(self, var: str, params: int, ctx: EmitContext) -> str:
        return f"type({var}) is {ctx.const(int, 'int')} and {var} % {ctx.const(params, 'of')} == 0"

    def code(self, name: str, params: int) -> str:
        return f"{name} is a multiple of {params}"

    def reason(self, name: str, value: Any, params: int) -> str:
        return f"{name} is a multiple of {params} failed: {value!r} % {params} != 0"

    def fact(self, params: int) -> Optional[tuple[str, Any]]:
        return None


TEST_IS_MULTIPLE = register_guard_kind(IsMultiple(), replace=True)


def test_custom_kind_is_a_builder_attribute() -> None:
    """A registered kind is reachable as GuardBuilder.<NAME> and in guard_kinds()."""
    assert GuardBuilder.TEST_IS_MULTIPLE is TEST_IS_MULTIPLE
    assert isinstance(guard_kinds()["TEST_IS_MULTIPLE"], IsMultiple)
    assert "TEST_IS_MULTIPLE" in dir(GuardBuilder)


def test_custom_kind_compiles_and_explains() -> None:
    """A user kind compiles into the check with its own failure text."""
    fn = functools.partial(GuardBuilder.TEST_IS_MULTIPLE, of=4)
    guard, check = build(L("n"), fn, {"n": 8})
    assert guard.guard_types == ["TEST_IS_MULTIPLE"]
    assert guard.code_list == ["L['n'] is a multiple of 4"]
    assert_accepts(check, {"n": 12})
    assert_rejects(check, {"n": 10}, "L['n'] is a multiple of 4 failed: 10 % 4 != 0")
    assert check.fn({"n": 8.0}) is False


def test_register_twice_needs_replace() -> None:
    """Registering a second kind under a taken name is an error unless replace=True."""
    with pytest.raises(GuardKindError, match="already registered"):
        register_guard_kind(IsMultiple())
    with pytest.raises(GuardKindError, match="identifier as name"):
        register_guard_kind(object())  # type: ignore[arg-type]


class AliasTarget(IsMultiple):
    name = "TEST_ALIAS_TARGET"


def test_kind_alias() -> None:
    """An alias makes GuardBuilder.<ALIAS> the target's create_fn (no kind of its own), follows
    a replaced target, and keeps its name from being taken by a kind without replace=True."""
    from jitguard._src.compiler import kinds

    target = register_guard_kind(AliasTarget(), replace=True)
    kinds.register_guard_kind_alias("TEST_ALIAS", "TEST_ALIAS_TARGET")
    try:
        assert GuardBuilder.TEST_ALIAS is target
        assert "TEST_ALIAS" not in guard_kinds()
        guard, _ = build(L("n"), functools.partial(GuardBuilder.TEST_ALIAS, of=2), {"n": 4})
        assert guard.guard_types == ["TEST_ALIAS_TARGET"]
        replaced = register_guard_kind(AliasTarget(), replace=True)
        assert GuardBuilder.TEST_ALIAS is replaced is not target

        class Taken(GuardKind):
            name = "TEST_ALIAS"

        with pytest.raises(GuardKindError, match="already registered"):
            register_guard_kind(Taken())
        with pytest.raises(GuardKindError, match="registered guard kind"):
            kinds.register_guard_kind_alias("TEST_ALIAS_TARGET", "EQUALS_MATCH")
        with pytest.raises(GuardKindError, match="not an identifier"):
            kinds.register_guard_kind_alias("not-a-name", "EQUALS_MATCH")
    finally:
        kinds.unregister_guard_kind_alias("TEST_ALIAS")
    with pytest.raises(AttributeError):
        GuardBuilder.TEST_ALIAS  # noqa: B018
    with pytest.raises(KeyError, match="no guard kind alias named 'TEST_ALIAS'"):
        kinds.unregister_guard_kind_alias("TEST_ALIAS")


def test_unregistered_create_fn_is_rejected() -> None:
    """A create_fn that installs nothing is a GuardCompileError, never a silent hole."""

    def NOT_A_KIND(builder: Any, guard: Guard) -> None:
        pass

    with pytest.raises(GuardCompileError, match="installed no check"):
        build(L("n"), NOT_A_KIND, {"n": 1})


def test_unknown_builder_attribute() -> None:
    """GuardBuilder.<unknown> is an AttributeError listing the registered kinds."""
    with pytest.raises(AttributeError, match="no guard kind named 'NO_SUCH_KIND'"):
        GuardBuilder.NO_SUCH_KIND  # noqa: B018


# ---- export info across several guards ---------------------------------------------------


def test_export_info_for_every_guard_of_a_check() -> None:
    """Every guard of one compile gets its own guard_types and code_list."""
    frame = {"cfg": Config(lr=0.5, name="x"), "n": 3}
    guards = [
        L("cfg").make_guard(GuardBuilder.TYPE_MATCH),
        AttrSource(L("cfg"), "lr").make_guard(GuardBuilder.CONSTANT_MATCH),
        AttrSource(L("cfg"), "name").make_guard(GuardBuilder.EQUALS_MATCH),
        L("n").make_guard(GuardBuilder.CONSTANT_MATCH),
    ]
    check = compile_guards(guards, f_locals=frame)
    assert [(g.guard_types, g.code_list) for g in guards] == [
        (["TYPE_MATCH"], ["type(L['cfg']) is Config"]),
        (["EQUALS_MATCH"], ["L['cfg'].lr == 0.5"]),
        (["EQUALS_MATCH"], ["L['cfg'].name == 'x'"]),
        (["EQUALS_MATCH"], ["L['n'] == 3"]),
    ]
    assert len(check.leaves) == 4
    bad = {"cfg": Config(lr=0.25, name="x"), "n": 3}
    assert reasons(check, bad) == ["L['cfg'].lr == 0.5 failed: got 0.25"]


def test_a_create_fn_called_by_hand_is_a_type_error() -> None:
    """GuardBuilder.EQUALS_MATCH(value) is not a check: a TypeError says to make a guard."""
    with pytest.raises(TypeError, match=r"GuardBuilder\.EQUALS_MATCH is a guard kind's create_fn"
                       r".*got \(int, NoneType\).*source\.make_guard\(GuardBuilder\.EQUALS_MATCH\)"):
        GuardBuilder.EQUALS_MATCH(3, None)
    guard = L("x").make_guard(GuardBuilder.EQUALS_MATCH)
    with pytest.raises(TypeError, match=r"got \(str, Guard\)"):
        GuardBuilder.EQUALS_MATCH("builder", guard)
