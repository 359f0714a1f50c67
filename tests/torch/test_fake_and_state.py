"""The torch integration: fake-mode detection, the invoke_subgraph cache, torch's ambient
states in GlobalContext."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")

from torch._higher_order_ops.invoke_subgraph import invoke_subgraph  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from jitguard import (  # noqa: E402
    GlobalContext,
    HopDispatchSetCache,
    InvokeSubgraphCache,
    TracingContext,
    WeakIdKeyDictionary,
    active_fake_mode,
    detect_fake_mode,
    global_states,
    tracing,
)

TORCH_STATES = {
    "grad_enabled",
    "autocast_enabled",
    "autocast_cpu_enabled",
    "autocast_gpu_dtype",
    "autocast_cpu_dtype",
    "autocast_cache_enabled",
}


@pytest.fixture
def grad_mode() -> Iterator[None]:
    """Restore torch's grad mode and CPU autocast dtype whatever the test does."""
    grad, dtype = torch.is_grad_enabled(), torch.get_autocast_dtype("cpu")
    try:
        yield
    finally:
        torch.set_grad_enabled(grad)
        torch.set_autocast_dtype("cpu", dtype)


# ---- detect_fake_mode / active_fake_mode -----------------------------------------------


def test_detect_fake_mode_finds_active_mode() -> None:
    """Inside an active FakeTensorMode, detect_fake_mode returns it."""
    mode = FakeTensorMode()
    with mode:
        assert detect_fake_mode() is mode
    assert detect_fake_mode() is None


def test_detect_fake_mode_from_fake_tensor_inputs() -> None:
    """Fake tensors among (nested) inputs give their mode; real tensors give None."""
    mode = FakeTensorMode()
    fake = mode.from_tensor(torch.ones(2))
    assert detect_fake_mode([1, {"a": (fake,)}]) is mode
    assert detect_fake_mode(fake) is mode
    assert detect_fake_mode([torch.ones(2), 3]) is None


def test_detect_fake_mode_through_tensor_subclass() -> None:
    """Fake tensors inside a traceable wrapper subclass are found."""
    two_tensor = pytest.importorskip("torch.testing._internal.two_tensor")
    mode = FakeTensorMode()
    with mode:
        t = two_tensor.TwoTensor(torch.ones(2), torch.ones(2))
    assert detect_fake_mode([t]) is mode


def test_detect_fake_mode_mismatching_inputs_raise() -> None:
    """Fake tensors of two different modes are an AssertionError naming both."""
    m1, m2 = FakeTensorMode(), FakeTensorMode()
    a, b = m1.from_tensor(torch.ones(1)), m2.from_tensor(torch.ones(1))
    with pytest.raises(AssertionError) as info:
        detect_fake_mode([a, b])
    text = str(info.value)
    assert "from fake tensor input 0 doesn't match mode" in text
    assert "from fake tensor input 1" in text
    assert "allocated at" in text


def test_detect_fake_mode_active_vs_input_mismatch_raises() -> None:
    """An active mode and an input from another mode are an AssertionError."""
    m1, m2 = FakeTensorMode(), FakeTensorMode()
    b = m2.from_tensor(torch.ones(1))
    with m1:
        with pytest.raises(AssertionError, match="active fake mode"):
            detect_fake_mode([b])


def test_detect_fake_mode_tracing_context_vs_input() -> None:
    """The tracing context's mode is used, and must agree with the inputs' mode."""
    m1, m2 = FakeTensorMode(), FakeTensorMode()
    with tracing(TracingContext(m1)):
        assert detect_fake_mode([m1.from_tensor(torch.ones(1))]) is m1
        assert detect_fake_mode() is m1
        with pytest.raises(AssertionError, match="tracing context"):
            detect_fake_mode([m2.from_tensor(torch.ones(1))])


def test_active_fake_mode() -> None:
    """active_fake_mode is the innermost active FakeTensorMode, or None."""
    assert active_fake_mode() is None
    outer, inner = FakeTensorMode(), FakeTensorMode()
    with outer:
        assert active_fake_mode() is outer
        with inner:
            assert active_fake_mode() is inner
        assert active_fake_mode() is outer
    assert active_fake_mode() is None


