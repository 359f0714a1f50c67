"""Seeded fuzz of ``jitguard.torch.compile(..., verify=True)``: over a thousand calls varying
shapes, dtypes, strides, requires_grad, global states (grad mode, autocast, default dtype,
deterministic algorithms) and module state (train/eval, an attribute, a hook). Every call
must agree with torch's own guard tree (no ``GuardMismatchError``) and with eager."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402

SEED = 20261203
LIMIT = 128  # every variant compiles (and is verified) instead of falling back


@pytest.fixture(autouse=True)
def _restore_global_state() -> Iterator[None]:
    """Put back every global state the fuzz changes."""
    grad = torch.is_grad_enabled()
    dtype = torch.get_default_dtype()
    deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        yield
    finally:
        torch.set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        torch.use_deterministic_algorithms(deterministic)


class Fuzz:
    """Calls a compiled function and eager under the same conditions; records what differs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.calls = 0
        self.mismatches: list[str] = []
        self.wrong: list[str] = []

    def check(self, what: str, compiled: Callable[[], Any], eager: Callable[[], Any]) -> None:
        self.calls += 1
        try:
            got = compiled()
        except jitguard.GuardMismatchError as e:
            self.mismatches.append(f"{self.name} call {self.calls} ({what}): {e}")
            return
        want = eager()
        try:
            torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
            assert got.requires_grad == want.requires_grad, "requires_grad differs"
        except AssertionError as e:
            self.wrong.append(f"{self.name} call {self.calls} ({what}): {str(e)[:200]}")

    def assert_clean(self, at_least: int) -> None:
        assert self.calls >= at_least
        assert not self.mismatches, "\n".join(self.mismatches[:10])
        assert not self.wrong, "\n".join(self.wrong[:10])


def _layout(rng: random.Random, dtype: Any, requires_grad: bool) -> tuple[str, Any]:
    kind = rng.choice(["contiguous", "transposed", "sliced", "taller", "expanded"])
    if kind == "contiguous":
        x = torch.randn(3, 4, dtype=dtype)
    elif kind == "transposed":
        x = torch.randn(4, 3, dtype=dtype).t()
    elif kind == "sliced":
        x = torch.randn(3, 8, dtype=dtype)[:, ::2]
    elif kind == "taller":
        x = torch.randn(rng.choice([5, 6, 7]), 4, dtype=dtype)
    else:
        x = torch.randn(1, 4, dtype=dtype).expand(3, 4)
    if requires_grad:
        x = x.detach().requires_grad_(True)
    return kind, x


def tensor_math(x: Any, y: Any) -> Any:
    return (x * 2 + y).relu() + x.sum(dim=0)


def test_verify_fuzz_tensors() -> None:
    """Shapes, dtypes, strides, requires_grad, grad mode and an int-or-tensor operand (a
    seeded pool of variants, so that each compiles once and is then hit many times)."""
    rng = random.Random(SEED)
    cf = jgt.compile(tensor_math, verify=True, recompile_limit=LIMIT)
    fuzz = Fuzz("tensor_math")
    variants = [
        (
            rng.choice([torch.float32, torch.float64]),
            rng.random() < 0.3,
            rng.random() < 0.8,
            rng.random() < 0.3,
            rng.random(),
        )
        for _ in range(14)
    ]
    for _ in range(500):
        dtype, requires_grad, grad, int_y, layout_seed = rng.choice(variants)
        kind, x = _layout(random.Random(layout_seed), dtype, requires_grad)
        y: Any = rng.choice([1, 2, 3]) if int_y else torch.randn(x.shape[1], dtype=dtype)
        what = f"{kind} {dtype} rg={requires_grad} grad={grad} y={type(y).__name__}"
        with torch.set_grad_enabled(grad):
            fuzz.check(what, lambda x=x, y=y: cf(x, y), lambda x=x, y=y: tensor_math(x, y))
    fuzz.assert_clean(500)


def global_reads(x: Any) -> Any:
    base = torch.ones(x.shape[0])  # default dtype
    out = (x @ x.t()).sum(dim=1) + base
    if torch.are_deterministic_algorithms_enabled():
        out = out + 1
    return out


def test_verify_fuzz_global_states() -> None:
    """Grad mode, CPU autocast, default dtype and deterministic algorithms, set at random."""
    rng = random.Random(SEED + 1)
    cf = jgt.compile(global_reads, verify=True, recompile_limit=LIMIT)
    fuzz = Fuzz("global_reads")
    x = torch.randn(3, 4)
    for _ in range(350):
        grad = rng.random() < 0.7
        autocast = rng.random() < 0.3
        default = rng.choice([torch.float32, torch.float64])
        deterministic = rng.random() < 0.3
        what = f"grad={grad} autocast={autocast} default={default} det={deterministic}"
        torch.set_default_dtype(default)
        torch.use_deterministic_algorithms(deterministic)
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
        with torch.set_grad_enabled(grad), ctx:
            fuzz.check(what, lambda: cf(x), lambda: global_reads(x))
        torch.set_default_dtype(torch.float32)
        torch.use_deterministic_algorithms(False)
    fuzz.assert_clean(350)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.scale = 1.0

    def forward(self, x: Any) -> Any:
        out = self.lin(x) * self.scale
        if self.training:
            out = out + 1
        return out


def test_verify_fuzz_module_changes() -> None:
    """train/eval, a float attribute, a forward hook added and removed, a weight replaced,
    a parameter's requires_grad flipped."""
    rng = random.Random(SEED + 2)
    net = Net()
    cf = jgt.compile(net, verify=True, recompile_limit=LIMIT)
    fuzz = Fuzz("Net")
    hook: Any = None
    weights = [torch.nn.Parameter(torch.randn(4, 4)) for _ in range(2)]
    for i in range(300):
        change = rng.choice(["none", "none", "train", "scale", "hook", "weight", "requires_grad"])
        if change == "train":
            net.train(not net.training)
        elif change == "scale":
            net.scale = rng.choice([1.0, 2.0, 0.5])
        elif change == "hook":
            if hook is None:
                factor = rng.choice([2.0, 3.0])
                hook = net.lin.register_forward_hook(lambda m, a, o, f=factor: o * f)
            else:
                hook.remove()
                hook = None
        elif change == "weight":
            net.lin.weight = weights[i % 2]
        elif change == "requires_grad":
            net.lin.bias.requires_grad_(not net.lin.bias.requires_grad)
        x = torch.randn(rng.choice([2, 3]), 4)
        what = f"{change} training={net.training} scale={net.scale} hook={hook is not None}"
        fuzz.check(what, lambda x=x: cf(x), lambda x=x: net(x))
    fuzz.assert_clean(300)
