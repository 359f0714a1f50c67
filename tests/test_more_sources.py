"""The sources of more_sources: their names (Dynamo's forms), reads that bypass user
overrides, and agreement of the compiled read with the reference read."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from jitguard import (
    ConstDictKeySource,
    GuardBuilder,
    LocalSource,
    SourceError,
    compile_guards,
)
from jitguard._src.more_sources import (
    ClosureCellSource,
    DictGetItemSource,
    DictSubclassGetItemSource,
    GenericAttrSource,
    ListGetItemSource,
    TypeDictSource,
    TypeMROSource,
)

L = LocalSource("x")


def check_on(source: Any, frame: dict[str, Any], kind: Any = None) -> Any:
    """A check of ``kind`` (default TYPE_MATCH) on ``source`` built over ``frame``."""
    guard = source.make_guard(kind or GuardBuilder.TYPE_MATCH)
    return compile_guards([guard], f_locals=frame, arg_names=list(frame))


class LyingDict(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: Any) -> Any:
        return "lie"


def test_dict_getitem_name_and_literal_keys() -> None:
    """``L['x']['k']`` and ``L['x'][1]``; a key without a literal form is refused."""
    assert DictGetItemSource(L, "k").name() == "L['x']['k']"
    assert DictGetItemSource(L, 1).name() == "L['x'][1]"
    assert DictGetItemSource(L, ("a", 2)).name() == "L['x'][('a', 2)]"
    with pytest.raises(SourceError, match="no literal form"):
        DictGetItemSource(L, object())


def test_dict_getitem_bypasses_subclass_getitem() -> None:
    """The item is read with dict.__getitem__, in both read paths."""
    d = LyingDict(k=1)
    src = DictGetItemSource(L, "k")
    assert src.get_value({"x": d}, {}) == 1
    check = check_on(src, {"x": d})
    assert check(d) and check.reference(d)
    assert not check(LyingDict(k="s"))


def test_dict_getitem_after_type_match_on_the_dict() -> None:
    """Once an earlier TYPE_MATCH has pinned the dict as an exact dict, its items are read
    with a plain subscript; a dict subclass then fails that test, never reaching the read.
    A TYPE_MATCH on a subclass (whose instances may change class) pins nothing."""
    item = DictGetItemSource(L, "k")
    guards = [L.make_guard(GuardBuilder.TYPE_MATCH), item.make_guard(GuardBuilder.TYPE_MATCH)]
    check = compile_guards(guards, f_locals={"x": {"k": 1}}, arg_names=["x"])
    read = [ln for ln in check.source.splitlines() if ln.endswith("# L['x']['k']")]
    assert len(read) == 1 and "dict_getitem" not in read[0]
    assert check({"k": 2}) and check.reference({"k": 2})
    for bad in ({"k": "s"}, LyingDict(k=1), {}):
        assert not check(bad) and not check.reference(bad)
    d = LyingDict(k=1)
    guards = [L.make_guard(GuardBuilder.TYPE_MATCH), item.make_guard(GuardBuilder.TYPE_MATCH)]
    check = compile_guards(guards, f_locals={"x": d}, arg_names=["x"])
    assert "dict_getitem" in check.source
    assert check(d) and check.reference(d)
    assert not check(LyingDict(k="s")) and not check({"k": 1})


def test_dict_getitem_by_key_position() -> None:
    """With a ConstDictKeySource index: the item at that key position, named as Dynamo does."""
    src = DictGetItemSource(L, ConstDictKeySource(L, 1))
    assert src.name() == "L['x'][list(dict.keys(L['x']))[1]]"
    d = collections.OrderedDict(a=1, b="s")
    assert src.get_value({"x": d}, {}) == "s"
    check = check_on(src, {"x": d})
    assert check(d) and not check(collections.OrderedDict(b="s", a=1))
    with pytest.raises(SourceError, match="another dict"):
        DictGetItemSource(L, ConstDictKeySource(LocalSource("y"), 0))


def test_dict_subclass_getitem_names_and_reads_as_dynamo() -> None:
    """An item of a dict subclass: named as Dynamo names it (``dict.__getitem__(d, key)`` by
    key position, ``d['k']`` by literal key), read with dict.__getitem__ in both read paths."""
    by_pos = DictSubclassGetItemSource(L, ConstDictKeySource(L, 1))
    assert by_pos.name() == "dict.__getitem__(L['x'], list(dict.keys(L['x']))[1])"
    assert DictSubclassGetItemSource(L, "k").name() == "L['x']['k']"
    d = LyingDict(a=1, b="s")
    assert by_pos.get_value({"x": d}, {}) == "s"
    check = check_on(by_pos, {"x": d})
    assert check(d) and check.reference(d)
    for bad in (LyingDict(b="s", a=1), LyingDict(a=1, b=2)):
        assert not check(bad) and not check.reference(bad)
    literal = check_on(DictSubclassGetItemSource(L, "b"), {"x": d})
    assert literal(d) and not literal(LyingDict(a=1, b=2))
    assert DictSubclassGetItemSource(L, "k") != DictGetItemSource(L, "k")


class LyingList(list):  # type: ignore[type-arg]
    def __getitem__(self, i: Any) -> Any:
        return "lie"


def test_list_getitem() -> None:
    """``list.__getitem__(L['x'], 1)``: the list's own item, not a subclass override."""
    src = ListGetItemSource(L, 1)
    assert src.name() == "list.__getitem__(L['x'], 1)"
    xs = LyingList([0, 1.5])
    check = check_on(src, {"x": xs})
    assert check(xs) and check.reference(xs)
    assert not check(LyingList([0, 1])) and not check.reference(LyingList([0, 1]))
    with pytest.raises(SourceError):
        ListGetItemSource(L, "1")  # type: ignore[arg-type]


