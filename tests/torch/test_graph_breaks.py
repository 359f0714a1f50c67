"""Graph breaks ([Note: Graph breaks]): a function Dynamo cannot capture as one graph gets
the graphs torch.compile makes of it, from Dynamo's frame path, with eager's results; torch's
guards decide there, and jitguard says so (log, stats, capture_info, explain)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch._dynamo.testing import CompileCounter  # noqa: E402

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402
from jitguard._src.torch.compiled import FRAME_PATH  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo", "restore_grad_mode")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))


def _graphs(make: Callable[[], Any], args: Callable[[], tuple[tuple[Any, ...], dict[str, Any]]],
            *, calls: int = 2, grads: bool = False) -> tuple[int, int]:
    """Run ``make()`` eagerly, under jitguard.torch.compile and under torch.compile (each on
    a fresh object, same seed), compare every result (and the gradients) with eager's, and
    give the graphs each compiler made, counted by one counting backend."""
    results: dict[str, Any] = {}
    counts: dict[str, int] = {}
    for who in ("eager", "jitguard", "torch"):
        torch._dynamo.reset()
        torch.manual_seed(0)
        obj = make()
        cnt = CompileCounter()
        call = obj if who == "eager" else (
            jgt.compile(obj, backend=cnt) if who == "jitguard" else torch.compile(obj, backend=cnt))
        outs = []
        for _ in range(calls):
            a, kw = args()
            out = call(*a, **kw)
            outs.append(out.loss if hasattr(out, "loss") else out)
        got: list[Any] = [o.detach() for o in outs]
        if grads:
            sum(o.sum() for o in outs).backward()
            got += [p.grad.clone() for p in obj.parameters()]
        results[who] = got
        counts[who] = cnt.frame_count
    for who in ("jitguard", "torch"):
        assert len(results[who]) == len(results["eager"])
        for g, w in zip(results[who], results["eager"], strict=True):
            torch.testing.assert_close(g, w)
    return counts["jitguard"], counts["torch"]


def _print_mid(x: Any) -> Any:
    y = x.sin()
    print("between the two graphs")
    return y.cos()


def _item_branch(x: Any) -> Any:
    y = x.sin()
    if y.sum().item() > 0:
        return y.cos()
    return y.tan()


def _tensor_if(x: Any) -> Any:
    y = x.sin()
    if y.sum() > 0:
        return y.cos()
    return y.tan()


def _x() -> tuple[tuple[Any, ...], dict[str, Any]]:
    return (torch.randn(4),), {}


@pytest.mark.parametrize("fn", [_print_mid, _item_branch, _tensor_if],
                         ids=["print", "item_branch", "tensor_if"])
def test_function_with_a_break_gets_torchs_graphs(fn: Callable[..., Any],
                                                  capsys: Any) -> None:
    """print(), a branch on .item(), an if on a tensor: eager's results, torch's graphs."""
    jg, tc = _graphs(lambda: fn, _x)
    assert jg >= tc >= 2


def _hooked() -> Any:
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    m.seen = {}

    def hook(mod: Any, inp: Any, out: Any) -> None:
        m.seen["mean"] = float(out.detach().mean())

    m[0].register_forward_hook(hook)
    return m


def test_forward_hook_reading_a_float_gets_torchs_graphs() -> None:
    """A forward hook reading float(out.mean()): eager's results and gradients, torch's
    graphs (one graph with .item() in it is not what torch.compile makes)."""
    jg, tc = _graphs(_hooked, lambda: ((torch.randn(3, 4),), {}), grads=True)
    assert jg >= tc >= 2


def test_gpt2_training_forward_with_labels() -> None:
    """GPT-2 in train mode with labels (its loss path logs: a break): eager's loss and
    gradients, as many graphs as torch.compile."""
    from bench._llm_models import build

    def make() -> Any:
        model, _ = build("gpt2", layers=2)
        model.train()
        model.config.dropout = 0.0
        for mod in model.modules():
            if isinstance(mod, torch.nn.Dropout):
                mod.p = 0.0
        return model

    def args() -> tuple[tuple[Any, ...], dict[str, Any]]:
        _, kwargs = build("gpt2", layers=2)
        return (), {**kwargs, "labels": kwargs["input_ids"]}

    jg, tc = _graphs(make, args, grads=True)
    assert jg >= tc >= 1


def test_compiler_disable_inside_compiled_code() -> None:
    """A torch.compiler.disable'd call inside the function runs eagerly between graphs."""
    @torch.compiler.disable
    def helper(y: Any) -> Any:
        return y * 2

    def f(x: Any) -> Any:
        return helper(x.sin()).cos()

    jg, tc = _graphs(lambda: f, _x)
    assert jg >= tc >= 1


