"""TENSOR_MATCH: torch's meaning (type, dispatch flags, dtype, device, requires_grad, sizes,
strides, dynamic dims), torch's failure texts, the generated code, facts."""

from __future__ import annotations

import functools
import gc
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import jitguard.torch as jgt  # noqa: E402
from jitguard import GuardBuilder, LocalSource, compile_guards  # noqa: E402
from jitguard._src.compiler.kinds import get_guard_kind  # noqa: E402
from jitguard._src.torch.tensor_match import dtype_name  # noqa: E402


def check_for(x: Any, create_fn: Any = None, name: str = "x") -> Any:
    """A check function of one TENSOR_MATCH guard built from ``x``."""
    guard = LocalSource(name).make_guard(create_fn or GuardBuilder.TENSOR_MATCH)
    return compile_guards([guard], f_locals={name: x}, arg_names=[name])


def reason(check: Any, value: Any) -> str:
    failures = check.explain(value)
    assert len(failures) == 1, failures
    return failures[0].reason


class MyTensor(torch.Tensor):
    pass


# ---- hits ----------------------------------------------------------------------------


def test_same_and_equal_metadata_tensors_hit() -> None:
    """The build tensor and any other tensor with the same metadata pass."""
    x = torch.randn(3, 4)
    c = check_for(x)
    assert c(x) and c(torch.zeros(3, 4)) and c(torch.empty_strided((3, 4), (4, 1)))


def test_guard_builder_attribute_and_public_create_fn() -> None:
    """GuardBuilder.TENSOR_MATCH is the kind's create_fn, also jitguard.torch.TENSOR_MATCH."""
    assert GuardBuilder.TENSOR_MATCH is jgt.TENSOR_MATCH
    kind, options = get_guard_kind(jgt.tensor_match(dynamic_dims=(0,)))
    assert kind.name == "TENSOR_MATCH" and options == {"dispatch_keys": "subset", "dynamic_dims": (0,)}
    assert jgt.tensor_match() is jgt.TENSOR_MATCH


# ---- the failure texts ------------------------------------------------------------------


def test_size_mismatch_text() -> None:
    """A different size says which index, expected and actual, as torch does."""
    c = check_for(torch.randn(3, 4))
    y = torch.randn(4, 4)
    assert not c(y)
    assert reason(c, y) == "tensor 'L['x']' size mismatch at index 0. expected 3, actual 4"


def test_rank_mismatch_text() -> None:
    """A different rank is a rank mismatch."""
    c = check_for(torch.randn(3, 4))
    y = torch.randn(3, 4, 1)
    assert not c(y)
    assert reason(c, y) == "tensor 'L['x']' rank mismatch. expected 2, actual 3"


def test_dtype_mismatch_text() -> None:
    """dtype names are torch's C++ names (Float, Half)."""
    c = check_for(torch.randn(3, 4))
    y = torch.randn(3, 4).half()
    assert not c(y)
    assert reason(c, y) == "tensor 'L['x']' dtype mismatch. expected Float, actual Half"


def test_stride_mismatch_from_transpose() -> None:
    """A transposed view of the right shape fails on strides."""
    c = check_for(torch.randn(4, 4))
    y = torch.randn(4, 4).t()
    assert not c(y)
    assert reason(c, y) == "tensor 'L['x']' stride mismatch at index 0. expected 4, actual 1"


def test_stride_mismatch_from_slice() -> None:
    """A column slice has the shape but not the strides of a contiguous tensor."""
    c = check_for(torch.randn(3, 2))
    y = torch.randn(3, 4)[:, :2]
    assert y.shape == (3, 2) and not c(y)
    assert reason(c, y) == "tensor 'L['x']' stride mismatch at index 0. expected 2, actual 4"


def test_requires_grad_mismatch_text() -> None:
    """requires_grad both ways, in torch's =0/=1 form."""
    c = check_for(torch.randn(3).requires_grad_())
    y = torch.randn(3)
    assert not c(y)
    assert reason(c, y) == "tensor 'L['x']' requires_grad mismatch. expected requires_grad=1"
    c0 = check_for(torch.randn(3))
    assert reason(c0, torch.randn(3).requires_grad_()).endswith("expected requires_grad=0")


