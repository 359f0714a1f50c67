"""Port of the leaf-guard scenarios of PyTorch's ``test/dynamo/test_guard_manager.py`` that
jitguard's public API expresses, under their upstream names. Upstream builds each C++ leaf
guard (``guards.TYPE_MATCH(root, ...)``) and calls it on values; here the same kind is made
on a source (``LocalSource("x").make_guard(GuardBuilder.TYPE_MATCH)``), compiled with
``compile_guards`` from a frame holding the value it was built for, and the check is called
on the same values, with ``explain`` for upstream's verbose text. Upstream's guard-manager
tree tests (accessors, managers, dict managers, guard-manager clones) test Dynamo's C++
data structures, which jitguard does not use, and are not ported.

Where jitguard's kind of that name is narrower: ``EQUALS_MATCH`` takes constants only, so a
list is checked by ``CONTAINER_EQUALS_MATCH`` and a type by ``ID_MATCH``."""

from __future__ import annotations

import functools
import traceback
import weakref
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard.torch as jgt  # noqa: E402
from jitguard import AttrSource, GuardBuilder, LocalSource, compile_guards  # noqa: E402


def _check(kind: str, built_for: Any, source: Any = None) -> Any:
    """The check of one guard of ``kind`` on ``L['x']`` (or ``source``), built from a frame
    where ``x`` is ``built_for``."""
    src = LocalSource("x") if source is None else source
    return compile_guards([src.make_guard(getattr(GuardBuilder, kind))],
                          f_locals={"x": built_for}, arg_names=["x"])


def test_guard_debug_info_user_stack() -> None:
    """A failure keeps the user stack of its guard (filename, line, name per frame)."""
    user_stack = traceback.StackSummary.from_list([
        traceback.FrameSummary("test.py", 10, "test_func", line="x = y + 1"),
        traceback.FrameSummary("main.py", 5, "main", line="test_func()"),
    ])
    guard = LocalSource("x").make_guard(GuardBuilder.EQUALS_MATCH)
    guard.user_stack = user_stack
    check = compile_guards([guard], f_locals={"x": 1}, arg_names=["x"])
    (failure,) = check.explain(2)
    assert failure.reason == "L['x'] == 1 failed: got 2"
    assert failure.user_stack is not None and len(failure.user_stack) == 2
    first = failure.user_stack[0]
    assert (first.filename, first.lineno, first.name) == ("test.py", 10, "test_func")
    assert check.explain(1) == []


def test_global_state_guard() -> None:
    """GLOBAL_STATE fails after the default dtype or determinism changes, naming the state,
    and passes again once it is back."""
    from jitguard import GlobalStateSource

    check = compile_guards([GlobalStateSource().make_guard(GuardBuilder.GLOBAL_STATE)],
                           f_locals={}, arg_names=[])
    assert check.fn()
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.double)
    try:
        assert not check.fn()
        assert "default_dtype" in str(check.explain()[0])
    finally:
        torch.set_default_dtype(old)
    assert check.fn() and check.explain() == []
    orig = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(not orig)
        assert not check.fn()
        assert "deterministic_algorithms" in str(check.explain()[0])
    finally:
        torch.use_deterministic_algorithms(orig)
    assert check.fn()


def test_global_state_reason() -> None:
    """Built with grad enabled, the check fails under no_grad and says grad_enabled."""
    from jitguard import GlobalStateSource

    with torch.enable_grad():
        check = compile_guards([GlobalStateSource().make_guard(GuardBuilder.GLOBAL_STATE)],
                               f_locals={}, arg_names=[])
    with torch.no_grad():
        assert check.fn() is False
        assert "grad_enabled" in str(check.explain()[0])


def test_type_guard() -> None:
    """TYPE_MATCH accepts exactly the type it was built for."""
    check = _check("TYPE_MATCH", 4)
    assert check.fn(5) and check.fn(4) and not check.fn("foo")
    check = _check("TYPE_MATCH", {"a": 1})
    assert check.fn({"a": 1}) and check.fn({}) and not check.fn(5) and not check.fn("foo")

    class Foo:
        def __init__(self, x: Any, y: Any) -> None:
            self.x, self.y = x, y

    foo = Foo(1, 2)
    check = _check("TYPE_MATCH", foo)
    assert check.fn(foo) and not check.fn({}) and not check.fn(5) and not check.fn("foo")


def test_id_guard() -> None:
    """ID_MATCH accepts only the object it was built for."""
    foo: Any = 4
    check = _check("ID_MATCH", foo)
    assert check.fn(foo) and not check.fn(5) and not check.fn("foo")
    foo = {"a": 1}
    check = _check("ID_MATCH", foo)
    assert check.fn(foo) and not check.fn({"a": 1}) and not check.fn({}) and not check.fn(5)


