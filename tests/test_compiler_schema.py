"""The JSON guard-set schema (jitguard/_src/compiler/schema.py): export, import, validation."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitguard as jg
from jitguard import GuardBuilder as GB
from jitguard._src.compiler.builder import Leaf
from jitguard._src.compiler.builtin_kinds import strict_equal
from jitguard._src.compiler.kinds import get_guard_kind
from jitguard._src.compiler.values import Ident

jsonschema = pytest.importorskip("jsonschema")


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Config:
    """A module-level class: portable by module:qualname."""


@jg.register_schema_type
@dataclasses.dataclass(frozen=True)
class Window:
    lo: int
    hi: Any


VALIDATOR = jsonschema.Draft202012Validator(jg.guard_schema())


def _validate(doc: dict[str, Any]) -> None:
    VALIDATOR.validate(doc)


# ---- strategies --------------------------------------------------------------------------

idents = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
roots = st.one_of(
    st.builds(jg.LocalSource, idents, st.booleans()),
    st.builds(jg.GlobalSource, idents),
    st.builds(jg.RandomValueSource, st.integers(0, 5)),
    st.builds(jg.ShapeEnvSource),
    st.builds(jg.GlobalStateSource),
    st.builds(jg.BackwardStateSource),
    st.builds(jg.EphemeralSource, st.none() | idents),
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), idents,
    st.binary(max_size=4), st.complex_numbers(allow_nan=True), st.sampled_from(list(Color)),
)
constants = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.tuples(inner, inner),
        st.frozensets(st.integers() | idents, max_size=3),
        st.builds(slice, inner, inner, inner),
        st.builds(range, st.integers(-5, 5), st.integers(-5, 5), st.integers(1, 3)),
    ),
    max_leaves=6,
)


def _tensor_property(base: jg.Source, prop: jg.TensorProperty, idx: int) -> jg.Source:
    if prop is jg.TensorProperty.STORAGE_OFFSET:
        return jg.TensorPropertySource(base, prop)
    return jg.TensorPropertySource(base, prop, idx)


def _chained(base: st.SearchStrategy[jg.Source]) -> st.SearchStrategy[jg.Source]:
    return st.one_of(
        st.builds(jg.AttrSource, base, idents.filter(lambda s: "." not in s)),
        st.builds(jg.CodeSource, base),
        st.builds(jg.ClosureSource, base),
        st.builds(jg.CellContentsSource, base),
        st.builds(jg.GetItemSource, base, st.integers() | idents | st.tuples(st.integers())),
        st.builds(jg.GetItemSource, base,
                  st.builds(slice, st.none() | st.integers(), st.none() | st.integers())),
        st.builds(jg.ConstDictKeySource, base, st.integers(0, 9)),
        st.builds(jg.TypeSource, base),
        st.builds(jg.DefaultsSource, base, st.integers(0, 3)),
        st.builds(lambda b, k: jg.DefaultsSource(b, k, True), base, st.from_regex(r"[a-z]{1,4}", fullmatch=True)),
        st.builds(jg.WeakRefCallSource, base),
        st.builds(_tensor_property, base, st.sampled_from(list(jg.TensorProperty)),
                  st.integers(0, 3)),
        st.builds(jg.NNModuleSource, base),
        st.builds(jg.UnspecializedNNModuleSource, base),
        st.builds(jg.UnspecializedBuiltinNNModuleSource, base),
        st.builds(jg.FSDPNNModuleSource, base),
    )


# A synthetic local allows no sub-guards: it is only ever a whole source.
sources = st.recursive(roots, _chained, max_leaves=4) | st.builds(jg.SyntheticLocalSource, idents)
# Every jitguard Source the strategies build: a new source class must join them.
COVERED = {
    "LocalSource", "GlobalSource", "RandomValueSource", "SyntheticLocalSource", "ShapeEnvSource",
    "GlobalStateSource", "BackwardStateSource", "EphemeralSource", "AttrSource", "CodeSource",
    "ClosureSource", "CellContentsSource", "GetItemSource", "ConstDictKeySource", "TypeSource",
    "DefaultsSource", "WeakRefCallSource", "TensorPropertySource", "NNModuleSource",
    "UnspecializedNNModuleSource", "UnspecializedBuiltinNNModuleSource", "FSDPNNModuleSource",
}
LOCAL_OBJECT = Config()  # held by identity: belongs to this process


def _kind(name: str) -> Any:
    return get_guard_kind(getattr(GB, name))[0]


portable_types = st.sampled_from([int, str, list, dict, Config, Window, Color, json.JSONDecoder])
leaves = st.one_of(
    st.builds(lambda s, v: Leaf(_kind("EQUALS_MATCH"), (s,), v), sources, constants),
    st.builds(lambda s, t: Leaf(_kind("TYPE_MATCH"), (s,), Ident(t)), sources, portable_types),
    st.builds(lambda s: Leaf(_kind("ID_MATCH"), (s,), Ident(LOCAL_OBJECT)), sources),
    st.builds(lambda s, o: Leaf(_kind("ID_MATCH"), (s,), Ident(o)), sources,
              st.sampled_from([os, None, True, False])),
    st.builds(lambda s: Leaf(_kind("NONE_MATCH"), (s,), None), sources),
    st.builds(lambda s: Leaf(_kind("NOT_NONE"), (s,), None), sources),
    st.builds(lambda s, b: Leaf(_kind("BOOL_MATCH"), (s,), b), sources, st.booleans()),
    st.builds(lambda s, n: Leaf(_kind("LENGTH_CHECK"), (s,), n), sources, st.integers(0, 99)),
    st.builds(lambda s, t, n: Leaf(_kind("SEQUENCE_LENGTH"), (s,), (Ident(t), n)), sources,
              st.sampled_from([list, tuple]), st.integers(0, 9)),
    st.builds(lambda s, k: Leaf(_kind("DICT_KEYS_MATCH"), (s,), (Ident(dict), tuple(k))), sources,
              st.lists(idents | st.integers() | st.sampled_from(list(Color)), max_size=4, unique=True)),
    st.builds(lambda s, k, inv: Leaf(_kind("DICT_CONTAINS"), (s,), (k, inv)), sources, idents,
              st.booleans()),
    st.builds(lambda s, a: Leaf(_kind("HASATTR"), (s,), a), sources, idents),
    st.builds(lambda s, lo, hi: Leaf(_kind("EQUALS_MATCH"), (s,), Window(lo, hi)), sources,
              st.integers(), constants),
    st.builds(lambda a, b: Leaf(_kind("DUPLICATE_INPUT"), (a, b), None), sources, sources),
)


def _same(a: Any, b: Any) -> bool:
    """Params equal: identity for Idents, strict equality (NaN == NaN, -0.0 != 0.0) else."""
    if isinstance(a, Ident) or isinstance(b, Ident):
        return isinstance(a, Ident) and isinstance(b, Ident) and a.get() is b.get()
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return strict_equal(a, b)


# ---- properties ----------------------------------------------------------------------------


def test_strategies_cover_every_source_class() -> None:
    """Every public concrete Source of jitguard is generated by the property tests."""
    public = {
        n for n in jg.sources.__all__
        if isinstance(getattr(jg, n), type) and issubclass(getattr(jg, n), jg.Source)
        and n not in ("Source", "ChainedSource", "ConstantSource")
    }
    assert public == COVERED


@pytest.mark.parametrize("shared", [False, True], ids=["version 1", "version 2"])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(leaves, max_size=6))
def test_round_trip_through_json(shared: bool, ls: list[Leaf]) -> None:
    """Random guard sets survive export -> JSON text -> import -> export, and validate, in
    both schema versions (sources in full, or once each in the source table)."""
    text = jg.guards_to_json(ls, shared_sources=shared)
    doc = json.loads(text)
    _validate(doc)
    records = jg.import_guards(text)
    assert len(records) == len(ls)
    for leaf, rec in zip(ls, records, strict=True):
        assert rec.kind == leaf.kind.name
        assert rec.sources == leaf.sources
        assert [s.name() for s in rec.sources] == [s.name() for s in leaf.sources]
        assert rec.code == leaf.code()
        if rec.portable:
            assert _same(rec.params, leaf.params)
        else:
            assert isinstance(rec.params, jg.NotPortable)
            # an object of this process, or a NaN other than float("nan") (its sign and
            # payload have no JSON form, and guards tell NaNs apart by them)
            assert (rec.params.id == id(LOCAL_OBJECT) and "Config" in (rec.reason or "")) or (
                "a NaN of bits" in (rec.reason or ""))
    again = jg.export_guards(records, shared_sources=shared)
    _validate(again)
    assert again == doc


# ---- behaviour -----------------------------------------------------------------------------


def _frame() -> dict[str, Any]:
    return {
        "n": 7, "x": (1, 2.5, math.nan, b"x"), "cfg": Config(), "d": {"a": None, 2: -0.0},
        "seq": [1, 2, 3], "flag": True, "c": Color.BLUE,
    }


def _guards() -> list[jg.Guard]:
    L, A, I = jg.LocalSource, jg.AttrSource, jg.GetItemSource  # noqa: E741
    return [
        L("n").make_guard(GB.EQUALS_MATCH),
        L("x").make_guard(GB.EQUALS_MATCH),
        L("cfg").make_guard(GB.TYPE_MATCH),
        L("d").make_guard(GB.DICT_KEYS_MATCH),
        I(L("d"), "a").make_guard(GB.CONSTANT_MATCH),
        I(L("d"), 2).make_guard(GB.EQUALS_MATCH),
        L("seq").make_guard(GB.SEQUENCE_LENGTH),
        L("flag").make_guard(GB.BOOL_MATCH),
        L("c").make_guard(GB.EQUALS_MATCH),
        A(L("cfg"), "missing").make_guard(GB.NOT_HASATTR),
    ]


def test_imported_check_accepts_and_rejects_like_the_original() -> None:
    """A check compiled from imported records decides every frame as the original does."""
    frame = _frame()
    names = tuple(frame)
    original = jg.compile_guards(_guards(), f_locals=frame, arg_names=names)
    doc = jg.export_guards(original)
    _validate(doc)
    assert doc["arg_names"] == list(names) and doc["schema_version"] == 1
    rebuilt = jg.compile_guard_records(jg.import_guards(json.dumps(doc)), arg_names=names)
    variants = [
        {}, {"n": 8}, {"n": 7.0}, {"x": (1, 2.5, math.nan, b"y")}, {"cfg": object()},
        {"d": {"a": None, 2: 0.0}}, {"d": {2: -0.0, "a": None}}, {"seq": [1, 2]},
        {"seq": (1, 2, 3)}, {"flag": 1}, {"c": Color.RED}, {"d": {"a": 0, 2: -0.0}},
    ]
    for change in variants:
        args = tuple({**frame, **change}.values())
        assert rebuilt.fn(*args) == original.fn(*args), change
        assert [str(f) for f in rebuilt.explain(*args)] == [str(f) for f in original.explain(*args)]
    assert rebuilt.fn(*frame.values())
    assert [str(f) for f in rebuilt.explain(*{**frame, "n": 8}.values())] == [
        "L['n'] == 7 failed: got 8"
    ]


def test_identity_guard_on_a_process_object_is_kept_as_not_portable() -> None:
    """An ID_MATCH on a live object is exported with its source and a reason, not dropped;
    compiling it from the document is refused, naming the source."""
    obj = Config()
    check = jg.compile_guards(
        [jg.LocalSource("o").make_guard(GB.ID_MATCH), jg.LocalSource("n").make_guard(GB.EQUALS_MATCH)],
        f_locals={"o": obj, "n": 1},
    )
    doc = jg.export_guards(check)
    _validate(doc)
    (g,) = [g for g in doc["guards"] if g["kind"] == "ID_MATCH"]
    assert g["portable"] is False
    assert g["sources"][0]["name"] == "L['o']"
    assert g["expect"] == {
        "$": "not_portable", "type": "a Config of this process, held by identity", "id": id(obj),
    }
    assert g["reason"] == "expects a Config of this process, held by identity"
    records = jg.import_guards(doc)
    assert [r.portable for r in records] == [False, True]
    with pytest.raises(jg.GuardSchemaError) as e:
        jg.compile_guard_records(records)
    assert str(e.value) == (
        "the ID_MATCH guard on L['o'] is not portable: expects a Config of this process, held "
        "by identity; it must be rebuilt from a live frame"
    )


def test_long_lived_objects_are_portable() -> None:
    """Identity guards on a module, a module-level class and function, None and True are
    portable, and the rebuilt check holds exactly those objects."""
    frame = {"m": os, "k": Config, "f": json.dumps, "z": None, "t": True}
    check = jg.compile_guards([jg.LocalSource(n).make_guard(GB.ID_MATCH) for n in frame],
                              f_locals=frame)
    doc = jg.export_guards(check)
    _validate(doc)
    assert sorted(json.dumps(g["expect"]) for g in doc["guards"]) == sorted([
        '{"$": "object", "module": "os"}',
        f'{{"$": "object", "class": "{__name__}:Config"}}',
        '{"$": "object", "class": "json:dumps"}',
        '{"$": "object", "const": null}',
        '{"$": "object", "const": true}',
    ])
    rebuilt = jg.compile_guard_records(jg.import_guards(doc))
    assert rebuilt(frame)
    for name, other in [("m", json), ("k", Window), ("f", json.loads), ("z", False), ("t", 1)]:
        assert not rebuilt({**frame, name: other}), name


def test_identity_guard_on_an_enum_member_re_binds_by_name() -> None:
    """An ID_MATCH on a member of a module-level enum is written by class, name and value;
    the rebuilt check passes that member and fails another member or an equal value."""
    check = jg.compile_guards([jg.LocalSource("c").make_guard(GB.ID_MATCH)],
                              f_locals={"c": Color.RED})
    doc = jg.export_guards(check)
    _validate(doc)
    (g,) = doc["guards"]
    assert g["portable"] is True
    assert g["expect"] == {
        "$": "object", "enum": f"{__name__}:Color", "member": "RED", "value": 1,
    }
    rebuilt = jg.compile_guard_records(jg.import_guards(json.dumps(doc)))
    assert rebuilt({"c": Color.RED})
    assert not rebuilt({"c": Color.BLUE})
    assert not rebuilt({"c": 1})
    assert [str(f) for f in rebuilt.explain({"c": Color.BLUE})] == [
        str(f) for f in check.explain({"c": Color.BLUE})
    ]


def test_enum_member_whose_value_changed_is_refused() -> None:
    """Reading an enum member whose value is no longer the recorded one (or a member that
    is gone) is refused, naming the guard and the change."""
    check = jg.compile_guards([jg.LocalSource("c").make_guard(GB.ID_MATCH)],
                              f_locals={"c": Color.RED})
    doc = jg.export_guards(check)
    changed = json.loads(json.dumps(doc))
    changed["guards"][0]["expect"]["value"] = 3
    with pytest.raises(jg.GuardSchemaError) as e:
        jg.import_guards(changed)
    assert str(e.value) == (
        f"the ID_MATCH guard on L['c']: {__name__}:Color.RED is 1 in this process, 3 where "
        f"the guard set was written (the enum changed)"
    )
    changed["guards"][0]["expect"].update(member="GREEN", value=1)
    with pytest.raises(jg.GuardSchemaError, match="Color has no member 'GREEN'"):
        jg.import_guards(changed)


def test_enum_member_of_a_local_class_is_not_portable() -> None:
    """A member of an enum class defined in a function has no home to re-bind from: its
    identity guard stays not portable."""

    class Local(enum.Enum):
        A = 1

    check = jg.compile_guards([jg.LocalSource("c").make_guard(GB.ID_MATCH)],
                              f_locals={"c": Local.A})
    (g,) = jg.export_guards(check)["guards"]
    assert g["portable"] is False
    assert "held by identity" in g["reason"]


def test_schema_file_ships_in_the_package() -> None:
    """The JSON Schema is package data, itself a valid draft 2020-12 schema."""
    schema = jg.guard_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"] == {"enum": [1, jg.GUARD_SCHEMA_VERSION]}


def test_version_2_writes_each_source_once() -> None:
    """shared_sources=True: every distinct source, nested bases included, is one row of the
    source table, each use refers to its row, a row refers only to earlier rows, and the
    records read back equal version 1's."""
    L, A, I = jg.LocalSource, jg.AttrSource, jg.GetItemSource  # noqa: E741
    layers = [I(A(A(L("self"), "layers"), "_modules"), str(i)) for i in range(4)]
    leaves = [Leaf(get_guard_kind(GB.TYPE_MATCH)[0], (A(m, name),), Ident(int))
              for m in layers for name in ("weight", "bias")]
    doc = jg.export_guards(leaves, shared_sources=True)
    _validate(doc)
    table = doc["source_table"]
    distinct = {s for leaf in leaves for s in leaf.sources[0].chain()}
    assert len(table) == len(distinct) == 1 + 1 + 1 + 4 + 8
    assert [r["name"] for r in table].count("L['self']") == 1
    for i, row in enumerate(table):
        refs = [v["i"] for v in row["fields"].values() if isinstance(v, dict) and "i" in v]
        assert all(j < i for j in refs), row
    assert all(g["sources"][0]["$"] == "ref" for g in doc["guards"])
    assert [r.sources for r in jg.import_guards(doc)] == [
        r.sources for r in jg.import_guards(jg.export_guards(leaves))]
    assert len(json.dumps(doc)) < len(json.dumps(jg.export_guards(leaves)))