def test_parameter_fails_a_tensor_slot() -> None:
    """The type check is exact: a Parameter is not a Tensor, nor the reverse."""
    c = check_for(torch.randn(3))
    p = torch.nn.Parameter(torch.randn(3))
    assert not c(p)
    assert reason(c, p) == (
        "expected type of 'L['x']' to be <class 'torch.Tensor'>, but found "
        "<class 'torch.nn.parameter.Parameter'>"
    )
    assert not check_for(p)(torch.randn(3).requires_grad_())


def test_subclass_is_a_distinct_type() -> None:
    """A tensor subclass instance fails a Tensor guard and passes its own."""
    sub = torch.randn(3).as_subclass(MyTensor)
    assert not check_for(torch.randn(3))(sub)
    c = check_for(sub)
    assert c(torch.zeros(3).as_subclass(MyTensor)) and not c(torch.zeros(3))
    assert "MyTensor" in reason(c, torch.zeros(3))


def test_device_mismatch_text() -> None:
    """A tensor on another device type fails with both devices named."""
    c = check_for(torch.randn(3))
    y = torch.empty(3, device="meta")
    assert not c(y)
    assert reason(c, y) == "tensor 'L['x']' device mismatch. expected cpu, actual meta"
    cm = check_for(torch.empty(3, device="meta"))
    assert cm(torch.empty(3, device="meta")) and not cm(torch.randn(3))


def test_negative_bit_is_a_dispatch_key_mismatch() -> None:
    """A neg-bit view (same dtype, shape, strides) fails with the key sets shown."""
    x = torch.randn(3, dtype=torch.complex64)
    c = check_for(x.imag)
    y = x.conj().imag
    assert y.is_neg() and y.shape == x.imag.shape and y.stride() == x.imag.stride()
    assert not c(y)
    text = reason(c, y)
    assert text.startswith("tensor 'L['x']' dispatch key set mismatch. expected DispatchKeySet(")
    assert "Negative" in text and "is_neg() expected False, actual True" in text


def test_conjugate_bit_checked_for_complex() -> None:
    """A conj view of a complex tensor fails a guard built on a plain complex tensor."""
    x = torch.randn(3, dtype=torch.complex64)
    c = check_for(x)
    assert c(x.clone()) and not c(x.conj())
    assert "is_conj() expected False, actual True" in reason(c, x.conj())


def test_inference_tensor_fails() -> None:
    """An inference tensor is not an ordinary tensor (torch: different dispatch keys)."""
    c = check_for(torch.randn(3))
    with torch.inference_mode():
        y = torch.randn(3)
    assert not c(y)
    assert "is_inference() expected False, actual True" in reason(c, y)


def test_non_tensor_value_fails_without_raising() -> None:
    """A non-tensor at check time is a miss whose reason names the type."""
    c = check_for(torch.randn(3))
    assert c([1, 2, 3]) is False
    assert "but found <class 'list'>" in reason(c, [1, 2, 3])


def test_non_tensor_build_value_is_refused() -> None:
    """Building TENSOR_MATCH on a non-tensor says what was found."""
    with pytest.raises(Exception, match=r"expected a torch\.Tensor, found int"):
        check_for(3)


@pytest.mark.filterwarnings("ignore:Sparse invariant checks")
def test_sparse_tensor_checks_layout_not_strides() -> None:
    """A sparse tensor (no strides) is guarded by layout; a dense one fails it."""
    s = torch.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (4,))
    c = check_for(s)
    assert c(torch.sparse_coo_tensor([[1]], [5.0], (4,)))
    assert not c(torch.randn(4))
    assert "layout mismatch. expected torch.sparse_coo, actual torch.strided" in reason(c, torch.randn(4))


def test_zero_dim_tensor() -> None:
    """A 0-d tensor matches 0-d tensors only."""
    c = check_for(torch.tensor(1.0))
    assert c(torch.tensor(2.0)) and not c(torch.tensor([2.0]))
    assert reason(c, torch.tensor([2.0])) == "tensor 'L['x']' rank mismatch. expected 0, actual 1"


def test_dtype_names_are_torch_cpp_names() -> None:
    """dtype_name gives the names torch prints in guard failures."""
    assert [dtype_name(d) for d in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool)] == [
        "Float", "Half", "BFloat16", "Long", "Bool"
    ]
    assert dtype_name(torch.complex64) == "ComplexFloat" and dtype_name(torch.qint8) == "QInt8"


