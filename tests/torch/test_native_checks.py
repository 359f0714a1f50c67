"""The native tensor checker ([Note: A native tensor checker]): each field it reads from a
tensor's TensorImpl gives torch's TensorGuards' verdict, both ways; calls it does not decide
go to torch's checker; stale or missing builds are refused with the reason."""

from __future__ import annotations

import os
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch._C._dynamo.guards import TensorGuards  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from jitguard._src import native  # noqa: E402
from jitguard._src.torch import native_checks  # noqa: E402

needs_native = pytest.mark.skipif(not native_checks.enabled(),
                                  reason=f"the native tensor checker is off: {native_checks.why_not}")


def dims(tensors: Any, dynamic: Any = ()) -> tuple[list[Any], list[Any]]:
    """Each tensor's sizes and strides; the dims in ``dynamic`` (i, d) are None."""
    sizes = [[None if (i, d) in dynamic else s for d, s in enumerate(t.shape)]
             for i, t in enumerate(tensors)]
    strides = [[None if (i, d) in dynamic else s for d, s in enumerate(t.stride())]
               for i, t in enumerate(tensors)]
    return sizes, strides


def pair(*tensors: Any, dynamic: Any = ()) -> tuple[Any, Any]:
    """(native checker, torch's check) built over ``tensors``."""
    sizes, strides = dims(tensors, dynamic)
    tg = TensorGuards(*tensors, dynamic_dims_sizes=sizes, dynamic_dims_strides=strides)
    return native_checks.module.Checker(tuple(tensors), sizes, strides, tg.check), tg.check


def same_verdict(built: list[Any], probe: list[Any], dynamic: Any = ()) -> bool:
    """The verdict on ``probe``, asserted equal for both checkers built over ``built``."""
    ours, theirs = pair(*built, dynamic=dynamic)
    verdict = theirs(*probe)
    assert ours(*probe) is verdict
    return verdict


def test_the_extension_is_built_where_torch_is() -> None:
    """Where torch is installed and jitguard is not in pure Python, the native checker is
    built and loaded (make venv builds it); the reason says why not otherwise."""
    if os.environ.get(native.ENV_VAR):
        assert not native_checks.enabled() and native.ENV_VAR in str(native_checks.why_not)
    else:
        assert native_checks.enabled(), native_checks.why_not
        assert native_checks.module.TORCH_VERSION == torch.__version__
        assert native_checks.describe() == (
            f"jitguard's native checker (built for torch {torch.__version__})")


@needs_native
def test_type_is_exact() -> None:
    """The Python type is compared exactly: a Parameter is not a Tensor, nor a subclass."""

    class Sub(torch.Tensor):
        pass

    x = torch.randn(3)
    assert same_verdict([x], [torch.randn(3)])
    assert not same_verdict([x], [torch.nn.Parameter(torch.randn(3))])
    assert not same_verdict([x], [torch.randn(3).as_subclass(Sub)])
    p = torch.nn.Parameter(torch.randn(3))
    assert same_verdict([p], [torch.nn.Parameter(torch.randn(3))])


@needs_native
def test_dtype() -> None:
    """dtype is compared."""
    assert same_verdict([torch.randn(2, 2)], [torch.randn(2, 2)])
    assert not same_verdict([torch.randn(2, 2)], [torch.randn(2, 2).double()])
    assert not same_verdict([torch.zeros(2, dtype=torch.int64)], [torch.zeros(2, dtype=torch.int32)])


@needs_native
def test_requires_grad_both_ways() -> None:
    """requires_grad is compared, whichever way it changed, and with grad mode off."""
    assert not same_verdict([torch.randn(2)], [torch.randn(2, requires_grad=True)])
    assert not same_verdict([torch.randn(2, requires_grad=True)], [torch.randn(2)])
    with torch.no_grad():
        assert not same_verdict([torch.randn(2, requires_grad=True)], [torch.randn(2)])
    assert same_verdict([torch.randn(2, requires_grad=True)], [torch.randn(2, requires_grad=True)])


