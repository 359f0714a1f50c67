"""The kinds of compiler.attr_kinds: what passes, what fails, the exact failure text, the
generated check agreeing with the reference evaluator, and the batched C helpers agreeing
with their Python twins."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from _helpers import accepts as agree
from _helpers import check_of
from jitguard import (
    AttrSource,
    GetItemSource,
    GuardBuilder,
    GuardKindError,
    LocalSource,
    compile_guards,
)

L = LocalSource("x")


class Mod:
    def forward(self) -> int:
        return 1


def test_not_present_in_generic_dict() -> None:
    """An attribute set on the instance (shadowing the class's) fails, with Dynamo's text."""
    fn = functools.partial(GuardBuilder.NOT_PRESENT_IN_GENERIC_DICT, attrs=("forward", "__call__"))
    m = Mod()
    check = check_of(fn, m)
    assert agree(check, Mod())
    m.forward = lambda: 2  # type: ignore[method-assign]
    assert not agree(check, m)
    assert [f.reason for f in check.explain(m)] == [
        "not ___dict_contains('forward', L['x'].__dict__) failed: it is set on the instance"
    ]
    assert not agree(check, 3)  # no __dict__


def test_not_present_in_generic_dict_one_attr() -> None:
    """``attr=`` names one attribute; bad options are refused."""
    check = check_of(functools.partial(GuardBuilder.NOT_PRESENT_IN_GENERIC_DICT, attr="forward"), Mod())
    assert agree(check, Mod())
    with pytest.raises(GuardKindError):
        check_of(GuardBuilder.NOT_PRESENT_IN_GENERIC_DICT, Mod())


def _class_attrs_guard(*attrs: str) -> Any:
    return functools.partial(GuardBuilder.CLASS_ATTRS_MATCH, attrs=attrs)


def test_class_attrs_match_method_replaced() -> None:
    """CLASS_ATTRS_MATCH fails when the class's method is replaced, naming where the
    lookup finds it now; a same-class instance passes; the old method dying invalidates."""

    class A:
        def f(self) -> int:
            return 1

    check = check_of(_class_attrs_guard("f"), A())
    assert agree(check, A())
    old = A.f
    A.f = lambda self: 2  # type: ignore[method-assign]
    assert not agree(check, A())
    (reason,) = [f.reason for f in check.explain(A())]
    assert reason == (
        "type(L['x']).__mro__[0].__dict__['f'] is <function "
        "test_class_attrs_match_method_replaced.<locals>.A.f> (and no class before it has "
        "it) failed: the lookup of 'f' changed (it finds <function object> in "
        "test_class_attrs_match_method_replaced.<locals>.A)"
    )
    A.f = old  # type: ignore[method-assign]
    assert agree(check, A())
    del old
    A.f = lambda self: 3  # type: ignore[method-assign]
    assert not check.valid


def test_class_attrs_match_subclass_shadows_base() -> None:
    """A class between the instance's type and the one that held the name gaining it fails;
    a classmethod replaced on the base fails; an attribute no class had appearing fails."""

    class Base:
        k = 2

        @classmethod
        def c(cls) -> int:
            return 1

    class Mid(Base):
        pass

    class Sub(Mid):
        pass

    check = check_of(_class_attrs_guard("k", "c", "absent"), Sub())
    assert agree(check, Sub())
    assert check.guards[0].code_list[0].startswith(
        "type(L['x']).__mro__[2].__dict__['k'] is 2 (and no class before it has it)")
    Mid.k = 2  # type: ignore[attr-defined]  # the same value, now found earlier
    assert not agree(check, Sub())
    del Mid.k  # type: ignore[attr-defined]
    assert agree(check, Sub())
    Base.c = classmethod(lambda cls: 9)  # type: ignore[assignment,method-assign]
    assert not agree(check, Sub())
    check = check_of(_class_attrs_guard("absent"), Sub())
    assert agree(check, Sub())
    Base.absent = 1  # type: ignore[attr-defined]
    assert not agree(check, Sub())
    assert not agree(check, Mid())  # another type


class _Base:
    k = 2


class _Other:
    k = 5


class _Sub(_Base):
    pass


def test_class_attrs_match_module_level_class() -> None:
    """For a class held strongly (module level) the namespaces are bound: a shadowing
    attribute and a reassigned ``__bases__`` both fail, and the generated check agrees
    with the reference."""
    check = check_of(_class_attrs_guard("k"), _Sub())
    assert "___mro_" in check.source  # the bound form
    assert agree(check, _Sub())
    _Sub.k = 2  # type: ignore[attr-defined]
    try:
        assert not agree(check, _Sub())
    finally:
        del _Sub.k  # type: ignore[attr-defined]
    assert agree(check, _Sub())
    _Sub.__bases__ = (_Other,)
    try:
        assert not agree(check, _Sub())
    finally:
        _Sub.__bases__ = (_Base,)
    assert agree(check, _Sub())


def test_class_attrs_match_needs_names() -> None:
    """CLASS_ATTRS_MATCH takes attrs=, a tuple of str."""
    with pytest.raises(GuardKindError, match="attrs="):
        check_of(GuardBuilder.CLASS_ATTRS_MATCH, Mod())
    with pytest.raises(GuardKindError, match="attrs="):
        check_of(functools.partial(GuardBuilder.CLASS_ATTRS_MATCH, attrs="forward"), Mod())


def test_empty_hooks_dict() -> None:
    """EMPTY_NN_MODULE_HOOKS_DICT: the dict stays empty; building on a non-empty one fails."""
    check = check_of(GuardBuilder.EMPTY_NN_MODULE_HOOKS_DICT, {})
    assert agree(check, {})
    assert not agree(check, {1: "hook"})
    assert [f.reason for f in check.explain({1: "hook"})] == [
        "not L['x'] failed: a hook was registered (1 entries)"
    ]
    with pytest.raises(GuardKindError, match="not empty"):
        check_of(GuardBuilder.EMPTY_NN_MODULE_HOOKS_DICT, {1: 2})


class Hooked:
    def __init__(self) -> None:
        self._forward_hooks: dict[int, Any] = {}
        self._backward_hooks: dict[int, Any] = {}


def _hooks_check(objs: list[Hooked], also_type: bool = False) -> Any:
    guards = []
    for i in range(len(objs)):
        for attr in ("_forward_hooks", "_backward_hooks"):
            src = AttrSource(GetItemSource(L, i), attr)
            guards.append(src.make_guard(GuardBuilder.EMPTY_NN_MODULE_HOOKS_DICT))
            if also_type:
                guards.append(src.make_guard(GuardBuilder.TYPE_MATCH))
    return compile_guards(guards, f_locals={"x": objs}, arg_names=["x"])


def test_empty_hooks_dicts_are_one_batched_test() -> None:
    """[Note: Batched leaves]: every hooks dict of a check is one test in the generated code,
    read in place; a hook on one fails the check and explain names exactly that dict."""
    objs = [Hooked(), Hooked(), Hooked()]
    check = _hooks_check(objs)
    tests = [line for line in check.source.splitlines() if "EMPTY_NN_MODULE_HOOKS_DICT" in line]
    assert len(tests) == 1 and "on 6 values" in tests[0]
    assert len(check.leaves) == 6  # the guards are still one leaf each
    assert agree(check, objs)
    objs[1]._backward_hooks[7] = print
    assert not agree(check, objs)
    (failure,) = check.explain(objs)
    assert failure.kind == "EMPTY_NN_MODULE_HOOKS_DICT"
    assert failure.source_names == ("L['x'][1]._backward_hooks",)
    assert failure.reason == "not L['x'][1]._backward_hooks failed: a hook was registered (1 entries)"


def test_batched_hooks_dict_read_by_another_guard_is_read_once() -> None:
    """A hooks dict another guard also reads is held in a variable (read once), not read
    again inside the batched test."""
    objs = [Hooked(), Hooked()]
    check = _hooks_check(objs, also_type=True)
    assert check.source.count("._forward_hooks  #") == 2  # one variable per dict
    (batch,) = [ln for ln in check.source.splitlines() if "EMPTY_NN_MODULE_HOOKS_DICT" in ln]
    assert "._forward_hooks" not in batch.split("#")[0]
    assert agree(check, objs)
    objs[0]._forward_hooks = {1: 2}  # type: ignore[assignment]
    assert not agree(check, objs)
    assert [f.source_names for f in check.explain(objs)] == [("L['x'][0]._forward_hooks",)]


def _helpers(impl: str, name: str) -> Any:
    from jitguard._src.compiler import bulk

    if impl == "c":
        return getattr(pytest.importorskip("jitguard._src._speedups.ext"), name)
    return getattr(bulk, name + "_py")


class _Plain:
    def __init__(self) -> None:
        self.h: dict[int, Any] = {}


class _WithGetattr(_Plain):
    def __getattr__(self, name: str) -> Any:
        return {1: 2} if name == "gone" else {}


class _Property:
    h = property(lambda self: {1: 2})  # a data descriptor: wins over the instance dict

    def __init__(self) -> None:
        self.__dict__["h"] = {}


class _Getattribute(_Plain):
    def __getattribute__(self, name: str) -> Any:
        return {1: 2} if name == "h" else object.__getattribute__(self, name)


class _Slots:
    __slots__ = ("h",)

    def __init__(self) -> None:
        self.h: dict[int, Any] = {}


class _DictSub(dict):  # type: ignore[type-arg]
    def __getitem__(self, key: Any) -> Any:
        return {1: 2}

    def __contains__(self, key: Any) -> bool:
        return key == "claimed"


class _DictProperty(_Plain):
    __dict__ = property(lambda self: {"forward": 1})  # type: ignore[assignment]


@pytest.mark.parametrize("impl", ["c", "python"])
def test_attrs_falsy_reads_as_getattr(impl: str) -> None:
    """The batched hooks dicts' helper reads each attribute as ``getattr`` does, in C and in
    Python alike: a class property or ``__getattribute__`` of that name wins over the instance
    dict, ``__getattr__`` serves a missing name, a slot is read, a dict subclass as instance
    dict is read as the interpreter reads it (not through its ``__getitem__``); a failed read
    raises, a value that is true is False."""
    fn = _helpers(impl, "attrs_falsy")
    plain = _Plain()
    assert fn((), ) and fn(("h", "h"), plain, _WithGetattr())
    assert not fn(("h", "gone"), plain, _WithGetattr())  # __getattr__ gives a true value
    assert not fn(("h",), _Property()) and not fn(("h",), _Getattribute())
    assert fn(("h",), _Slots())
    odd = _Plain()
    odd.__dict__ = _DictSub(h={})
    assert fn(("h",), odd)
    odd.h = {3: 4}
    assert not fn(("h",), odd)
    with pytest.raises(AttributeError):
        fn(("missing",), plain)
    with pytest.raises(TypeError):
        fn(("h", "h"), plain)  # a name per value
    _Plain.h = {5: 6}  # type: ignore[attr-defined]  # a class attribute: the instance's wins
    try:
        assert fn(("h",), plain)
    finally:
        del _Plain.h  # type: ignore[attr-defined]


@pytest.mark.parametrize("impl", ["c", "python"])
def test_attrs_falsy_sees_a_getattribute_added_during_the_reads(impl: str) -> None:
    """A value's truth test that gives its class a ``__getattribute__`` (program code run in
    the middle of the batch): the next read of an instance of that class goes through it."""
    fn = _helpers(impl, "attrs_falsy")

    class Obj:
        def __init__(self, h: Any) -> None:
            self.h = h

    class Installs(dict):  # type: ignore[type-arg]
        def __len__(self) -> int:
            Obj.__getattribute__ = lambda self, name: {1: 2}  # type: ignore[method-assign,assignment,misc]
            return 0

    assert not fn(("h", "h"), Obj(Installs()), Obj({}))


@pytest.mark.parametrize("impl", ["c", "python"])
def test_attrs_falsy_sees_a_getattribute_added_by_a_dict_key(impl: str) -> None:
    """A key of an instance dict whose ``__eq__`` (run by the lookup of a colliding name)
    gives the class a ``__getattribute__``: the next read of an instance of that class goes
    through it."""
    fn = _helpers(impl, "attrs_falsy")

    class Obj:
        pass

    class Key:
        armed = False

        def __hash__(self) -> int:
            return hash("h")

        def __eq__(self, other: object) -> bool:
            if Key.armed:
                Obj.__getattribute__ = lambda self, name: {1: 2}  # type: ignore[method-assign,assignment,misc]
            return False

    first, second = Obj(), Obj()
    first.__dict__[Key()] = 0  # probed before "h", whose hash it shares
    first.h = {}  # type: ignore[attr-defined]
    second.h = {}  # type: ignore[attr-defined]
    Key.armed = True
    assert not fn(("h", "h"), first, second)
    assert "__getattribute__" in Obj.__dict__  # the key's __eq__ did run


@pytest.mark.parametrize("impl", ["c", "python"])
def test_dicts_exclude_reads_the_instance_dict(impl: str) -> None:
    """NOT_PRESENT_IN_GENERIC_DICT's batch helper, in C and in Python alike: the instance
    dict as ``object.__getattribute__(v, '__dict__')`` gives it (a class ``__dict__``
    property's value; not a class ``__getattribute__``), each name tested with ``in`` (a
    dict subclass's ``__contains__``); a value with no instance dict raises."""
    fn = _helpers(impl, "dicts_exclude")
    plain, forward = _Plain(), _Plain()
    forward.forward = 1  # type: ignore[attr-defined]
    assert fn(((), ("forward", "x")), plain, plain)
    assert not fn((("forward",), ("forward",)), plain, forward)
    assert not fn((("forward",),), _DictProperty())
    assert fn((("forward",),), _Getattribute())
    odd = _Plain()
    odd.__dict__ = _DictSub()
    assert fn((("forward",),), odd) and not fn((("claimed",),), odd)
    with pytest.raises(AttributeError):
        fn((("forward",),), _Slots())


def test_not_present_in_generic_dict_is_batched() -> None:
    """[Note: Batched leaves]: NOT_PRESENT_IN_GENERIC_DICT on several objects is one test;
    an instance attribute set on one fails it and explain names that object."""
    objs = [Mod(), Mod(), Mod()]
    fn = functools.partial(GuardBuilder.NOT_PRESENT_IN_GENERIC_DICT, attr="forward")
    guards = [GetItemSource(L, i).make_guard(fn) for i in range(3)]
    check = compile_guards(guards, f_locals={"x": objs}, arg_names=["x"])
    tests = [ln for ln in check.source.splitlines() if "NOT_PRESENT_IN_GENERIC_DICT" in ln]
    assert len(tests) == 1 and "on 3 values" in tests[0]
    assert agree(check, objs)
    objs[2].forward = lambda: 2  # type: ignore[method-assign]
    assert not agree(check, objs)
    assert [f.source_names for f in check.explain(objs)] == [("L['x'][2]",)]
