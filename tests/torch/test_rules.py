"""The torch argument rules of the specializing cache: tensors by TENSOR_MATCH, torch
constants by value, modules by module_guards."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard  # noqa: E402
import jitguard.torch  # noqa: E402  (installs the integration and its rules)
from jitguard import ArgContext, Guard, LocalSource  # noqa: E402
from jitguard._src.cache.policy import default_policy  # noqa: E402
from jitguard._src.compiler.kinds import get_guard_kind  # noqa: E402
from jitguard._src.torch import rules  # noqa: E402


def visit(value: Any, *, dynamic: bool = False) -> list[Guard]:
    out: list[Guard] = []
    ctx = ArgContext(default_policy, out.append, is_dynamic=lambda s: dynamic)
    ctx.visit(LocalSource("a"), value)
    return out


def kinds(guards: list[Guard]) -> list[str]:
    return [get_guard_kind(g.create_fn)[0].name for g in guards]


def test_rules_registered_by_type() -> None:
    """Tensors (and Parameters), torch constants and modules have torch's rules."""
    assert default_policy.rule_for(torch.Tensor) is rules.tensor_rule
    assert default_policy.rule_for(torch.nn.Parameter) is rules.tensor_rule
    for tp in (torch.dtype, torch.device, torch.Size, torch.layout, torch.memory_format):
        assert default_policy.rule_for(tp) is rules.constant_rule
    assert default_policy.rule_for(torch.nn.Linear) is rules.module_rule


def test_tensor_rule_static_and_dynamic() -> None:
    """A static tensor gets TENSOR_MATCH; a dynamic one every dim dynamic."""
    assert kinds(visit(torch.randn(2, 3))) == ["TENSOR_MATCH"]
    (guard,) = visit(torch.randn(2, 3), dynamic=True)
    assert get_guard_kind(guard.create_fn)[1] == {"dynamic_dims": (0, 1)}


def test_constant_rule_by_value_outside_aliasing() -> None:
    """A dtype is CONSTANT_MATCH and stays out of the aliasing guards."""
    out: list[Guard] = []
    ctx = ArgContext(default_policy, out.append)
    ctx.visit(LocalSource("a"), torch.float32)
    ctx.visit(LocalSource("b"), torch.float32)
    assert kinds(out) == ["CONSTANT_MATCH", "CONSTANT_MATCH"]
    assert ctx.aliasing_guards() == []


def test_module_rule_is_module_guards() -> None:
    """A module argument gets exactly module_guards' guards."""
    m = torch.nn.Linear(2, 2)
    names = kinds(visit(m))
    assert names == kinds(jitguard.torch.module_guards(LocalSource("a"), m))
    assert {"ID_MATCH", "NN_MODULE_STATE", "TENSORS_MATCH", "NN_MODULE_GLOBAL_HOOKS"} <= set(names)


def test_specialize_end_to_end() -> None:
    """A specialized function hits on an unchanged call and misses on module/dtype/shape changes."""
    @jitguard.specialize
    def f(x: Any, m: Any, dt: Any) -> Any:
        return m(x).to(dt)

    m = torch.nn.Linear(3, 3)
    x = torch.randn(2, 3)
    f(x, m, torch.float32)
    f(torch.randn(2, 3), m, torch.float32)
    assert len(f.cache.entries()) == 1
    m.eval()
    f(x, m, torch.float32)
    assert len(f.cache.entries()) == 2
    assert any("training is False, expected True" in r for r in f.cache.reasons())
    f(x, m, torch.float64)
    assert len(f.cache.entries()) == 3


def test_static_tensor_guard_outweighs_dynamic() -> None:
    """Specificity: a static TENSOR_MATCH weighs more than one with dynamic dims."""
    from jitguard import compile_guards

    x = torch.randn(3, 4)
    weights = []
    for fn in (jitguard.torch.TENSOR_MATCH, jitguard.torch.tensor_match(dynamic_dims=(0, 1))):
        check = compile_guards([LocalSource("a").make_guard(fn)], f_locals={"a": x}, arg_names=["a"])
        weights.append(rules.tensor_weight(check.leaves[0].params))
    assert weights == [8, 5]