def test_says_once_that_torchs_guards_decide(caplog: Any) -> None:
    """The warning is logged once per function, and stats, capture_info and explain say
    which layer serves the entry and why."""
    cnt = CompileCounter()
    cf = jgt.compile(_print_mid, backend=cnt)
    x = torch.randn(4)
    with caplog.at_level(logging.WARNING, logger="jitguard.torch"):
        for _ in range(3):
            torch.testing.assert_close(cf(x), _print_mid(x))
    said = [r for r in caplog.records if r.name == "jitguard.torch"]
    assert len(said) == 1 and "torch's guards (not jitguard's)" in said[0].getMessage()
    stats = cf.cache.stats()
    assert (stats.capture_failures, stats.frame_path, stats.backend_failures) == (1, 1, 0)
    (info,) = jgt.capture_info(cf).values()
    assert info.guard_layer == FRAME_PATH and "no guards of its own" in info.why
    assert len(info.pieces) == cnt.frame_count == 2
    assert all(p.compile_id and "/" in p.compile_id for p in info.pieces)
    report = jitguard.explain(cf)
    assert "torch (Dynamo's frame path)" in str(report)
    assert report.as_dict()["entries"][0]["guard_layer"]["layer"] == FRAME_PATH


def test_entries_before_the_break_keep_jitguards_guards() -> None:
    """A call that captures as one graph keeps a jitguard entry; the call that breaks gets
    the frame path; each layer is named, and both kinds of call stay equal to eager."""
    def f(x: Any, loud: bool) -> Any:
        y = x + 1
        if loud:
            print("loud")
        return y * 2

    cf = jgt.compile(f)
    x = torch.randn(3)
    for loud in (False, True, False, True):
        torch.testing.assert_close(cf(x, loud), f(x, loud))
    layers = sorted(i.guard_layer for i in jgt.capture_info(cf).values())
    assert layers == ["jitguard", FRAME_PATH]
    assert cf.cache.stats().entries == 2


def test_frame_path_follows_torchs_guards() -> None:
    """Under the frame path torch's guards recompile on a changed global and a new shape:
    never a stale result."""
    scale = {"k": 2.0}

    def f(x: Any) -> Any:
        y = x * scale["k"]
        torch._dynamo.graph_break()
        return y + scale["k"]

    cnt = CompileCounter()
    cf = jgt.compile(f, backend=cnt)
    for n, k in ((3, 2.0), (3, 5.0), (7, 5.0)):
        scale["k"] = k
        x = torch.randn(n)
        torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count >= 4


def test_fullgraph_still_raises_capture_error() -> None:
    """fullgraph=True: a graph break raises CaptureError, no frame path."""
    cf = jgt.compile(_print_mid, fullgraph=True)
    with pytest.raises(jitguard.CaptureError, match="fullgraph=True"):
        cf(torch.randn(4))
    assert cf.cache.stats().frame_path == 0


def test_fullgraph_keeps_item_in_the_graph() -> None:
    """fullgraph=True traces float(t) into the one graph, as torch.compile(fullgraph=True)."""
    def f(x: Any) -> Any:
        return x * float(x.sum())

    cnt = CompileCounter()
    cf = jgt.compile(f, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), f(x))
    assert cnt.frame_count == 1
    assert [i.guard_layer for i in jgt.capture_info(cf).values()] == ["jitguard"]


def test_an_op_failing_on_fake_tensors_raises_as_torch_compile_raises(
        caplog: pytest.LogCaptureFixture) -> None:
    """A call whose operation fails ((4,) + (3,)) raises torch's TorchRuntimeError, a
    RuntimeError, as torch.compile does: no frame path, no warning, no entry, the argument
    freed; the next good call compiles as usual."""
    import gc
    import weakref

    from torch._dynamo.exc import TorchRuntimeError

    cf = jgt.compile(lambda x: x + torch.ones(3), backend="eager")
    cf(torch.ones(3))
    bad = torch.ones(4)
    ref = weakref.ref(bad)
    with caplog.at_level(logging.WARNING):
        with pytest.raises(TorchRuntimeError, match="size of tensor"):
            cf(bad)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    del bad
    gc.collect()
    assert ref() is None
    info = jitguard.cache_of(cf)
    assert (info.stats().entries, info.stats().frame_path) == (1, 0)
    assert torch.equal(cf(torch.zeros(3)), torch.ones(3))