class Shy:
    def __getattribute__(self, name: str) -> Any:
        return "lie"


def test_generic_attr_bypasses_getattribute() -> None:
    """``object.__getattribute__(L['x'], 'a')`` reads the instance attribute itself."""
    src = GenericAttrSource(L, "a")
    assert src.name() == "object.__getattribute__(L['x'], 'a')"
    o = Shy()
    object.__setattr__(o, "a", 3)
    check = check_on(src, {"x": o})
    assert check(o) and check.reference(o)
    o2 = Shy()
    object.__setattr__(o2, "a", "s")
    assert not check(o2) and not check.reference(o2)


def test_type_mro() -> None:
    """``L['x'].__mro__``."""
    src = TypeMROSource(L)
    assert src.name() == "L['x'].__mro__"
    assert src.get_value({"x": int}, {}) == (int, object)


def make_closure() -> Any:
    k = 4

    def inner() -> Any:
        return k

    return inner


def test_closure_cell_named_as_the_frame_sees_it() -> None:
    """A free variable is named ``L['k']`` and read from the function's cell at check time."""
    fn = make_closure()
    src = ClosureCellSource(LocalSource("fn"), "k", 0)
    assert src.name() == "L['k']"
    assert src.get_value({"fn": fn}, {}) == 4
    check = compile_guards(
        [src.make_guard(GuardBuilder.EQUALS_MATCH)], f_locals={"fn": fn}, arg_names=["fn"]
    )
    assert check(fn)
    fn.__closure__[0].cell_contents = 5  # type: ignore[index]
    assert not check(fn) and not check.reference(fn)
    assert [f.reason for f in check.explain(fn)] == ["L['k'] == 4 failed: got 5"]
    with pytest.raises(SourceError):
        ClosureCellSource(LocalSource("fn"), "k", -1)


class Meta(type):
    @property
    def __dict__(cls) -> Any:  # type: ignore[override]
        return {"lie": 1}


class WithMeta(metaclass=Meta):
    scale = 3


def test_type_dict_reads_the_real_namespace() -> None:
    """``dict(L['x'].__dict__)``: the class's own namespace even under a metaclass that lies
    about ``__dict__``; items of it read by key."""
    ns = TypeDictSource(L)
    assert ns.name() == "dict(L['x'].__dict__)"
    item = DictGetItemSource(ns, "scale")
    assert item.name() == "dict(L['x'].__dict__)['scale']"
    assert item.get_value({"x": WithMeta}, {}) == 3
    check = compile_guards(
        [item.make_guard(GuardBuilder.EQUALS_MATCH)], f_locals={"x": WithMeta}, arg_names=["x"]
    )
    assert check(WithMeta) and check.reference(WithMeta)
    WithMeta.scale = 4
    assert not check(WithMeta) and not check.reference(WithMeta)
    with pytest.raises(SourceError, match="literal key"):
        DictGetItemSource(ns, ConstDictKeySource(ns, 0))