@needs_native
def test_rank_sizes_and_strides() -> None:
    """Rank, each size and each stride are compared."""
    x = torch.randn(3, 4)
    assert same_verdict([x], [torch.randn(3, 4)])
    assert not same_verdict([x], [torch.randn(3, 5)])
    assert not same_verdict([x], [torch.randn(4, 3).t()])  # same sizes, other strides
    assert not same_verdict([x], [torch.randn(3, 4, 1)])
    assert not same_verdict([x], [torch.randn(12)])
    assert same_verdict([torch.randn(())], [torch.randn(())])


@needs_native
def test_dynamic_dims_are_not_compared() -> None:
    """A dim given as None is not compared; the others still are."""
    x = torch.randn(3, 4)
    assert same_verdict([x], [torch.randn(7, 4)], dynamic={(0, 0)})
    assert not same_verdict([x], [torch.randn(7, 5)], dynamic={(0, 0)})


@needs_native
def test_dispatch_keys_and_thread_local_sets() -> None:
    """The dispatch keys are compared with the thread's included and excluded sets applied:
    a negative view, an inference tensor, autocast and an excluded key all count."""
    x = torch.randn(3)
    assert not same_verdict([x], [torch.randn(3)._neg_view()])
    with torch.inference_mode():
        inference = torch.randn(3)
    assert not same_verdict([x], [inference])
    ours, theirs = pair(x)
    with torch.autocast("cpu"):
        assert ours(x) is theirs(x) is False
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutogradCPU)):
        assert ours(x) is theirs(x) is False
    assert ours(x) is theirs(x) is True


@needs_native
def test_one_object_twice_fails() -> None:
    """A tensor passed twice fails, in a small batch and a large one."""
    small = [torch.randn(2) for _ in range(3)]
    assert not same_verdict(small, [small[0], small[0], small[2]])
    large = [torch.randn(2) for _ in range(20)]
    assert same_verdict(large, large)
    assert not same_verdict(large, [*large[:19], large[3]])
    ours, _ = pair(*large)
    for _ in range(3):  # the table of a call is never cleared: later calls still see repeats
        assert ours(*large) and not ours(*large[:19], large[0])


@needs_native
def test_a_wrong_count_is_a_type_error() -> None:
    """Called on another number of tensors, it raises TypeError, as torch's checker does."""
    ours, theirs = pair(torch.randn(2), torch.randn(2))
    with pytest.raises(TypeError, match="takes 2 tensors, got 1"):
        ours(torch.randn(2))
    with pytest.raises(TypeError):
        theirs(torch.randn(2))


@needs_native
def test_other_layouts_fail_on_their_keys() -> None:
    """A sparse or nested tensor where a strided one was built fails on its dispatch keys,
    decided natively, before any layout-specific read (torch's own checker aborts the
    process on a nested tensor: a C++ exception it lets escape)."""
    x = torch.randn(2)
    ours, theirs = pair(x)
    sparse = torch.sparse_coo_tensor([[0]], [1.0], (2,))
    assert ours(sparse) is theirs(sparse) is False
    nested = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])
    before = ours.counts()
    assert ours(nested) is False
    assert ours.counts() == (before[0] + 1, before[1])


@needs_native
def test_python_dispatch_keys_go_to_torchs_checker() -> None:
    """Under a dispatch mode (a Python key in the thread's included set) the call goes to
    torch's checker: its verdict is the answer, and the count says so."""
    x = torch.randn(2)
    ours, theirs = pair(x)
    before = ours.counts()
    with TorchDispatchMode():
        verdict = theirs(x)
        assert ours(x) is verdict
    assert ours.counts() == (before[0], before[1] + 1)


@needs_native
def test_a_build_refuses_what_it_cannot_read() -> None:
    """Built over a sparse tensor, a non-tensor or malformed dims, it raises with the tensor's
    position; ``tensor_checker`` then keeps torch's checker."""
    Checker = native_checks.module.Checker
    sparse = torch.sparse_coo_tensor([[0]], [1.0], (2,))
    with pytest.raises(ValueError, match="tensor 0 is not a plain strided tensor"):
        Checker((sparse,), [[2]], [[1]], print)
    with pytest.raises(TypeError, match="tensor 0 is a int, not a tensor"):
        Checker((3,), [[]], [[]], print)
    with pytest.raises(ValueError, match=r"tensor 0: sizes must be a list of 1 ints"):
        Checker((torch.randn(2),), [[2, 2]], [[1]], print)
    with pytest.raises(ValueError, match=r"strides\[0\] is a str"):
        Checker((torch.randn(2),), [[2]], [["1"]], print)
    tg = TensorGuards(sparse, dynamic_dims_sizes=[[2]], dynamic_dims_strides=[[]])
    assert native_checks.tensor_checker([sparse], [[2]], [[]], tg.check) == tg.check


