"""The call path of a compiled module ([Note: Compiling a module], [Note: Compiling a
module's call]): a module with hooks or an instance ``forward`` is compiled as the module
call itself, and every change to them after compiling gives eager's result."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch._dynamo.testing import CompileCounter  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _setup(fullgraph: bool = False) -> tuple[Any, Any, CompileCounter, Any]:
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 3)
    cnt = CompileCounter()
    return m, jgt.compile(m, backend=cnt, fullgraph=fullgraph), cnt, torch.randn(2, 3)


def _same(cf: Any, m: Any, x: Any) -> None:
    torch.testing.assert_close(cf(x), m(x))


@pytest.mark.parametrize("fullgraph", [False, True], ids=["graph_breaks_ok", "fullgraph"])
def test_forward_hook_is_compiled(fullgraph: bool) -> None:
    """A module with a forward hook is captured with the hook, and a hit reuses it."""
    m, cf, cnt, x = _setup(fullgraph)
    m.register_forward_hook(lambda mod, inp, out: out * 2)
    _same(cf, m, x)
    _same(cf, m, x)
    assert cnt.frame_count == 1


def test_hook_added_after_compile_then_removed() -> None:
    """Adding a hook after compiling recompiles; removing it goes back to forward's entry."""
    m, cf, cnt, x = _setup()
    _same(cf, m, x)
    handle = m.register_forward_hook(lambda mod, inp, out: out + 10)
    _same(cf, m, x)
    assert cnt.frame_count == 2
    handle.remove()
    _same(cf, m, x)
    assert cnt.frame_count == 2


def test_second_hook_and_replaced_hook_recompile() -> None:
    """A second hook, or one replaced by a hook of other code, fails the entry's guards."""
    m, cf, cnt, x = _setup()
    first = m.register_forward_hook(lambda mod, inp, out: out * 2)
    _same(cf, m, x)
    second = m.register_forward_hook(lambda mod, inp, out: out - 1)
    _same(cf, m, x)
    first.remove()
    _same(cf, m, x)
    second.remove()
    m.register_forward_hook(lambda mod, inp, out: out * 3)
    _same(cf, m, x)
    assert cnt.frame_count == 4


def test_hook_of_same_code_other_closure() -> None:
    """A hook replaced by one of the same code closing over another value gives eager's."""
    m, cf, _, x = _setup()

    def adds(k: float) -> Any:
        return lambda mod, inp, out: out + k

    handle = m.register_forward_hook(adds(1.0))
    _same(cf, m, x)
    handle.remove()
    m.register_forward_hook(adds(2.0))
    _same(cf, m, x)


def test_pre_hook_changing_the_input() -> None:
    """A forward pre-hook that rewrites the input, added after compiling."""
    m, cf, _, x = _setup()
    _same(cf, m, x)
    m.register_forward_pre_hook(lambda mod, inp: (inp[0] * 0 + 1,))
    _same(cf, m, x)


def test_instance_forward_set_replaced_and_deleted() -> None:
    """``m.forward = ...`` is compiled; replacing or deleting it gives eager's result."""
    m, cf, cnt, x = _setup()
    _same(cf, m, x)
    m.forward = lambda t: t * 7  # type: ignore[method-assign]
    _same(cf, m, x)
    m.forward = lambda t: t * 9  # type: ignore[method-assign]
    _same(cf, m, x)
    del m.forward
    _same(cf, m, x)
    assert cnt.frame_count == 3


def test_global_module_hook() -> None:
    """A global forward hook registered after compiling applies; removed, it does not."""
    m, cf, _, x = _setup()
    _same(cf, m, x)
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda mod, inp, out: out - 5)
    try:
        _same(cf, m, x)
    finally:
        handle.remove()
    _same(cf, m, x)


def test_hooked_call_has_its_own_cache() -> None:
    """The module call's entries are apart from forward's: each counts its own."""
    m, cf, _, x = _setup()
    cf(x)
    m.register_forward_hook(lambda mod, inp, out: out)
    cf(x)
    assert jitguard.cache_of(cf).stats().entries == 1


def _breaking_hook(seen: list[int]) -> Any:
    def hook(mod: Any, inp: Any, out: Any) -> Any:
        torch._dynamo.graph_break()
        seen.append(1)
        return out * 2

    return hook


def test_hook_dynamo_cannot_trace_runs_under_the_frame_path() -> None:
    """A hook with a graph break: torch's frame path runs the call, the hook once per call."""
    m, cf, _, x = _setup()
    seen: list[int] = []
    m.register_forward_hook(_breaking_hook(seen))
    for i in range(1, 3):
        want = m(x)
        torch.testing.assert_close(cf(x), want)
        assert len(seen) == 2 * i


def test_hook_dynamo_cannot_trace_raises_with_fullgraph() -> None:
    """With fullgraph=True, a hook with a graph break raises CaptureError, as in torch."""
    m, cf, _, x = _setup(fullgraph=True)
    m.register_forward_hook(_breaking_hook([]))
    with pytest.raises(jitguard.CaptureError, match="graph_break"):
        cf(x)


def _times_three(self: Any, x: Any) -> Any:
    return x * 3


def test_forward_code_replaced_under_hooks() -> None:
    """With a hook, replacing ``forward.__code__`` after compiling gives eager's result (the
    module call's cache watches forward's code, [Note: A replaced __code__])."""

    class Doubles(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x * 2

    m = Doubles()
    m.register_forward_hook(lambda mod, inp, out: out + 1)
    cf = jgt.compile(m, backend=CompileCounter())
    x = torch.ones(2)
    _same(cf, m, x)
    Doubles.forward.__code__ = _times_three.__code__
    _same(cf, m, x)
    _same(cf, m, x)


def test_replaced_class_forward_code_replaced_under_hooks() -> None:
    """With a hook, a class ``forward`` replaced after compiling and then its own
    ``__code__`` replaced gives eager's result at each step."""

    class Doubles(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x * 2

    def fives(self: Any, x: Any) -> Any:
        return x * 5

    m = Doubles()
    m.register_forward_hook(lambda mod, inp, out: out + 1)
    cf = jgt.compile(m, backend=CompileCounter())
    x = torch.ones(2)
    _same(cf, m, x)
    Doubles.forward = fives  # type: ignore[method-assign]
    _same(cf, m, x)
    fives.__code__ = _times_three.__code__
    _same(cf, m, x)


def test_capture_info_values_have_a_repr() -> None:
    """capture_info's values print their compile id and guard layer, not an object address."""
    import jitguard.torch as jgt

    cf = jgt.compile(lambda x: x + 1)
    cf(torch.ones(2))
    (info,) = jgt.capture_info(cf).values()
    text = repr(info)
    assert text.startswith(f"<EntryInfo {info.compile_id} guards: jitguard"), text
    assert " at 0x" not in text
