"""Shared fixtures. Every test starts and must end outside any compile or tracing context."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from _helpers import torch_installed
from jitguard import CompileContext, TracingContext
from jitguard._src import contexts

TORCH = torch_installed()
# Without torch the torch tests are not collected (their modules would import tests/torch as
# ``torch``); the header says so.
collect_ignore: list[str] = [] if TORCH else ["torch"]


def pytest_report_header() -> str:
    return "torch: installed" if TORCH else "torch: not installed, tests/torch/ skipped"


@pytest.fixture(autouse=True)
def _no_leaked_contexts() -> Iterator[None]:
    """Fail a test that leaves a compile or tracing context installed on this thread."""
    assert TracingContext.try_get() is None, "a previous test leaked a TracingContext"
    assert CompileContext.try_get() is None, "a previous test leaked a CompileContext"
    yield
    leaked = (TracingContext.try_get(), CompileContext.try_get())
    contexts._TLS.tracing_context = None
    contexts._TLS.compile_context = None
    assert leaked == (None, None), f"test leaked contexts: {leaked}"


@pytest.fixture(params=["c", "py"])
def dispatch_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a test with the C hot path on ("c", skipped when the extension is not built) and
    in pure Python ("py"): functions specialized inside the test get that dispatcher
    ([Note: The C hot path])."""
    from jitguard._src.cache import fast

    mode: str = request.param
    if mode == "c" and not fast.available():
        pytest.skip(f"the C hot path is not built: {fast.why_not()}")
    old = fast.set_enabled(mode == "c")
    try:
        yield mode
    finally:
        fast.set_enabled(old)
