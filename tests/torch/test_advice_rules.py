"""Tests for jitguard._src.torch.advice_rules: the recompile advisor's torch rules (tensor
sizes, dtype, device, requires_grad, a module's training flag, a scalar Dynamo pinned) and the
built-in rules as jitguard.torch.compile meets them (a global, a closure variable, a module
instance). Each test runs with both dispatchers."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard as jg  # noqa: E402
import jitguard.torch as jgt  # noqa: E402
from jitguard import RecompileLimitWarning, cache_of  # noqa: E402

pytestmark = pytest.mark.usefixtures("dispatch_mode", "fresh_dynamo")

MODE = "a"


def _one(f: Any) -> Any:
    advice = cache_of(f).advice()
    assert len(advice) == 1, advice
    return advice[0]


# ---- a tensor dim that keeps changing ------------------------------------------------------


def test_dim_changing_with_dynamic_false() -> None:
    """dynamic=False and a changing batch dim: mark_dynamic(x, 0) or dynamic=True."""

    @jgt.compile(dynamic=False)
    def f(x: Any) -> Any:
        return x.sin()

    for n in range(2, 7):
        f(torch.ones(n, 3))
    a = _one(f)
    assert (a.source, a.rule, a.evidence.recompiles) == ("L['x']", "tensor-size", 4)
    assert a.evidence.values == ("(2, 3)", "(3, 3)", "(4, 3)", "(5, 3)", "(6, 3)")
    assert "dim 0" in a.message
    assert a.fix is not None and "torch._dynamo.mark_dynamic(x, 0)" in a.fix
    assert "jitguard.torch.compile(f, dynamic=True)" in a.fix


def test_dim_changing_after_mark_static_and_the_fix_works() -> None:
    """mark_static on a changing dim churns; mark_dynamic, as advised, compiles once."""

    @jgt.compile
    def f(x: Any) -> Any:
        return x * 2

    for n in range(2, 6):
        x = torch.ones(3, n)
        torch._dynamo.mark_static(x, 1)
        f(x)
    a = _one(f)
    assert (a.source, a.rule) == ("L['x']", "tensor-size") and "dim 1" in a.message
    assert a.fix is not None and "torch._dynamo.mark_dynamic(x, 1)" in a.fix

    @jgt.compile(dynamic=False)
    def g(x: Any) -> Any:
        return x * 2

    for n in range(2, 6):
        x = torch.ones(3, n)
        torch._dynamo.mark_dynamic(x, 1)
        g(x)
    assert cache_of(g).advice() == [] and cache_of(g).stats().compiles == 1


def test_dim_with_automatic_dynamic_is_no_churn() -> None:
    """The default (automatic dynamic shapes) recompiles once: no advice."""

    @jgt.compile
    def f(x: Any) -> Any:
        return x.cos()

    for n in range(2, 8):
        f(torch.ones(n))
    assert cache_of(f).advice() == []
    assert cache_of(f).advice(threshold=1) == []  # the newest entry's dim is dynamic


def test_dim_changing_in_specialize() -> None:
    """specialize guards sizes exactly: the fix is dynamic=["x"]."""

    def h(x: Any) -> Any:
        return x

    f = jg.specialize(h)
    for n in range(2, 6):
        f(torch.ones(n))
    a = _one(f)
    assert (a.source, a.rule, a.fix) == ("L['x']", "tensor-size",
                                          'jitguard.specialize(h, dynamic=["x"])')


# ---- a global or closure value baked in ----------------------------------------------------


def test_global_baked_in() -> None:
    """A module global Dynamo baked in, changing: pass it as an argument."""
    global MODE

    @jgt.compile
    def f(x: Any) -> Any:
        return x * 2 if MODE == "a" else x * 3

    try:
        for mode in "abcd":
            MODE = mode
            f(torch.ones(3))
    finally:
        MODE = "a"
    a = _one(f)
    assert (a.source, a.rule, a.evidence.recompiles) == ("G['MODE']", "baked-in", 3)
    assert a.evidence.values == ("'a'", "'b'", "'c'", "'d'")
    assert a.fix is not None and "def f(x, ..., MODE)" in a.fix


def test_closure_value_baked_in() -> None:
    """A closure variable Dynamo baked in (it names it L['k']), changing: pass it as an
    argument."""
    k = "a"

    @jgt.compile
    def f(x: Any) -> Any:
        return x * 2 if k == "a" else x

    for k in "abcd":  # noqa: B007  (f reads k from the closure)
        f(torch.ones(3))
    a = _one(f)
    assert (a.source, a.rule) == ("L['k']", "baked-in")
    assert "closure variable k" in a.message and a.fix is not None and ", k)" in a.fix


def test_attribute_of_an_argument_baked_in() -> None:
    """A str attribute of a config argument, baked in and changing: pass it on its own."""

    class Cfg:
        mode = "a"

    @jgt.compile
    def f(x: Any, cfg: Any) -> Any:
        return x * 2 if cfg.mode == "a" else x

    cfg = Cfg()
    for mode in "abcd":
        cfg.mode = mode
        f(torch.ones(2), cfg)
    a = _one(f)
    assert (a.source, a.rule) == ("L['cfg'].mode", "baked-in")
    assert a.fix is not None and a.fix.endswith("f(x, ..., cfg.mode)")


# ---- a scalar argument ---------------------------------------------------------------------


def test_dynamo_pinned_int() -> None:
    """dynamic=False pins an int argument by value: compile with dynamic=True."""

    @jgt.compile(dynamic=False)
    def f(x: Any, n: int) -> Any:
        return x * n

    for n in range(5):
        f(torch.ones(3), n)
    a = _one(f)
    assert (a.source, a.rule, a.fix) == ("L['n']", "pinned-scalar",
                                          "jitguard.torch.compile(f, dynamic=True)")


def test_list_length_under_dynamo() -> None:
    """A list of tensors whose length changes: pass one stacked tensor."""

    @jgt.compile
    def f(xs: Any) -> Any:
        return sum(xs)

    for n in range(1, 6):
        f([torch.ones(2)] * n)
    a = _one(f)
    assert (a.source, a.rule) == ("L['xs']", "length")
    assert a.fix == "f(..., torch.stack(xs))  # one tensor: its length is a dim"


# ---- an object created on each call --------------------------------------------------------


def test_new_module_each_call_in_specialize() -> None:
    """A new nn.Linear per call, guarded by identity: create it once (its parameters fold
    into it)."""
    f = jg.specialize(lambda x, m: m(x))
    keep = [torch.nn.Linear(3, 3) for _ in range(4)]
    for m in keep:
        f(torch.ones(3), m)
    a = _one(f)
    assert (a.source, a.rule) == ("L['m']", "new-object")
    assert a.fix is not None and a.fix.startswith("m = Linear(...)")


# ---- dtype, device, requires_grad ----------------------------------------------------------


def test_dtype_flip_flops() -> None:
    """A new dtype on each call: cast once at the call site."""

    @jgt.compile
    def f(x: Any) -> Any:
        return x.sin()

    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        f(torch.ones(3, dtype=dtype))
    a = _one(f)
    assert (a.source, a.rule, a.evidence.recompiles) == ("L['x']", "tensor-dtype", 3)
    assert a.fix == "x = x.to(torch.float32)  # once, at the call site"


def test_requires_grad_flip_flops() -> None:
    """requires_grad alternating, with one entry kept: set it once at the call site."""
    f = jg.specialize(lambda x: x, maxsize=1)
    for i in range(6):
        f(torch.ones(3, requires_grad=i % 2 == 0))
    a = _one(f)
    assert (a.source, a.rule) == ("L['x']", "tensor-requires-grad")
    assert a.evidence.values == ("True", "False") and a.evidence.recompiles == 5
    assert a.fix == "x.requires_grad_(True)  # once, at the call site"


def test_device_flip_flops() -> None:
    """The device alternating (cpu, meta), with one entry kept: move it once."""
    f = jg.specialize(lambda x: x, maxsize=1)
    for i in range(5):
        f(torch.ones(3, device="cpu" if i % 2 == 0 else "meta"))
    a = _one(f)
    assert (a.source, a.rule) == ("L['x']", "tensor-device")
    assert a.fix == 'x = x.to("cpu")  # once, at the call site'


# ---- training -----------------------------------------------------------------------------


def test_training_flipping_gets_no_advice() -> None:
    """train()/eval() alternating: each mode compiles once, no advice, even where another
    source churns at the same time."""
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout())
    cm = jgt.compile(model)
    for i in range(8):
        model.train(i % 2 == 0)
        cm(torch.ones(2, 3))
    assert cache_of(cm).advice() == []
    model2 = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout())
    cm2 = jgt.compile(model2, dynamic=False)
    for i in range(6):
        model2.train(i % 2 == 0)
        cm2(torch.ones(2 + i // 2, 3))
    a = _one(cm2)
    assert a.source == "L['input']" and a.rule == "tensor-size"
    assert a.fix is not None and "jitguard.torch.compile(model, dynamic=True)" in a.fix


def test_training_flipping_in_specialize_with_one_entry() -> None:
    """Even when eviction makes training recompile on every flip, it gets no advice."""
    m = torch.nn.Linear(3, 3)
    f = jg.specialize(lambda m, x: m(x), maxsize=1)
    for i in range(6):
        m.train(i % 2 == 0)
        f(m, torch.ones(3))
    assert cache_of(f).stats().compiles == 6
    assert cache_of(f).advice() == []


# ---- the recompile limit -------------------------------------------------------------------


def test_limit_warning_names_the_dim() -> None:
    """jitguard.torch.compile at its recompile limit: the warning ends with the advice."""

    @jgt.compile(dynamic=False)
    def f(x: Any) -> Any:
        return x.sin()

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(2, 13):
            f(torch.ones(n))
    (warning,) = [x for x in w if issubclass(x.category, RecompileLimitWarning)]
    text = str(warning.message)
    assert "Advice:" in text and "Recompile limit (8) hit: L['x'] changed its size" in text
    assert "torch._dynamo.mark_dynamic(x, 0)" in text
    a = _one(f)
    assert a.evidence.limit == 8 and a.evidence.recompiles == 7