def test_schema_rejects_malformed_documents() -> None:
    """The schema itself rejects a document missing parts or with an unknown value tag."""
    doc = jg.export_guards(jg.compile_guards([jg.LocalSource("n").make_guard(GB.EQUALS_MATCH)],
                                             f_locals={"n": 1}))
    _validate(doc)
    bad = json.loads(json.dumps(doc))
    bad["guards"][0]["expect"] = {"$": "pickle", "data": "..."}
    with pytest.raises(jsonschema.ValidationError):
        _validate(bad)
    del doc["guards"][0]["sources"]
    with pytest.raises(jsonschema.ValidationError):
        _validate(doc)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"schema_version": 3, "kind": "jitguard.guard_set", "guards": []},
         "this guard set has schema_version 3, written by a newer jitguard; this one reads up "
         "to 2 (upgrade jitguard)"),
        ({"schema_version": 1, "kind": "jitguard.guard_set", "guards": [
            {"kind": "EQUALS_MATCH", "code": "", "portable": True, "expect": 1,
             "sources": [{"$": "ref", "i": 0}]}]},
         "guard 0: {'$': 'ref', 'i': 0} refers to no earlier row of the document's source "
         "table"),
        ({"schema_version": 2, "kind": "jitguard.guard_set", "source_table": [
            {"type": "AttrSource", "name": "", "fields": {"base": {"$": "ref", "i": 0},
                                                          "member": "a"}}], "guards": [
            {"kind": "EQUALS_MATCH", "code": "", "portable": True, "expect": 1,
             "sources": [{"$": "ref", "i": 0}]}]},
         "guard 0: {'$': 'ref', 'i': 0} refers to no earlier row of the document's source "
         "table"),
        ({"schema_version": 2, "kind": "jitguard.guard_set", "source_table": {}, "guards": []},
         "source_table is a list, got dict"),
        ({"kind": "jitguard.guard_set", "guards": []},
         "not a jitguard guard set: schema_version is None"),
        ("[1", "a guard set must be JSON: Expecting ',' delimiter: line 1 column 3 (char 2)"),
        ({"schema_version": 1, "kind": "jitguard.guard_set", "guards": [
            {"kind": "EQUALS_MATCH", "code": "", "portable": True, "expect": 1,
             "sources": [{"type": "NoSuchSource", "name": "", "fields": {}}]}]},
         "guard 0: no loaded Source subclass named 'NoSuchSource' (import the module that "
         "defines it)"),
        ({"schema_version": 1, "kind": "jitguard.guard_set", "guards": [
            {"kind": "TYPE_MATCH", "code": "", "portable": True,
             "expect": {"$": "object", "class": "no_such_module_xyz:K"},
             "sources": [{"type": "LocalSource", "name": "", "fields": {"local_name": "k"}}]}]},
         "no_such_module_xyz:K is not loaded in this process (import no_such_module_xyz first: "
         "reading a guard set never imports a module)"),
    ],
)
def test_import_errors_say_what_is_wrong(doc: Any, message: str) -> None:
    """Bad documents raise GuardSchemaError (a ValueError) with a message that says why."""
    with pytest.raises(jg.GuardSchemaError) as e:
        jg.import_guards(doc)
    assert isinstance(e.value, ValueError)
    assert str(e.value) == message


