"""TENSORS_MATCH: many tensors checked in one call (jitguard's native checker, or torch's
C++ checker), with TENSOR_MATCH's meaning (dispatch_keys="torch") and texts."""

from __future__ import annotations

import functools
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import jitguard.torch as jgt  # noqa: E402
from jitguard import LocalSource, compile_guards  # noqa: E402
from jitguard._src.torch import batched, native_checks  # noqa: E402

NAMES = ["a", "b", "c"]


def batch_check(*values: Any) -> Any:
    names = NAMES[: len(values)]
    first, *others = (LocalSource(n) for n in names)
    guard = first.make_guard(functools.partial(jgt.TENSORS_MATCH, others=tuple(others)))
    return compile_guards([guard], f_locals=dict(zip(names, values, strict=True)), arg_names=names)


def test_one_call_checks_all() -> None:
    """The generated check is one call of the C++ checker over every variable."""
    c = batch_check(torch.randn(2, 3), torch.randn(3), torch.randn(4, 4).requires_grad_())
    line = next(ln for ln in c.source.splitlines() if "TENSORS_MATCH" in ln)
    assert "___tensor_guards" in line and line.count("(l_a, l_b, l_c)") == 1
    assert c(torch.zeros(2, 3), torch.zeros(3), torch.zeros(4, 4).requires_grad_())


def test_failure_text_is_the_failing_tensors() -> None:
    """A mismatch reports the failing tensor with TENSOR_MATCH's text."""
    c = batch_check(torch.randn(2, 3), torch.randn(3))
    bad = torch.randn(3).double()
    assert not c(torch.randn(2, 3), bad) and c.reference(torch.randn(2, 3), bad) is False
    assert c.explain(torch.randn(2, 3), bad)[0].reason == (
        "tensor 'L['b']' dtype mismatch. expected Float, actual Double"
    )


def test_thread_local_keys_count_as_torch_does() -> None:
    """Under autocast (a thread-local key change) both the C++ check and the reference fail."""
    x = torch.randn(3)
    c = batch_check(x, torch.randn(2))
    with torch.autocast("cpu"):
        assert c(x, torch.randn(2)) is False and c.reference(x, torch.randn(2)) is False
        assert "dispatch key set mismatch" in c.explain(x, torch.randn(2))[0].reason
    assert c(x, torch.randn(2))


def test_fallback_without_the_cpp_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without torch's checker the same guard evaluates in Python, with the same verdicts."""
    monkeypatch.setattr(batched, "_TensorGuards", None)
    c = batch_check(torch.randn(2), torch.randn(2))
    assert "___tensors_match" in c.source
    assert c(torch.randn(2), torch.randn(2)) and not c(torch.randn(2), torch.randn(3))


def counting_builds(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The TensorGuards built from now on, in order."""
    built: list[Any] = []
    real = batched._TensorGuards

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(batched, "_TensorGuards", counting)
    return built


def large_batch() -> tuple[Any, list[Any]]:
    n = batched.PACKED_MIN
    names = [f"t{i}" for i in range(n)]
    values = [torch.randn(i + 1) for i in range(n)]
    first, *others = (LocalSource(name) for name in names)
    guard = first.make_guard(functools.partial(jgt.TENSORS_MATCH, others=tuple(others)))
    c = compile_guards([guard], f_locals=dict(zip(names, values, strict=True)), arg_names=names)
    return c, values


def test_a_large_batchs_checker_is_built_in_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """[Note: A packed tensor checker]: without the native checker, a batch of at least
    PACKED_MIN tensors builds torch's checker PACKING_PASSES times and its check calls the
    last one built (whose verdicts are one build's); a smaller batch builds it once."""
    monkeypatch.setattr(native_checks, "module", None)
    built = counting_builds(monkeypatch)
    c, values = large_batch()
    assert len(built) == batched.PACKING_PASSES > 1
    assert c(*values) and not c(*values[:-1], torch.randn(len(values) + 1))
    used = [v.__self__ for v in c.fn.__globals__.values() if getattr(v, "__name__", "") == "check"]
    assert len(used) == 1 and used[0] is built[-1]
    built.clear()
    batch_check(torch.randn(2), torch.randn(3))
    assert len(built) == 1


@pytest.mark.skipif(not native_checks.enabled(), reason="the native tensor checker is off")
def test_the_native_checker_falls_back_on_one_torch_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the native checker on, a large batch builds torch's checker once, as the native
    one's fallback, and the check calls the native one."""
    built = counting_builds(monkeypatch)
    c, values = large_batch()
    assert len(built) == 1
    used = [v for v in c.fn.__globals__.values() if isinstance(v, native_checks.module.Checker)]
    assert len(used) == 1 and used[0].fallback == built[0].check
    assert c(*values) and not c(*values[:-1], torch.randn(len(values) + 1))
    assert used[0].counts()[0] >= 2


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
def test_non_strided_tensors_are_refused() -> None:
    """A sparse tensor cannot be batched."""
    s = torch.sparse_coo_tensor([[0]], [1.0], (2,))
    with pytest.raises(Exception, match="cannot be batched"):
        batch_check(torch.randn(2), s)


SHAPES = st.lists(st.integers(0, 3), min_size=0, max_size=3)


@settings(max_examples=50, deadline=None)
@given(shapes=st.lists(SHAPES, min_size=2, max_size=3), probes=st.lists(SHAPES, min_size=2, max_size=3),
       views=st.lists(st.sampled_from(["plain", "t", "half", "grad", "param"]), min_size=3, max_size=3))
def test_generated_agrees_with_reference(shapes: list[Any], probes: list[Any], views: list[str]) -> None:
    """On random tensors, the C++ checker and the Python reference meaning agree."""
    build = [torch.zeros(s) for s in shapes]
    c = batch_check(*build)
    n = len(build)
    values = []
    for s, view in zip((probes + shapes)[:n], views, strict=False):
        t = torch.zeros(s)
        if view == "t" and t.dim() >= 2:
            t = t.transpose(0, 1)
        elif view == "half":
            t = t.half()
        elif view == "grad":
            t = t.requires_grad_()
        elif view == "param":
            t = torch.nn.Parameter(t)
        values.append(t)
    assert c(*values) == c.reference(*values)
    assert c(*build) and c.reference(*build)


def test_two_sources_holding_one_tensor() -> None:
    """The C++ checker rejects a tensor passed twice; the reference agrees and the reason
    names the two sources. A batch built over one tensor twice is refused."""
    from jitguard import GuardKindError

    a, b = torch.randn(3), torch.randn(3)
    c = batch_check(a, b)
    assert c(a, b) and c.reference(a, b)
    assert c(a, a) is False and c.reference(a, a) is False
    assert c.explain(a, a)[0].reason == (
        "TENSOR_MATCH on 2 tensors: L['a'], L['b'] failed: L['a'] is the same tensor as L['b']"
    )
    with pytest.raises(GuardKindError, match=r"L\['a'\] and L\['b'\] hold the same tensor"):
        batch_check(a, a)