def test_equals_guard() -> None:
    """Equality with an int, a tuple, a list (CONTAINER_EQUALS_MATCH) and a type (ID_MATCH)."""
    check = _check("EQUALS_MATCH", 4)
    assert check.fn(4) and not check.fn(5) and not check.fn("foo")
    foo: Any = (1, 2, 3)
    check = _check("EQUALS_MATCH", foo)
    assert check.fn(foo) and check.fn((1, 2, 3)) and not check.fn((1, 2, 3, 4))
    assert not check.fn({})
    foo = [1, 2, 3]
    check = _check("CONTAINER_EQUALS_MATCH", foo)
    assert check.fn(foo) and check.fn([1, 2, 3]) and not check.fn([1, 2, 3, 4])
    check = _check("ID_MATCH", int)
    assert check.fn(int) and not check.fn(float)


def test_default_device_guard() -> None:
    """DEFAULT_DEVICE fails once torch's default device changes ("meta" here; upstream uses
    cuda)."""
    from jitguard import GlobalStateSource

    check = compile_guards([GlobalStateSource().make_guard(GuardBuilder.DEFAULT_DEVICE)],
                           f_locals={}, arg_names=[])
    assert check.fn()
    try:
        torch.set_default_device("meta")
        assert not check.fn()
    finally:
        torch.set_default_device(None)
    assert check.fn()


def test_length_check_guard() -> None:
    """LENGTH_CHECK accepts a sequence of the length it was built for."""
    foo = [1, 2, 3]
    check = _check("LENGTH_CHECK", foo)
    assert check.fn(foo) and not check.fn([])


def test_no_hasattr_guard() -> None:
    """NOT_HASATTR on ``x.foo`` accepts an object without ``foo`` and rejects one with it."""

    class Bar:
        def __init__(self) -> None:
            self.bar = 2

    class Foo:
        def __init__(self) -> None:
            self.foo = 2

    check = _check("NOT_HASATTR", Bar(), AttrSource(LocalSource("x"), "foo"))
    assert check.fn(Bar()) and not check.fn(Foo())


def test_tensor_aliasing_guard() -> None:
    """DUPLICATE_INPUT between x.x and x.y: built for one tensor twice, it rejects two
    different tensors."""
    a = torch.randn(3, 4)

    class Foo:
        def __init__(self, x: Any, y: Any) -> None:
            self.x, self.y = x, y

    x_src, y_src = AttrSource(LocalSource("f"), "x"), AttrSource(LocalSource("f"), "y")
    guard = x_src.make_guard(functools.partial(GuardBuilder.DUPLICATE_INPUT, source_b=y_src))
    check = compile_guards([guard], f_locals={"f": Foo(a, a)}, arg_names=["f"])
    assert check.fn(Foo(a, a))
    assert not check.fn(Foo(torch.randn(3, 4), torch.randn(3, 4)))


def test_dict_version_guard() -> None:
    """DICT_VERSION accepts the same dict unchanged only."""
    foo = {"a": 1, "b": 2}
    check = _check("DICT_VERSION", foo)
    assert check.fn(foo)
    assert not check.fn(dict(foo))
    foo["a"] = 2
    assert not check.fn(foo)
    assert not check.fn({"a": 1, "b": 2}) and not check.fn({})


def test_tensor_match_guard() -> None:
    """TENSOR_MATCH accepts a tensor like the one it was built for and rejects a transposed
    one, saying the stride differs."""
    x = torch.randn(4, 4)
    check = compile_guards([LocalSource("x").make_guard(jgt.TENSOR_MATCH)],
                           f_locals={"x": x}, arg_names=["x"])
    assert check.fn(x) and check.explain(x) == []
    assert check.fn(torch.randn(4, 4))
    y = torch.randn(4, 4)
    y.t_()
    assert not check.fn(y)
    assert "tensor 'L['x']' stride mismatch" in str(check.explain(y)[0])


def test_no_tensor_aliasing_guard() -> None:
    """NO_TENSOR_ALIASING over x, y, z: three distinct tensors pass; any two the same fail."""
    a = torch.randn(3, 4)
    guard = jgt.no_tensor_aliasing_guard([LocalSource(n) for n in ("x", "y", "z")])
    frame = {"x": torch.randn(3, 4), "y": torch.randn(3, 4), "z": torch.randn(3, 4)}
    check = compile_guards([guard], f_locals=frame, arg_names=["x", "y", "z"])
    assert check.fn(torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4))
    assert check.fn(torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4))
    assert not check.fn(a, a, a)
    assert not check.fn(a, torch.randn(3, 4), a)


def test_weakref_alive_guard() -> None:
    """NOT_NONE on a weak reference's target: true while it lives, false once it died."""
    x = torch.rand(3, 4)
    ref = weakref.ref(x)
    check = _check("NOT_NONE", ref())
    assert check.fn(ref())
    del x
    assert not check.fn(ref())