def test_unknown_kind_is_refused_when_compiling() -> None:
    """A record of a kind this process has not registered names the kind and source."""
    rec = jg.GuardRecord("NO_SUCH_KIND", (jg.LocalSource("x"),), 1, "x")
    with pytest.raises(jg.GuardSchemaError) as e:
        jg.compile_guard_records([rec])
    assert str(e.value) == (
        "the guard on L['x'] is of kind NO_SUCH_KIND, which is not registered in this process"
    )


def test_unregistered_value_type_is_not_portable() -> None:
    """An expectation with no JSON form makes its guard not portable, with the type named."""

    @dataclasses.dataclass(frozen=True)
    class Opaque:
        v: int

    leaf = Leaf(_kind("EQUALS_MATCH"), (jg.LocalSource("x"),), Opaque(1))
    (g,) = jg.export_guards([leaf])["guards"]
    assert g["portable"] is False
    assert g["reason"] == (
        "expects a test_unregistered_value_type_is_not_portable.<locals>.Opaque (no JSON form; "
        "see register_schema_type)"
    )


def _deco(fn: Any) -> Any:
    import functools

    @functools.wraps(fn)
    def wrapper(*a: Any) -> Any:
        return fn(*a)

    return wrapper


@_deco
def _decorated(x: Any) -> Any:
    return x


