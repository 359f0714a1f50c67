"""torch's constant types under EQUALS_MATCH, and torch's sympy functions in shape guards."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
sympy = pytest.importorskip("sympy")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch.utils._sympy import functions as F  # noqa: E402

import jitguard.torch  # noqa: E402, F401  (installs the integration)
from jitguard import GuardBuilder, LocalSource, compile_guards  # noqa: E402
from jitguard._src.compiler import shape  # noqa: E402
from jitguard._src.torch.symbolic import SYMPY_FUNCTIONS  # noqa: E402


def equals(value: Any) -> Any:
    guard = LocalSource("v").make_guard(GuardBuilder.EQUALS_MATCH)
    return compile_guards([guard], f_locals={"v": value}, arg_names=["v"])


# ---- constants --------------------------------------------------------------------------


def test_dtype_is_an_equals_constant() -> None:
    """EQUALS_MATCH holds a dtype; another dtype is a miss (reference agrees)."""
    c = equals(torch.float32)
    assert c(torch.float32) and not c(torch.float16) and c.reference(torch.float16) is False
    assert c.explain(torch.float16)[0].kind == "EQUALS_MATCH"


def test_device_is_an_equals_constant() -> None:
    """cpu equals cpu; meta and cuda:0 differ."""
    c = equals(torch.device("cpu"))
    assert c(torch.device("cpu")) and not c(torch.device("meta")) and not c(torch.device("cuda", 0))


def test_size_is_an_equals_constant_and_type_exact() -> None:
    """torch.Size([3, 4]) matches an equal Size, not a plain tuple or another size."""
    c = equals(torch.Size([3, 4]))
    assert c(torch.randn(3, 4).shape) and not c(torch.Size([4, 3])) and not c((3, 4))


def test_layout_and_memory_format_are_constants() -> None:
    """torch.layout and torch.memory_format are constants too."""
    assert equals(torch.strided)(torch.strided) and not equals(torch.strided)(torch.sparse_coo)
    c = equals(torch.channels_last)
    assert c(torch.channels_last) and not c(torch.contiguous_format)


# ---- sympy functions --------------------------------------------------------------------------


def test_every_torch_sympy_function_has_a_python_meaning() -> None:
    """Each function torch.utils._sympy.functions exports is evaluable in shape guards."""
    known_by_compiler = {"Mod", "Max", "Min", "CeilDiv"}  # Mod/Max/Min by name; CeilDiv folds away
    missing = [n for n in F.__all__ if n not in known_by_compiler and n not in SYMPY_FUNCTIONS]
    assert missing == []
    assert all(shape._functions.get(name) is fn for name, fn in SYMPY_FUNCTIONS.items())


s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
EXPRS = {
    "floordiv": sympy.Eq(F.FloorDiv(s0, 2), s1),
    "modular_indexing": sympy.Eq(F.ModularIndexing(s0, 2, 3), F.PythonMod(s1, 3)),
    "clean_div": sympy.Ge(F.CleanDiv(s0 * 4, 4) + s1, 3),
    "int_true_div": sympy.Lt(F.IntTrueDiv(s0, s1), 2),
    "max_min_pow": sympy.Le(F.Max(s0, s1) - F.Min(s0, s1), F.PowByNatural(s1, 2)),
    "trunc_ceil": sympy.Ge(F.CeilToInt(F.IntTrueDiv(s0, 2)), F.TruncToInt(F.IntTrueDiv(s1, 3))),
}


def shape_check(expr: Any, x: Any, y: Any) -> Any:
    src = {s0: LocalSource("a"), s1: LocalSource("b")}
    return compile_guards(
        shape_guards=[expr], symbol_sources=src, f_locals={"a": x, "b": y}, arg_names=["a", "b"],
        check_frame=False,
    )


@pytest.mark.parametrize("name", sorted(EXPRS))
def test_shape_guard_with_torch_function_compiles(name: str) -> None:
    """A shape guard using torch's functions compiles to Python over the sources."""
    c = shape_check(EXPRS[name], 6, 3)
    assert "SHAPE_ENV" in c.source and c(6, 3) == c.reference(6, 3)


@settings(max_examples=60, deadline=None)
@given(a=st.integers(1, 40), b=st.integers(1, 40), name=st.sampled_from(sorted(EXPRS)))
def test_shape_guards_generated_agree_with_sympy(a: int, b: int, name: str) -> None:
    """Generated code evaluates torch's functions as sympy does (the reference)."""
    expr = EXPRS[name]
    c = shape_check(expr, a, b)
    truth = bool(expr.xreplace({s0: sympy.Integer(a), s1: sympy.Integer(b)}))
    assert c(a, b) == c.reference(a, b) == truth