@needs_native
def test_a_checker_that_rejects_its_own_tensors_is_not_used(caplog: pytest.LogCaptureFixture) -> None:
    """If the native checker rejects the tensors it was built from while torch's accepts
    them, the batch keeps torch's checker, and the log says so."""
    x = torch.randn(3)

    def accepts(*values: Any) -> bool:
        return True

    with caplog.at_level("WARNING", logger="jitguard.torch"):
        got = native_checks.tensor_checker([x], [[5]], [[1]], accepts)
    assert got is accepts and "rejects the tensors it was built from" in caplog.text
    assert isinstance(native_checks.tensor_checker([x], [[3]], [[1]], accepts),
                      native_checks.module.Checker)


def test_stale_or_switched_off_builds_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build for another torch is refused with both versions and the fix; under
    JITGUARD_PURE_PYTHON the checker is off; off, ``tensor_checker`` gives torch's check."""
    monkeypatch.delenv(native.ENV_VAR, raising=False)
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    module, why = native_checks._load()
    if native_checks.module is not None:
        assert module is None and "stale build" in str(why) and "torch 9.9.9" in str(why)
        assert "setup.py build_ext --inplace" in str(why)
    else:
        assert module is None and why
    monkeypatch.setenv(native.ENV_VAR, "1")
    assert native_checks._load() == (None, f"{native.ENV_VAR}=1")
    monkeypatch.setattr(native_checks, "module", None)
    monkeypatch.setattr(native_checks, "why_not", "a reason")
    assert native_checks.describe() == "torch's TensorGuards (a reason)"
    tg = TensorGuards(torch.randn(2), dynamic_dims_sizes=[[2]], dynamic_dims_strides=[[1]])
    assert native_checks.tensor_checker([torch.randn(2)], [[2]], [[1]], tg.check) == tg.check


DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.bool]
SHAPE = st.lists(st.integers(0, 3), min_size=0, max_size=3)


@st.composite
def tensors(draw: Any) -> Any:
    t = torch.zeros(draw(SHAPE), dtype=draw(st.sampled_from(DTYPES)))
    view = draw(st.sampled_from(["plain", "t", "slice", "expand", "param", "grad", "neg"]))
    if view == "t" and t.dim() >= 2:
        t = t.transpose(0, 1)
    elif view == "slice" and t.dim() >= 1 and t.shape[0] > 1:
        t = t[1:]
    elif view == "expand" and t.dim() >= 1:
        t = t.unsqueeze(0).expand(2, *t.shape)
    elif view in ("param", "grad") and t.is_floating_point():
        t = torch.nn.Parameter(t) if view == "param" else t.requires_grad_()
    elif view == "neg" and t.is_floating_point():
        t = t._neg_view()
    return t


@needs_native
@settings(max_examples=150, deadline=None)
@given(built=st.lists(tensors(), min_size=1, max_size=10), data=st.data())
def test_native_and_torch_agree(built: list[Any], data: Any) -> None:
    """On random tensors (dtypes, views, grads, dynamic dims) and random probes, the native
    checker and torch's give one verdict."""
    if len({id(t) for t in built}) < len(built):
        return
    n = len(built)
    dynamic = {(i, d) for i, t in enumerate(built) for d in range(t.dim())
               if data.draw(st.booleans(), label=f"dynamic {i}/{d}")}
    probes = data.draw(st.lists(tensors(), min_size=n, max_size=n), label="probes")
    mixed = [p if data.draw(st.booleans(), label=f"probe {i}") else b
             for i, (b, p) in enumerate(zip(built, probes, strict=True))]
    same_verdict(built, built, dynamic)
    same_verdict(built, mixed, dynamic)
    same_verdict(built, probes, dynamic)