class _WithClassState:
    registry: dict[str, int] = {"a": 1}

    @property
    def size(self) -> int:
        return 3


def test_codes_of_wrappers_nested_functions_and_properties_re_bind_by_name() -> None:
    """ID_MATCH on the code of a decorated function (through __wrapped__), of the wrapper
    nested in its decorator, and of a property's getter is portable, and the rebuilt check
    holds exactly those code objects."""
    frame = {"inner": _decorated.__wrapped__.__code__, "wrapper": _decorated.__code__,
             "getter": _WithClassState.size.fget.__code__}
    check = jg.compile_guards([jg.LocalSource(n).make_guard(GB.ID_MATCH) for n in frame],
                              f_locals=frame)
    doc = jg.export_guards(check)
    _validate(doc)
    assert all(g["portable"] for g in doc["guards"]), doc["guards"]
    expects = {json.dumps(g["expect"]) for g in doc["guards"]}
    assert json.dumps({"$": "object", "code": f"{__name__}:_deco",
                       "nested": "_deco.<locals>.wrapper"}) in expects
    rebuilt = jg.compile_guard_records(jg.import_guards(json.dumps(doc)))
    assert rebuilt(frame)
    for name in frame:
        assert not rebuilt({**frame, name: _deco.__code__}), name


def test_a_class_attribute_with_no_portable_form_re_binds_through_its_class() -> None:
    """CLASS_ATTRS_MATCH on a class-level dict and a property is portable ([Note: Class
    attributes re-bound through their class]); the rebuilt check fails once the class
    attribute is replaced."""
    obj = _WithClassState()
    check = jg.compile_guards([jg.LocalSource("o").make_guard(
        functools.partial(GB.CLASS_ATTRS_MATCH, attrs=("registry", "size")))],
        f_locals={"o": obj})
    doc = jg.export_guards(check)
    _validate(doc)
    assert doc["guards"][0]["portable"] is True, doc["guards"][0]
    rebuilt = jg.compile_guard_records(jg.import_guards(json.dumps(doc)))
    assert rebuilt({"o": obj})
    saved = _WithClassState.registry
    try:
        _WithClassState.registry = {"a": 1}
        assert not rebuilt({"o": obj})
    finally:
        _WithClassState.registry = saved
    assert rebuilt({"o": obj})


