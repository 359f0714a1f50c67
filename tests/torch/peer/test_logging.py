"""Port of the recompile-log scenarios of PyTorch's ``test/dynamo/test_logging.py`` onto
``jitguard.torch.compile``, under their upstream names. Upstream reads torch's
``recompiles`` log artifact; here the same text is read from the ``jitguard.recompiles``
logger (one message per recompile: the failed guards, each with the user stack it was
installed at, and a hint naming a closure variable). The other upstream tests there are about
torch's own artifacts (bytecode, inductor, graph breaks, side effects) and have no
counterpart in a guard layer."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard.torch as jgt  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    """Every scenario starts and ends with Dynamo's caches empty (as torch's TestCase)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """What upstream's ``make_logging_test(recompiles=True)`` collects: the recompile log."""
    caplog.set_level(logging.INFO, logger="jitguard.recompiles")
    return caplog


def _text(records: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in records.records if r.name == "jitguard.recompiles")


def _line(fn: Any, offset: int) -> int:
    return fn.__code__.co_firstlineno + offset


def test_recompiles(records: pytest.LogCaptureFixture) -> None:
    """A recompile after a list shrinks logs the failed guard and the user stack, outermost
    frame first, down to the line that read the list."""

    def outmost_fn(x: Any, ys: Any, zs: Any) -> Any:
        return outer_fn(x, ys, zs)

    def outer_fn(x: Any, ys: Any, zs: Any) -> Any:
        return fn(x, ys, zs)

    def fn(x: Any, ys: Any, zs: Any) -> Any:
        return inner(x, ys, zs)

    def inner(x: Any, ys: Any, zs: Any) -> Any:
        for y, z in zip(ys, zs):  # noqa: B905 (upstream's loop, unequal lengths on purpose)
            x += y * z
        return x

    ys = [1.0, 2.0, 3.0]
    zs = [3.0]
    x = torch.tensor([1.0])

    fn_opt = jgt.compile(outmost_fn, backend="eager")
    fn_opt(x, ys, zs)
    fn_opt(x, ys[:1], zs)

    record_str = re.sub(r'"[^"]*"', "[file_path]", _text(records))
    assert "len(ys) == 3 failed: got 1" in record_str
    expected = f"""\
    - User stack trace:
    -   File [file_path], line {_line(outmost_fn, 1)}, in outmost_fn
    -     return outer_fn(x, ys, zs)
    -   File [file_path], line {_line(outer_fn, 1)}, in outer_fn
    -     return fn(x, ys, zs)
    -   File [file_path], line {_line(fn, 1)}, in fn
    -     return inner(x, ys, zs)
    -   File [file_path], line {_line(inner, 1)}, in inner
    -     for y, z in zip(ys, zs):"""
    assert expected in record_str, record_str


def test_recompiles_closure_variable_hint(records: pytest.LogCaptureFixture) -> None:
    """A guard on a closure cell names the closure variable it holds."""

    def make_cl(n1: int, n2: int) -> Any:
        def inner(x: Any) -> Any:
            return x + n1 + n2

        return inner

    def fn(cl: Any, x: Any) -> Any:
        return cl(x)

    opt = jgt.compile(fn, backend="eager")
    opt(make_cl(0, 1), torch.ones(3))
    opt(make_cl(0, 2), torch.ones(3))

    assert '(HINT: guard on "n2")' in _text(records), _text(records)


def test_recompiles_nested_closure_variable_hint(records: pytest.LogCaptureFixture) -> None:
    """Through two closures, the hint names the innermost closure variable, and the reason
    shows the whole path."""

    def make_inner_fn(inner_val: int) -> Any:
        def inner(x: Any) -> Any:
            return x + inner_val

        return inner

    def make_outer_fn(outer_val: int, inner_fn: Any) -> Any:
        def outer(x: Any) -> Any:
            return inner_fn(x) * outer_val

        return outer

    class BlockMask:
        def __init__(self, mask_mod: Any) -> None:
            self.mask_mod = mask_mod

    def fn(block_mask: Any, x: Any) -> Any:
        return block_mask.mask_mod(x)

    opt = jgt.compile(fn, backend="eager")
    opt(BlockMask(make_outer_fn(2, make_inner_fn(10))), torch.ones(3))
    opt(BlockMask(make_outer_fn(2, make_inner_fn(20))), torch.ones(3))

    record_str = _text(records)
    assert '(HINT: guard on "inner_val")' in record_str, record_str
    assert "cell_contents.__closure__" in record_str


def test_recompiles_closure_variable_attribute_hint(records: pytest.LogCaptureFixture) -> None:
    """A guard on an attribute of a closure variable names the variable and the path."""

    class Transform:
        def __init__(self, scale: int) -> None:
            self.scale = scale

        def __call__(self, x: Any) -> Any:
            return x * self.scale

    def make_fn(transform: Any) -> Any:
        def fn(x: Any) -> Any:
            return transform(x)

        return fn

    def outer(inner_fn: Any, x: Any) -> Any:
        return inner_fn(x)

    opt = jgt.compile(outer, backend="eager")
    opt(make_fn(Transform(2)), torch.ones(3))
    opt(make_fn(Transform(3)), torch.ones(3))

    assert '(HINT: guard on "transform".scale)' in _text(records), _text(records)
