"""Fake inputs over a ShapeEnv -> ShapeGuards + symbol sources, compiled with
``compile_guards``; and the traced graph's generated runner (jitguard._src.torch.dynamic,
jitguard._src.torch.trace)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from jitguard import (  # noqa: E402
    GetItemSource,
    LocalSource,
    ShapeGuard,
    SLoc,
    TensorProperty,
    TensorPropertySource,
    compile_guards,
)
from jitguard._src.torch.trace import TraceError, trace  # noqa: E402

X, Y, N = LocalSource("x"), LocalSource("y"), LocalSource("n")


def size(src: Any, i: int) -> TensorPropertySource:
    return TensorPropertySource(src, TensorProperty.SIZE, i)


def shape_check(tr: Any, frame: dict[str, Any]) -> Any:
    return compile_guards(
        shape_guards=tr.shapes.shape_guards,
        symbol_sources=tr.shapes.symbol_sources,
        f_locals=frame,
        arg_names=list(frame),
    )


def test_static_trace_has_no_shape_guards_and_static_layouts() -> None:
    x = torch.randn(3, 4)
    tr = trace(lambda x: x.sum(0) * 2, ["x"], [x])
    assert tr.shapes.shape_guards == []
    layout = tr.shapes.layouts[X]
    assert layout.sizes == (3, 4) and layout.strides == (4, 1) and layout.is_static
    torch.testing.assert_close(tr.run(x), x.sum(0) * 2)


def test_dynamic_dims_bind_symbols_to_size_sources() -> None:
    x = torch.randn(5, 4)
    tr = trace(lambda x: x * 2, ["x"], [x], dynamic_dims={X: [0]})
    assert tr.shapes.layouts[X].sizes == (None, 4)
    assert tr.shapes.layouts[X].dynamic_dims == {0}
    assert set(tr.shapes.symbol_sources.values()) == {size(X, 0)}
    for g in tr.shapes.shape_guards:
        assert isinstance(g, ShapeGuard) and isinstance(g.sloc, SLoc)


def test_zero_one_specialization() -> None:
    # a size of 1 is never symbolic: the dim stays static
    tr = trace(lambda x: x + 1, ["x"], [torch.randn(1, 4)], dynamic_dims={X: [0]})
    assert tr.shapes.layouts[X].sizes == (1, 4)
    # a symbolic size assumes >= 2, and the guard says so
    tr = trace(lambda x: x + 1, ["x"], [torch.randn(5, 4)], dynamic_dims={X: [0]})
    assert tr.shapes.describe() == ["2 <= L['x'].size()[0]"]
    (g,) = tr.shapes.shape_guards
    assert "0/1 specialization" in str(g.sloc)
    check = shape_check(tr, {"x": torch.randn(5, 4)})
    assert check(torch.randn(2, 4)) and check(torch.randn(100, 4))
    assert not check(torch.randn(1, 4)) and not check(torch.randn(0, 4))
    (failure,) = check.explain(torch.randn(1, 4))
    assert "L['x'].size()[0] = 1" in failure.reason and "0/1 specialization" in failure.reason


def test_branch_on_a_size_becomes_a_guard_with_the_user_line() -> None:
    def f(x: Any) -> Any:
        if x.shape[0] > 3:
            return x * 2
        return x - 1

    tr = trace(f, ["x"], [torch.randn(5, 4)], dynamic_dims={X: [0]})
    assert tr.shapes.describe() == ["4 <= L['x'].size()[0]"]
    (g,) = tr.shapes.shape_guards
    assert "test_dynamic.py" in str(g.sloc) and "in f" in str(g.sloc)
    check = shape_check(tr, {"x": torch.randn(5, 4)})
    assert check(torch.randn(4, 4)) and not check(torch.randn(3, 4))


def test_equalities_between_dims() -> None:
    x, y = torch.randn(5, 3), torch.randn(3, 6)
    tr = trace(lambda x, y: x @ y, ["x", "y"], [x, y], dynamic_dims={X: [0, 1], Y: [0, 1]})
    text = tr.shapes.describe()
    assert "Eq(L['y'].size()[0], L['x'].size()[1])" in text
    check = shape_check(tr, {"x": x, "y": y})
    assert check(torch.randn(7, 4), torch.randn(4, 2))
    assert not check(torch.randn(7, 4), torch.randn(5, 2))
    (failure,) = check.explain(torch.randn(7, 4), torch.randn(5, 2))
    assert "L['y'].size()[0] = 5" in failure.reason and "L['x'].size()[1] = 4" in failure.reason


def test_strides_expressed_through_sizes_are_guarded() -> None:
    x = torch.randn(5, 4)
    tr = trace(lambda x: x.sum(), ["x"], [x], dynamic_dims={X: [0, 1]})
    assert tr.shapes.layouts[X].sizes == (None, None)
    assert tr.shapes.layouts[X].strides == (None, 1)
    assert "Eq(L['x'].stride()[0], L['x'].size()[1])" in tr.shapes.describe()
    check = shape_check(tr, {"x": x})
    assert check(torch.randn(6, 7))
    assert not check(torch.randn(12, 7)[::2])  # stride 14 != 7


def test_broadcasting_against_a_static_size_specializes() -> None:
    x, y = torch.randn(5, 4), torch.randn(5, 4)
    tr = trace(lambda x, y: x + y, ["x", "y"], [x, y], dynamic_dims={X: [0]})
    assert tr.shapes.layouts[X].sizes == (5, 4)
    assert tr.shapes.shape_guards == []


def test_dynamic_int_stays_symbolic_unless_code_branches_on_it() -> None:
    x = torch.randn(3)
    tr = trace(lambda x, n: x * n, ["x", "n"], [x, 3], dynamic_ints=[N])
    assert tr.shapes.shape_guards == []
    torch.testing.assert_close(tr.run(x, 7), x * 7)

    def g(x: Any, n: Any) -> Any:
        return x * 2 if n == 3 else x

    tr = trace(g, ["x", "n"], [x, 3], dynamic_ints=[N])
    check = shape_check(tr, {"x": x, "n": 3})
    assert check(x, 3) and not check(x, 4)


def test_containers_are_flattened_with_sources() -> None:
    d = {"a": [torch.randn(4), torch.randn(4)], "b": (torch.randn(4),)}
    tr = trace(lambda d: d["a"][0] + d["a"][1] * d["b"][0], ["d"], [d])
    srcs = [leaf.source for leaf in tr.inputs]
    da = GetItemSource(LocalSource("d"), "a")
    assert srcs == [GetItemSource(da, 0), GetItemSource(da, 1), GetItemSource(GetItemSource(LocalSource("d"), "b"), 0)]
    assert srcs[0].name() == "L['d']['a'][0]"
    torch.testing.assert_close(tr.run(d), d["a"][0] + d["a"][1] * d["b"][0])


def test_parameters_are_embedded_by_reference() -> None:
    m = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    tr = trace(lambda m, x: m(x), ["m", "x"], [m, x])
    torch.testing.assert_close(tr.run(m, x), m(x))
    with torch.no_grad():
        m.weight.add_(1.0)
    torch.testing.assert_close(tr.run(m, x), m(x))


def test_values_read_from_data_run_with_the_graph() -> None:
    x = torch.randn(3)
    tr = trace(lambda x: x * x.sum().item(), ["x"], [x])
    y = torch.randn(3)
    torch.testing.assert_close(tr.run(y), y * y.sum().item())

    def checked(x: Any) -> Any:
        n = x.sum().int().item()
        torch._check(n >= 0)
        return x * n

    tr = trace(checked, ["x"], [torch.ones(3)])
    torch.testing.assert_close(tr.run(torch.ones(3) * 2), torch.ones(3) * 12)
    with pytest.raises(RuntimeError):  # as eager code raises
        tr.run(-torch.ones(3))


def test_branching_on_data_cannot_be_traced() -> None:
    def branchy(x: Any) -> Any:
        return x + 1 if x.sum() > 0 else x - 1

    with pytest.raises(TraceError, match="data-dependent"):
        trace(branchy, ["x"], [torch.randn(3)])


def test_runner_is_straight_line_code_with_ops_bound() -> None:
    x = torch.randn(3)
    tr = trace(lambda x: (x + 1).relu(), ["x"], [x])
    assert tr.source.startswith("def ___grun(x):")
    assert "torch.ops" not in tr.source
    torch.testing.assert_close(tr.run(x), (x + 1).relu())


def test_random_ops_survive_dead_code_elimination() -> None:
    def f(x: Any) -> Any:
        torch.rand(3)  # unused, but consumes the generator as eager does
        return x + torch.rand(3)

    x = torch.zeros(3)
    tr = trace(f, ["x"], [x])
    torch.manual_seed(0)
    expected = f(x)
    torch.manual_seed(0)
    torch.testing.assert_close(tr.run(x), expected)


def test_requires_grad_outputs_backprop() -> None:
    x = torch.randn(3, requires_grad=True)
    tr = trace(lambda x: (x * x).sum(), ["x"], [x])
    out = tr.run(x)
    assert out.requires_grad
    out.backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())


def test_a_storage_offset_the_trace_reads_is_guarded() -> None:
    def f(x: Any) -> Any:
        return x * x.storage_offset()

    base = torch.arange(6.0)
    tr = trace(f, ["x"], [base[1:4]])
    assert tr.shapes.describe() == ["Eq(L['x'].storage_offset(), 1)"]
    check = shape_check(tr, {"x": base[1:4]})
    assert check(base[1:4]) and not check(base[2:5])
    # not read: not guarded
    assert trace(lambda x: x * 2, ["x"], [base[1:4]]).shapes.shape_guards == []


def test_reading_metadata_no_guard_pins_is_untraceable() -> None:
    x = torch.randn(3)
    for read in (lambda x: x * x.is_leaf, lambda x: x * x._is_view(), lambda x: x * (x.grad is None)):
        with pytest.raises(TraceError, match="which no guard pins"):
            trace(read, ["x"], [x])
