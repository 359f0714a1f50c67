"""Backend failures ([Note: Backend failures]): a backend that raises, or returns something
that is not callable, raises ``BackendCompilerFailed`` from the call (backend and function
named, the cause chained), is never cached, is counted apart from capture failures, and
falls back eagerly only under ``suppress_errors``, as torch.compile does."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import jitguard  # noqa: E402
import jitguard.torch as jgt  # noqa: E402
from jitguard._src.torch.compiled import RUNS_EAGERLY  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture
def suppress_errors() -> Iterator[None]:
    """torch._dynamo.config.suppress_errors on for the test."""
    with torch._dynamo.config.patch(suppress_errors=True):
        yield


def exploding(gm: Any, example_inputs: Any) -> Any:
    raise ValueError("backend exploded")


def returns_none(gm: Any, example_inputs: Any) -> Any:
    return None


def _sin(x: Any) -> Any:
    return x.sin() + 1


def _breaks(x: Any) -> Any:
    y = x.sin()
    torch._dynamo.graph_break()
    return y + 1


@pytest.mark.parametrize("fullgraph", [False, True], ids=["default", "fullgraph"])
def test_raising_backend_raises_from_the_call(fullgraph: bool) -> None:
    """A backend that raises: BackendCompilerFailed naming backend and function, the
    backend's error as cause; torch's own class catches it too; never a CaptureError."""
    cf = jgt.compile(_sin, backend=exploding, fullgraph=fullgraph, isolate_recompiles=True)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as info:
        cf(torch.randn(3))
    err = info.value
    assert isinstance(err, jgt.BackendCompilerFailed) and isinstance(err, jitguard.JitGuardError)
    assert not isinstance(err, jitguard.CaptureError)
    assert "backend='exploding' raised" in str(err) and "_sin" in str(err)
    assert "ValueError: backend exploded" in str(err)
    assert isinstance(err.__cause__, ValueError) and err.inner_exception is err.__cause__
    assert err.backend_name == "exploding"


def test_backend_failure_is_not_cached_and_counted_apart() -> None:
    """Each call compiles again and fails again (nothing cached, as torch.compile), counted
    as backend failures, not capture failures."""
    cf = jgt.compile(_sin, backend=exploding, isolate_recompiles=True)
    for _ in range(2):
        with pytest.raises(jgt.BackendCompilerFailed):
            cf(torch.randn(3))
    stats = cf.cache.stats()
    assert (stats.backend_failures, stats.capture_failures, stats.entries) == (2, 0, 0)


def test_backend_returning_none_names_the_backend() -> None:
    """A backend that returns None: an error naming the backend, not a bare TypeError."""
    cf = jgt.compile(_sin, backend=returns_none, isolate_recompiles=True)
    with pytest.raises(jgt.BackendCompilerFailed, match="backend='returns_none'") as info:
        cf(torch.randn(3))
    assert "not callable" in str(info.value) and isinstance(info.value.__cause__, TypeError)


@pytest.mark.usefixtures("suppress_errors")
def test_suppress_errors_falls_back_eagerly_and_says_so(caplog: Any) -> None:
    """suppress_errors=True: eager's result, a warning once, the entry named as eager."""
    cf = jgt.compile(_sin, backend=exploding, isolate_recompiles=True)
    x = torch.randn(3)
    with caplog.at_level(logging.WARNING, logger="jitguard.torch"):
        for _ in range(3):
            torch.testing.assert_close(cf(x), _sin(x))
    said = [r.getMessage() for r in caplog.records if r.name == "jitguard.torch"]
    assert len(said) == 1 and "suppress_errors" in said[0] and "exploding" in said[0]
    assert cf.cache.stats().backend_failures == 1
    (info,) = jgt.capture_info(cf).values()
    assert info.guard_layer == RUNS_EAGERLY


@pytest.mark.usefixtures("suppress_errors")
def test_fullgraph_backend_failure_raises_even_suppressed() -> None:
    """fullgraph=True promises one compiled graph: a backend failure raises."""
    cf = jgt.compile(_sin, backend=exploding, fullgraph=True, isolate_recompiles=True)
    with pytest.raises(jgt.BackendCompilerFailed):
        cf(torch.randn(3))


def test_backend_failure_under_the_frame_path_is_torchs() -> None:
    """A function with a break whose backend raises: torch's frame path raises torch's
    BackendCompilerFailed, naming the user's backend."""
    cf = jgt.compile(_breaks, backend=exploding, isolate_recompiles=True)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="exploding"):
        cf(torch.randn(3))
