"""Soundness of jitguard.torch.compile: over many seeded random calls (shapes, sizes 0 and
1, dtypes, strides from transposes and slices, requires_grad, grad mode), a compiled call
returns exactly what calling the function eagerly returns (values, dtype, shape, strides,
requires_grad), or raises when eager raises. Bounded: at most ``CALLS`` calls or
``TIME_BUDGET_S`` seconds (about 10 s here)."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard.torch as jgt  # noqa: E402
from jitguard import cache_of  # noqa: E402

CALLS = 500
# another seed: JITGUARD_SOUNDNESS_SEED=<n> pytest tests/torch/test_soundness.py
SEED = int(os.environ.get("JITGUARD_SOUNDNESS_SEED", "20260612"))
TIME_BUDGET_S = 40.0


def f_affine(x: Any) -> Any:
    return x * 2 + 1


def f_broadcast(x: Any, y: Any) -> Any:
    return x + y


def f_reduce(x: Any) -> Any:
    return x.sum(0) + x.shape[0]


def f_gram(x: Any) -> Any:
    return x.t() @ x if x.dim() == 2 else x * x


def f_branch(x: Any, n: int) -> Any:
    return x * n if x.shape[0] > 2 else x - n


def f_flatten(x: Any) -> Any:
    return x.reshape(-1).cumsum(0)


def f_softmax(x: Any) -> Any:
    return x.softmax(-1)


def f_where(x: Any) -> Any:
    return torch.where(x > 0, x, -x).mean()


def f_cat(x: Any, y: Any) -> Any:
    return torch.cat([x, y], 0)


def f_diff(x: Any) -> Any:
    return x[1:] - x[:-1]


def f_expand(x: Any) -> Any:
    return x.unsqueeze(0).expand(2, *x.shape).sum(0)


def f_inplace(x: Any) -> Any:
    y = x.clone()
    y.add_(1)
    return y * x


def f_contig(x: Any) -> Any:
    return x.contiguous().view(-1) if x.is_contiguous() else x.transpose(0, -1).contiguous()


def f_offset(x: Any) -> Any:
    return x * x.storage_offset() + x.narrow(0, 0, 1).sum()


def f_nograd(x: Any) -> Any:
    with torch.no_grad():
        y = x * 2
    return y + x


def f_pair(x: Any, y: Any) -> Any:
    return (x.mean(), (y * 3).amax(0), x.shape[-1] + y.dim())


# (function, number of tensor args, floating point only)
FUNCTIONS: list[tuple[Callable[..., Any], int, bool]] = [
    (f_affine, 1, False), (f_broadcast, 2, False), (f_reduce, 1, False), (f_gram, 1, True),
    (f_branch, 1, False), (f_flatten, 1, False), (f_softmax, 1, True), (f_where, 1, True),
    (f_cat, 2, False), (f_diff, 1, False), (f_expand, 1, False), (f_inplace, 1, False),
    (f_contig, 1, False), (f_offset, 1, False), (f_nograd, 1, False), (f_pair, 2, True),
]
DTYPES = [torch.float32, torch.float64, torch.int64]
SIZES = [0, 1, 2, 3, 5]


pytestmark = pytest.mark.usefixtures("restore_grad_mode")


def random_tensor(
    rng: random.Random, shape: list[int], dtype: Any, float_only: bool, data: int
) -> Any:
    if float_only and not dtype.is_floating_point:
        dtype = torch.float32
    # build a larger base, then view it: transposes, slices with steps and offsets
    kind = rng.choice(["plain", "plain", "transpose", "step", "offset"])
    base_shape = list(shape)
    if kind == "step" and shape:
        base_shape[0] = shape[0] * 2
    if kind == "offset" and shape:
        base_shape[0] = shape[0] + 1
    if kind == "transpose" and len(shape) >= 2:
        base_shape[0], base_shape[-1] = base_shape[-1], base_shape[0]
    gen = torch.Generator().manual_seed(data)
    if dtype.is_floating_point:
        t = torch.randn(base_shape, generator=gen, dtype=dtype)
    else:
        t = torch.randint(-5, 6, base_shape, generator=gen, dtype=dtype)
    if kind == "step" and shape:
        t = t[::2]
    elif kind == "offset" and shape:
        t = t[1:]
    elif kind == "transpose" and len(shape) >= 2:
        t = t.transpose(0, -1)
    assert list(t.shape) == shape
    if dtype.is_floating_point and rng.random() < 0.3:
        t.requires_grad_(True)
    return t


def outcome(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return ("ok", fn(*args))
    except Exception as e:
        if os.environ.get("JITGUARD_SOUNDNESS_DEBUG"):
            print(e)
        return ("raised", type(e))


def assert_same(got: Any, want: Any, what: str) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), what
        assert (got.dtype, got.shape, got.requires_grad) == (want.dtype, want.shape, want.requires_grad), what
        if want.numel() > 1:
            assert got.stride() == want.stride(), what
        torch.testing.assert_close(got.detach(), want.detach(), rtol=0, atol=0, equal_nan=True, msg=what)
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), what
        for g, w in zip(got, want, strict=True):
            assert_same(g, w, what)
    else:
        assert type(got) is type(want) and got == want, what


class Template:
    """How one call's tensors look (data is fresh each time): reused with some probability,
    so that calls hit entries, static and dynamic, as well as make new ones."""

    def __init__(self, rng: random.Random, n_tensors: int, float_only: bool) -> None:
        ndim = rng.choice([1, 2, 2, 3])
        self.shape = [rng.choice(SIZES) for _ in range(ndim)]
        self.dtype = rng.choice(DTYPES)
        self.shapes = [
            list(self.shape) if rng.random() < 0.7 else [rng.choice(SIZES) for _ in range(ndim)]
            for _ in range(n_tensors)
        ]
        self.seed = rng.randrange(1 << 30)
        self.float_only = float_only

    def resized(self, rng: random.Random) -> Template:
        """The same template with other sizes in one dim (what automatic dynamic is for)."""
        other = object.__new__(Template)
        other.__dict__.update(self.__dict__)
        d = rng.randrange(len(self.shape))
        n = rng.choice([2, 3, 4, 6, 7])
        other.shapes = [list(s) for s in self.shapes]
        for s in other.shapes:
            if d < len(s) and s[d] == self.shape[d]:
                s[d] = n
        other.shape = list(self.shape)
        other.shape[d] = n
        return other

    def make(self, rng: random.Random) -> tuple[Any, ...]:
        layout = random.Random(self.seed)
        return tuple(
            random_tensor(layout, shape, self.dtype, self.float_only, data=rng.randrange(1 << 30))
            for shape in self.shapes
        )


def test_hits_never_differ_from_eager() -> None:
    rng = random.Random(SEED)
    compiled: dict[tuple[int, Any], Any] = {}
    templates: dict[tuple[int, Any], list[Template]] = {}
    start = time.perf_counter()
    calls = raised = 0
    for i in range(CALLS):
        if time.perf_counter() - start > TIME_BUDGET_S:
            break
        index = rng.randrange(len(FUNCTIONS))
        fn, n_tensors, float_only = FUNCTIONS[index]
        mode = rng.choice([None, None, True, False])
        key = (index, mode)
        if key not in compiled:
            compiled[key] = jgt.compile(fn, dynamic=mode, recompile_limit=64)
            templates[key] = []
        cf = compiled[key]
        pool = templates[key]
        r = rng.random()
        if not pool or r < 0.15:
            pool.append(Template(rng, n_tensors, float_only))
        elif r < 0.35:
            pool.append(rng.choice(pool).resized(rng))
        args: tuple[Any, ...] = rng.choice(pool).make(rng)
        if fn is f_branch:
            args = (*args, rng.choice([1, 2, 3]))
        grad = rng.random() < 0.85
        torch.set_grad_enabled(grad)
        want = outcome(fn, args)
        got = outcome(cf, args)
        what = (
            f"call {i}: {fn.__name__} dynamic={mode} grad={grad} args="
            + ", ".join(
                f"{tuple(a.shape)}/{a.stride()}/{a.dtype}/rg={a.requires_grad}"
                if isinstance(a, torch.Tensor) else repr(a) for a in args
            )
        )
        assert got[0] == want[0], f"{what}: eager {want}, compiled {got}"
        if want[0] == "ok":
            assert_same(got[1], want[1], what)
        else:
            raised += 1
        calls += 1
    totals = [cache_of(cf).stats() for cf in compiled.values()]
    hits = sum(s.hits for s in totals)
    compiles = sum(s.compiles for s in totals)
    dynamic_hits = sum(
        e.hits
        for cf in compiled.values()
        for e in cache_of(cf).entries()
        if jgt.capture_info(cf)[e.compile_id].dynamic
    )
    assert calls >= 200, f"only {calls} calls within the time budget"
    # the loop must exercise hits, of dynamic entries too, not only compiles
    assert hits >= calls // 3, (hits, compiles, calls)
    assert dynamic_hits >= calls // 10, (dynamic_hits, hits, calls)
    assert raised < calls // 2