# ---- dynamic dims ----------------------------------------------------------------------


def test_dynamic_dim_size_unchecked() -> None:
    """A dynamic dim takes any size; the other dims stay checked."""
    c = check_for(torch.randn(3, 4), jgt.tensor_match(dynamic_dims=(0,)))
    assert c(torch.randn(7, 4)) and c(torch.randn(1, 4))
    assert not c(torch.randn(7, 5))
    assert reason(c, torch.randn(7, 5)) == "tensor 'L['x']' size mismatch at index 1. expected 4, actual 5"
    assert not c(torch.randn(7, 4, 1))


def test_dynamic_dim_keeps_its_own_stride_checked() -> None:
    """With dim 0 dynamic, a (5, 4) slice of a wider tensor (stride 8) still fails."""
    c = check_for(torch.randn(3, 4), jgt.tensor_match(dynamic_dims=(0,)))
    y = torch.randn(5, 8)[:, :4]
    assert not c(y)
    assert reason(c, y) == "tensor 'L['x']' stride mismatch at index 0. expected 4, actual 8"


def test_strides_that_grow_with_a_dynamic_dim_are_unchecked() -> None:
    """With the inner dim dynamic, the outer stride (its multiple) is unchecked."""
    c = check_for(torch.randn(3, 4), jgt.tensor_match(dynamic_dims=(1,)))
    assert c(torch.randn(3, 9)) and not c(torch.randn(3, 9).t().contiguous().t())
    spec = c.leaves[0].params
    assert spec.sizes == (3, None) and spec.strides == (None, 1)


def test_explicit_sizes_and_strides() -> None:
    """sizes=/strides= with None say exactly what is checked (torch's size=[None, 4] form)."""
    c = check_for(torch.randn(3, 4), jgt.tensor_match(sizes=(None, 4), strides=(None, 1)))
    assert c(torch.randn(5, 8)[:, :4]) and not c(torch.randn(5, 4).t().contiguous().t()[:, :4])
    assert "size=[None, 4], stride=[None, 1]" in c.leaves[0].code()


def test_explicit_sizes_must_agree_with_the_tensor() -> None:
    """sizes= that contradicts the build tensor, or has the wrong rank, is refused."""
    with pytest.raises(Exception, match=r"sizes\[1\] = 5 but the tensor has 4"):
        check_for(torch.randn(3, 4), jgt.tensor_match(sizes=(None, 5)))
    with pytest.raises(Exception, match="has 1 entries but the tensor has rank 2"):
        check_for(torch.randn(3, 4), jgt.tensor_match(sizes=(None,)))
    with pytest.raises(Exception, match="dynamic dim 2 is not a dim"):
        check_for(torch.randn(3, 4), jgt.tensor_match(dynamic_dims=(2,)))


def test_unknown_option_is_refused() -> None:
    """A misspelt option is an error, not ignored."""
    with pytest.raises(Exception, match="unknown option"):
        check_for(torch.randn(3), functools.partial(GuardBuilder.TENSOR_MATCH, dynamic=(0,)))


# ---- dispatch key modes -------------------------------------------------------------------


def test_exact_keys_mode_compares_raw_key_sets() -> None:
    """dispatch_keys="exact" compares torch._C._dispatch_keys and shows the sets."""
    c = check_for(torch.randn(3), jgt.tensor_match(dispatch_keys="exact"))
    assert c(torch.randn(3))
    with torch.inference_mode():
        y = torch.randn(3)
    assert not c(y)
    assert "dispatch key set mismatch" in reason(c, y) and "AutogradCPU" in reason(c, y)


def test_torch_keys_mode_folds_in_thread_local_sets() -> None:
    """dispatch_keys="torch" (torch's checker) fails under autocast, the subset mode not."""
    x = torch.randn(3)
    c_torch = check_for(x, jgt.tensor_match(dispatch_keys="torch"))
    c_subset = check_for(x)
    assert c_torch(x)
    with torch.autocast("cpu"):
        assert not c_torch(x) and c_torch.reference(x) is False
        assert c_subset(x)


# ---- generated code ---------------------------------------------------------------------