def test_a_local_class_attribute_stays_not_portable() -> None:
    """A dict class attribute of a class made in a function has no class to re-bind
    through: the guard stays not portable."""
    class Local:
        registry: dict[str, int] = {}

    check = jg.compile_guards([jg.LocalSource("o").make_guard(
        functools.partial(GB.CLASS_ATTRS_MATCH, attrs=("registry",)))],
        f_locals={"o": Local()})
    assert jg.export_guards(check)["guards"][0]["portable"] is False


@dataclasses.dataclass
class _Made:
    """A dataclass: its ``__init__``'s code is made by exec (``__create_fn__.<locals>``)."""

    a: int = 0


def _rebound(frame: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    check = jg.compile_guards([jg.LocalSource(n).make_guard(GB.ID_MATCH) for n in frame],
                              f_locals=frame)
    doc = jg.export_guards(check)
    _validate(doc)
    return doc, jg.compile_guard_records(jg.import_guards(json.dumps(doc)))


def test_codes_of_frozen_modules_re_bind_by_name() -> None:
    """A code of a frozen stdlib module (``<frozen _collections_abc>``: Mapping.get) is
    portable, found again in that module, and the rebuilt check holds that very code."""
    import collections.abc

    code = collections.abc.Mapping.get.__code__
    if not code.co_filename.startswith("<frozen "):
        pytest.skip("_collections_abc is not frozen in this Python")
    doc, rebuilt = _rebound({"c": code})
    assert doc["guards"][0]["portable"] is True, doc["guards"][0]
    assert doc["guards"][0]["expect"]["code"] == "_collections_abc:Mapping.get"
    assert rebuilt({"c": code})
    assert not rebuilt({"c": collections.abc.Mapping.keys.__code__})


def test_codes_made_by_exec_re_bind_as_their_class_member() -> None:
    """A dataclass's __init__ code (made by exec, named __create_fn__.<locals>.__init__) is
    portable as its class's member and comes back as the same code object ([Note: Class
    members made by exec]); under a functools.wraps wrapper too."""
    from jitguard._src.compiler.schema_homes import decode_code

    code = _Made.__init__.__code__
    if "<locals>" not in getattr(code, "co_qualname", "<locals>"):
        pytest.skip("this Python names a dataclass __init__ otherwise")
    doc, rebuilt = _rebound({"c": code})
    home = doc["guards"][0]["expect"]
    assert doc["guards"][0]["portable"] is True, doc["guards"][0]
    assert home["code"] == f"{__name__}:_Made.__init__"
    assert decode_code(home, "t") is code
    assert rebuilt({"c": code}) and not rebuilt({"c": _deco.__code__})
    inner = _Made.__init__
    _Made.__init__ = functools.wraps(inner)(lambda self, *a, **k: inner(self, *a, **k))
    try:
        assert decode_code(home, "t") is code  # found along the wrapper's __wrapped__
    finally:
        _Made.__init__ = inner  # type: ignore[method-assign]


def test_a_code_made_by_exec_and_held_by_no_class_is_not_portable() -> None:
    """A code made by exec that no module-level class holds has no home: not portable."""
    scope: dict[str, Any] = {}
    exec("def make():\n    def inner():\n        return 1\n    return inner", scope)
    code = scope["make"]().__code__
    check = jg.compile_guards([jg.LocalSource("c").make_guard(GB.ID_MATCH)],
                              f_locals={"c": code})
    assert jg.export_guards(check)["guards"][0]["portable"] is False


class _Holder:
    """An object whose instance dict holds a function made in a function that is gone."""


def _make_holder() -> _Holder:
    def inner(x: Any) -> Any:
        return x

    holder = _Holder()
    holder.alias = inner  # type: ignore[attr-defined]
    return holder


_HELD = _make_holder()
del _make_holder  # as os deletes os._createenviron once os.environ is made


def test_a_nested_code_held_by_a_module_level_object_re_binds_as_its_member() -> None:
    """A code whose outer function is gone, held under another name in a module-level
    object's instance dict (as os.environ.encodekey is os._createenviron's encode), is
    portable as that member and comes back as the same code object."""
    from jitguard._src.compiler.schema_homes import decode_code

    code = _HELD.alias.__code__  # type: ignore[attr-defined]
    check = jg.compile_guards([jg.LocalSource("c").make_guard(GB.ID_MATCH)],
                              f_locals={"c": code})
    (guard,) = jg.export_guards(check)["guards"]
    assert guard["portable"] is True, guard
    assert guard["expect"]["code"] == f"{__name__}:_HELD.alias"
    assert decode_code(guard["expect"], "t") is code


class _RaisingMeta(type):
    """A metaclass that raises on the names a scan of a module's classes reads."""

    def __getattribute__(cls, name: str) -> Any:
        if name in ("__qualname__", "__module__", "__dict__", "__mro__"):
            raise RuntimeError(f"no {name}")
        return super().__getattribute__(name)


class _RaisingClass(metaclass=_RaisingMeta):
    pass


class _RaisingGetattr:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")


_RAISING_OBJECT = _RaisingGetattr()


def test_finding_a_code_s_home_survives_module_objects_that_raise() -> None:
    """A module holding a class whose metaclass raises on __qualname__/__dict__ and an
    object whose __getattr__ raises: a code's home is still found (nested, and as a
    module-level object's member), and an orphan code is still refused, not raised."""
    assert _RaisingClass is not None and _RAISING_OBJECT is not None
    for code, portable in ((_HELD.alias.__code__, True),  # type: ignore[attr-defined]
                           (_Made.__init__.__code__, True)):
        check = jg.compile_guards([jg.LocalSource("c").make_guard(GB.ID_MATCH)],
                                  f_locals={"c": code})
        assert jg.export_guards(check)["guards"][0]["portable"] is portable
    scope: dict[str, Any] = {}
    exec("def make():\n    def inner():\n        return 1\n    return inner", scope)
    check = jg.compile_guards([jg.LocalSource("c").make_guard(GB.ID_MATCH)],
                              f_locals={"c": scope["make"]().__code__})
    assert jg.export_guards(check)["guards"][0]["portable"] is False


# ---- homes of run-time classes, wrapped functions and module-level instances ---------------

_HOMES_SOURCE = '''
def make(fn):
    class Func:
        def forward(self, *args):
            return fn(*args)
    return Func()


def apply(x):
    return x + 1


apply = make(apply)
SETTINGS = make(len)
'''


@pytest.fixture
def homes_module(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A loaded module (with a file of its own) in the pattern of kernels' hub wrappers: a
    module-level function replaced by an instance of a class made in a function, whose
    method closes over it."""
    import sys
    import types

    name = "jg_schema_homes_case"
    mod = types.ModuleType(name)
    mod.__file__ = f"/nonexistent/{name}.py"
    exec(compile(_HOMES_SOURCE, mod.__file__, "exec"), vars(mod))
    monkeypatch.setitem(sys.modules, name, mod)
    return mod


def _exported(kind: Any, value: Any) -> dict[str, Any]:
    check = jg.compile_guards([jg.LocalSource("v").make_guard(kind)], f_locals={"v": value})
    doc = jg.export_guards(check, shared_sources=True)
    _validate(doc)
    (guard,) = [g for g in doc["guards"] if g["kind"] != "GLOBAL_STATE"]
    return guard


def test_a_class_made_at_run_time_re_binds_as_the_type_of_a_module_level_object(
        homes_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """TYPE_MATCH on a class made inside a function: written as the type of the
    module-level object of that class (each call of ``make`` makes another class: SETTINGS
    is of none but its own), read back as that object's type; refused when the object
    there is now of another class."""
    from jitguard._src.compiler.schema_homes import decode_class

    cls = type(homes_module.apply)
    guard = _exported(GB.TYPE_MATCH, homes_module.apply)
    assert guard["portable"] is True, guard
    assert guard["expect"]["type_of"] == "jg_schema_homes_case:apply"
    assert guard["expect"]["made_as"] == "jg_schema_homes_case:make.<locals>.Func"
    check = jg.compile_guards([jg.LocalSource("v").make_guard(GB.TYPE_MATCH)],
                              f_locals={"v": homes_module.apply})
    doc = jg.export_guards(check, shared_sources=True)
    (rec,) = [r for r in jg.import_guards(doc) if r.kind == "TYPE_MATCH"]
    assert rec.params.get() is cls
    monkeypatch.setattr(homes_module, "SETTINGS", object())
    monkeypatch.setattr(homes_module, "apply", object())
    with pytest.raises(jg.GuardSchemaError, match="is a builtins:object in this process"):
        decode_class(guard["expect"], "t")


def test_a_function_wrapped_by_an_instance_re_binds_through_its_class_closure(
        homes_module: Any) -> None:
    """ID_MATCH on the code of a module-level function that a decorator replaced by an
    instance closing over it: portable as that module attribute, and read back as the very
    same code object."""
    from jitguard._src.compiler.schema_homes import decode_code

    code = type(homes_module.apply).forward.__closure__[0].cell_contents.__code__
    guard = _exported(GB.ID_MATCH, code)
    assert guard["portable"] is True, guard
    assert guard["expect"]["code"] == "jg_schema_homes_case:apply"
    assert decode_code(guard["expect"], "t") is code


def test_a_module_level_instance_re_binds_only_where_a_rule_allows_it(
        homes_module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """ID_MATCH on a module-level instance: not portable by default (its state in another
    process may differ unguarded); with a rule that accepts it, written by its name and
    type and read back as the object living there, refused once that is of another type.
    A module-level value (a big int) held by identity stays not portable either way."""
    from jitguard._src.compiler import schema_homes

    assert _exported(GB.ID_MATCH, homes_module.apply)["portable"] is False
    monkeypatch.setattr(schema_homes, "_instance_rules", [])
    schema_homes.rebind_instances(lambda o: type(o).__name__ == "Func")
    guard = _exported(GB.ID_MATCH, homes_module.apply)
    assert guard["portable"] is True, guard
    assert guard["expect"]["class"] == "jg_schema_homes_case:apply"
    assert guard["expect"]["instance_of"] == "jg_schema_homes_case:make.<locals>.Func"
    assert schema_homes.decode_instance(guard["expect"], "t") is homes_module.apply
    homes_module.BIG = 10**30
    schema_homes.rebind_instances(lambda o: True)
    assert _exported(GB.ID_MATCH, homes_module.BIG)["portable"] is False
    monkeypatch.setattr(homes_module, "apply", len)
    with pytest.raises(jg.GuardSchemaError, match="is a builtins:builtin_function_or_method"):
        schema_homes.decode_instance(guard["expect"], "t")

