"""The torch kinds of dynamo_kinds: what passes, what fails, the exact failure text, and
the generated check agreeing with the reference evaluator."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard.torch  # noqa: E402,F401  (registers the torch kinds)
from jitguard import (  # noqa: E402
    GetItemSource,
    GlobalStateSource,
    GuardBuilder,
    LocalSource,
    compile_guards,
)

pytestmark = pytest.mark.usefixtures("restore_grad_mode")

L = LocalSource("x")


def check_of(kind: str, value: Any = None, source: Any = L) -> Any:
    return compile_guards(
        [source.make_guard(getattr(GuardBuilder, kind))], f_locals={"x": value}, arg_names=["x"]
    )


def agree(check: Any, value: Any = None) -> bool:
    got = check(value)
    assert got == check.reference(value)
    return bool(got)


def reasons(check: Any, value: Any = None) -> list[str]:
    return [f.reason for f in check.explain(value)]


def test_dimension_marking_unmarked() -> None:
    """An unmarked tensor must stay unmarked; other instance attributes are fine."""
    check = check_of("DIMENSION_DYNAMIC_MARKING", torch.ones(3))
    y = torch.ones(3)
    y.note = "x"
    assert agree(check, torch.ones(3)) and agree(check, y)
    z = torch.ones(3)
    torch._dynamo.mark_static(z, 0)
    assert not agree(check, z)
    assert reasons(check, z) == [
        "hasattr(L['x'], '_dynamo_static_indices') == False failed: it is set to "
        "<set object> (marked after compiling)"
    ]


def test_dimension_marking_marked_subset() -> None:
    """A marked tensor: a subset of the marking passes, a new dim or no marking at all too
    when absent is allowed, a superset fails."""
    x = torch.ones(3, 4)
    torch._dynamo.mark_dynamic(x, 0)
    check = check_of("DIMENSION_DYNAMIC_MARKING", x)
    assert "issubset({0})" in check.leaves[0].code()
    y = torch.ones(3, 4)
    torch._dynamo.mark_dynamic(y, 0)
    assert agree(check, y) and agree(check, torch.ones(3, 4))
    torch._dynamo.mark_dynamic(y, 1)
    assert not agree(check, y)
    assert reasons(check, y) == [
        "getattr(L['x'], '_dynamo_dynamic_indices').issubset([0]) failed: got [0, 1]"
    ]


def test_dict_version() -> None:
    """A write to the dict after building fails, even when the old value is put back."""
    d = {"a": 1}
    check = check_of("DICT_VERSION", d)
    assert agree(check, d)
    d["a"] = 2
    d["a"] = 1
    assert not agree(check, d)
    assert reasons(check, d)[0].endswith("failed: the dict was written to since compiling")
    assert not agree(check, [1])


def test_dispatch_key_set_match() -> None:
    """A DispatchKeySet value compared by its raw representation."""
    keys = torch._C._dispatch_keys(torch.ones(1))
    check = check_of("DISPATCH_KEY_SET_MATCH", keys)
    assert agree(check, torch._C._dispatch_keys(torch.ones(2)))
    other = torch._C._dispatch_keys(torch.ones(1, requires_grad=True)._neg_view())
    assert not agree(check, other)
    assert reasons(check, other)[0].startswith(f"L['x'].raw_repr() == {keys}.raw_repr() failed: got")


def test_dual_level() -> None:
    """The forward-AD level must be the build-time one."""
    check = check_of("DUAL_LEVEL", source=GlobalStateSource())
    assert agree(check)
    with torch.autograd.forward_ad.dual_level():
        assert not agree(check)
        assert reasons(check) == [
            "torch.autograd.forward_ad._current_level == -1 failed: got 0"
        ]


def test_functorch_stack_match() -> None:
    """Built outside any transform, the check fails inside vmap."""
    check = check_of("FUNCTORCH_STACK_MATCH", source=GlobalStateSource())
    assert agree(check)
    seen = []

    def body(t: Any) -> Any:
        seen.append((check(None), check.reference(None), reasons(check)))
        return t

    torch.vmap(body)(torch.ones(2, 2))
    assert seen[0][:2] == (False, False)
    assert seen[0][2][0].startswith("torch._functorch.pyfunctorch.compare_functorch_state([]) failed")


def test_autograd_saved_tensors_hooks() -> None:
    """Built with no hooks, the check fails under inlineable saved-tensors hooks."""
    check = check_of("AUTOGRAD_SAVED_TENSORS_HOOKS", source=GlobalStateSource())
    assert agree(check)

    def pack(t: Any) -> Any:
        return t

    def unpack(t: Any) -> Any:
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        from jitguard._src.torch import adapter_sources

        inlined = adapter_sources.saved_tensors_hooks_ids() is not None
        assert agree(check) is not inlined
        if inlined:
            assert reasons(check)[0].startswith(
                "torch._functorch.aot_autograd.utils.top_saved_tensors_hooks ids == None failed"
            )


def test_default_device() -> None:
    """set_default_device after building fails, naming the device."""
    check = check_of("DEFAULT_DEVICE", source=GlobalStateSource())
    assert agree(check)
    torch.set_default_device("cpu")
    try:
        assert not agree(check)
        assert reasons(check) == [
            "utils_device.CURRENT_DEVICE == None failed: got device(type='cpu')"
        ]
    finally:
        torch.set_default_device(None)
    assert agree(check)


def _markings_check(tensors: list[Any]) -> Any:
    guards = [GetItemSource(L, i).make_guard(GuardBuilder.DIMENSION_DYNAMIC_MARKING)
              for i in range(len(tensors))]
    return compile_guards(guards, f_locals={"x": tensors}, arg_names=["x"])


def test_dimension_markings_are_one_batched_test() -> None:
    """[Note: Batched leaves]: the markings of every tensor are one test; a marking that
    the entry allows still passes (the full test runs), a new one fails and explain names
    exactly that tensor."""
    allowed = torch.ones(3, 4)
    torch._dynamo.mark_dynamic(allowed, 0)
    ts = [torch.ones(3), allowed, torch.ones(2)]
    check = _markings_check(ts)
    tests = [ln for ln in check.source.splitlines() if "DIMENSION_DYNAMIC_MARKING" in ln]
    assert len(tests) == 1 and "on 3 values" in tests[0]
    assert len(check.leaves) == 3
    again = torch.ones(3, 4)
    torch._dynamo.mark_dynamic(again, 0)
    assert agree(check, [torch.ones(3), again, torch.ones(2)])
    assert agree(check, [torch.ones(3), torch.ones(3, 4), torch.ones(2)])
    late = torch.ones(2)
    torch._dynamo.mark_static(late, 0)
    bad = [torch.ones(3), again, late]
    assert not agree(check, bad)
    (failure,) = check.explain(bad)
    assert failure.source_names == ("L['x'][2]",)
    assert failure.reason.startswith("hasattr(L['x'][2], '_dynamo_static_indices') == False failed")


@pytest.mark.parametrize("impl", ["c", "python"])
def test_dicts_lack(impl: str) -> None:
    """The batched markings' common case, in C and in Python alike: no instance dict holds
    any of the names (an unrelated attribute is fine); one that does, or a value with no
    instance dict, is False."""
    from jitguard._src.compiler import bulk

    if impl == "c":
        fn = pytest.importorskip("jitguard._src._speedups.ext").dicts_lack
    else:
        fn = bulk.dicts_lack_py
    names = ("_dynamo_dynamic_indices", "_dynamo_static_indices")
    plain, noted, marked = torch.ones(2), torch.ones(2), torch.ones(2, 2)
    noted.note = 1
    torch._dynamo.mark_dynamic(marked, 1)
    param = torch.nn.Parameter(torch.ones(2))
    assert fn(names) and fn(names, plain, noted, param)
    assert not fn(names, plain, marked)
    assert not fn(names, plain, 3)  # an int has no instance dict
    if impl == "c":
        with pytest.raises(TypeError):
            fn(["_dynamo_dynamic_indices"], plain)  # the names must be a tuple