def test_tracing_cleans_up_fake_mode_shape_env() -> None:
    """Leaving tracing() with a real FakeTensorMode and ShapeEnv runs its cleanup."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    calls: list[int] = []
    env.cleanup = lambda: calls.append(1)  # type: ignore[method-assign]
    with tracing(TracingContext(FakeTensorMode(shape_env=env))):
        pass
    assert calls == [1]


# ---- hop caches ------------------------------------------------------------------------


def test_hop_dispatch_set_cache_knows_invoke_subgraph() -> None:
    """With torch, HopDispatchSetCache has an InvokeSubgraphCache for invoke_subgraph only."""
    cache = HopDispatchSetCache()
    sub = cache.get_cache(invoke_subgraph)
    assert isinstance(sub, InvokeSubgraphCache)
    assert list(cache.hop_cache_map) == [invoke_subgraph]
    assert cache.get_cache(torch.ops.higher_order.cond) is None
    assert HopDispatchSetCache().get_cache(invoke_subgraph) is not sub
    tc = TracingContext(None)
    assert isinstance(tc.hop_dispatch_set_cache.get_cache(invoke_subgraph), InvokeSubgraphCache)


# ---- global state ----------------------------------------------------------------------


def test_torch_states_registered() -> None:
    """torch registers the specification's six restorable states."""
    assert TORCH_STATES <= GlobalContext._supported_global_states
    assert TORCH_STATES <= {s.name for s in global_states.guarded()}
    with torch.no_grad():
        assert global_states.get("grad_enabled").read() is False
    assert global_states.get("autocast_cpu_dtype").read() == torch.get_autocast_dtype("cpu")


def test_global_context_round_trip_restores_grad_mode(grad_mode: None) -> None:
    """save, copy, flip grad mode, restore: grad mode is back to the saved value."""
    torch.set_grad_enabled(True)
    ctx = GlobalContext()
    ctx.save()
    assert ctx.global_state["grad_enabled"][1] is True
    snap = ctx.copy_graphstate()
    torch.set_grad_enabled(False)
    ctx.global_state["grad_enabled"] = (torch.set_grad_enabled, False)
    assert snap.global_state["grad_enabled"][1] is True, "the snapshot must be a copy"
    ctx.restore_graphstate(snap)
    assert torch.is_grad_enabled() is True


def test_global_context_restores_autocast_dtype(grad_mode: None) -> None:
    """Restoring puts back the CPU autocast dtype too."""
    before = torch.get_autocast_dtype("cpu")
    ctx = GlobalContext()
    ctx.save()
    snap = ctx.copy_graphstate()
    other = torch.float16 if before != torch.float16 else torch.bfloat16
    torch.set_autocast_dtype("cpu", other)
    ctx.restore_graphstate(snap)
    assert torch.get_autocast_dtype("cpu") == before


def test_global_context_refuses_partial_snapshot(grad_mode: None) -> None:
    """A snapshot without grad_enabled is refused and changes nothing."""
    ctx = GlobalContext()
    ctx.save()
    snap = ctx.copy_graphstate()
    del snap.global_state["grad_enabled"]
    torch.set_grad_enabled(False)
    with pytest.raises(AssertionError, match="Global state mismatch"):
        ctx.restore_graphstate(snap)
    assert torch.is_grad_enabled() is False


def test_tensor_to_context_with_tensors() -> None:
    """Tensors (whose == is elementwise) key TracingContext.tensor_to_context by identity."""
    tc = TracingContext(None)
    assert isinstance(tc.tensor_to_context, WeakIdKeyDictionary)
    a, b = torch.zeros(3), torch.zeros(3)
    tc.tensor_to_context[a] = "a"
    tc.tensor_to_context[b] = "b"
    assert tc.tensor_to_context[a] == "a" and tc.tensor_to_context[b] == "b"
    assert len(tc.tensor_to_context) == 2