def test_generated_code_is_straight_line_type_first() -> None:
    """One expression: exact type first, the static shape as one tuple comparison."""
    c = check_for(torch.randn(3, 4))
    line = next(ln for ln in c.source.splitlines() if "TENSOR_MATCH" in ln)
    assert line.strip().startswith("if not (type(l_x) is ___type")
    assert "l_x.shape == ___sizes" in line and "l_x.stride() == ___strides" in line
    assert "l_x.is_cpu" in line and "_dispatch_keys" not in line


def test_dynamic_shape_read_once() -> None:
    """With a dynamic dim the shape is bound once and indexed."""
    c = check_for(torch.randn(3, 4, 5), jgt.tensor_match(dynamic_dims=(0,)))
    line = next(ln for ln in c.source.splitlines() if "TENSOR_MATCH" in ln)
    assert line.count(".shape") == 1 and "_s_l_x :=" in line


def test_export_info_recorded() -> None:
    """The guard records TENSOR_MATCH, its code and weak references to type and tensor."""
    x = torch.randn(2)
    guard = LocalSource("x").make_guard(GuardBuilder.TENSOR_MATCH)
    compile_guards([guard], f_locals={"x": x}, arg_names=["x"])
    assert guard.guard_types == ["TENSOR_MATCH"]
    assert guard.code_list is not None and guard.code_list[0].startswith("check_tensor(L['x'], Tensor, ")
    assert guard.obj_weakref is not None and guard.obj_weakref() is x
    assert guard.guarded_class_weakref is not None and guard.guarded_class_weakref() is torch.Tensor


def test_local_subclass_death_invalidates() -> None:
    """A guard on a subclass held weakly is invalidated when the class dies."""

    def make() -> Any:
        class Local(torch.Tensor):
            pass

        return check_for(torch.randn(2).as_subclass(Local))

    c = make()
    gc.collect()
    assert not c.valid and "got deallocated" in str(c.invalid_reason)


# ---- generated == reference, facts ----------------------------------------------------------

DTYPES = [torch.float32, torch.float16, torch.int64, torch.bool, torch.complex64]


@st.composite
def tensors(draw: Any) -> Any:
    shape = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3))
    dtype = draw(st.sampled_from(DTYPES))
    t = torch.zeros(shape, dtype=dtype)
    view = draw(st.sampled_from(["plain", "transpose", "slice", "neg", "conj", "param"]))
    if view == "transpose" and t.dim() >= 2:
        t = t.transpose(0, 1)
    elif view == "slice" and t.dim() >= 1 and t.shape[-1] > 1:
        t = t[..., ::2]
    elif view == "neg" and dtype is torch.complex64:
        t = t.conj().imag
    elif view == "conj" and dtype is torch.complex64:
        t = t.conj()
    elif view == "param" and dtype.is_floating_point:
        t = torch.nn.Parameter(t)
    if draw(st.booleans()) and t.dtype.is_floating_point and not isinstance(t, torch.nn.Parameter):
        t = t.detach().requires_grad_()
    return t


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(build=tensors(), others=st.lists(tensors(), min_size=1, max_size=4), data=st.data())
def test_generated_check_agrees_with_reference_and_facts(build: Any, others: list[Any], data: Any) -> None:
    """On random tensors the generated check, the reference evaluator and the fact agree."""
    dims = data.draw(st.sets(st.integers(0, max(build.dim() - 1, 0)))) if build.dim() else set()
    mode = data.draw(st.sampled_from(["subset", "exact", "torch"]))
    c = check_for(build, jgt.tensor_match(dynamic_dims=tuple(dims), dispatch_keys=mode))
    leaf = c.leaves[0]
    fact_name, expected = leaf.kind.fact(leaf.params)
    for value in [build, *others]:
        got = c(value)
        assert got == c.reference(value), (value.shape, value.stride(), value.dtype)
        assert (leaf.kind.fact_of(fact_name, value) == expected) == got
        if not got:
            assert c.explain(value)[0].reason.startswith(("tensor 'L['x']' ", "expected type of"))


def test_fact_is_hashable_and_rejects_non_tensors() -> None:
    """The fact is hashable; a non-tensor's fact never equals a tensor's."""
    c = check_for(torch.randn(2, 3))
    leaf = c.leaves[0]
    name, expected = leaf.kind.fact(leaf.params)
    hash(expected)
    assert leaf.kind.fact_of(name, torch.randn(2, 3)) == expected
    assert leaf.kind.fact_of(name, "not a tensor") != expected
