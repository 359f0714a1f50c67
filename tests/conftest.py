"""Shared fixtures. Every test starts and must end outside any compile or tracing context."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from _helpers import redis_or_skip, torch_installed
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
    from jitguard._src.dispatch import fast

    mode: str = request.param
    if mode == "c" and not fast.available():
        pytest.skip(f"the C hot path is not built: {fast.why_not()}")
    old = fast.set_enabled(mode == "c")
    try:
        yield mode
    finally:
        fast.set_enabled(old)


@pytest.fixture
def store_dir(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh store directory as ``JITGUARD_CACHE_DIR``, with every other store variable
    unset (and the process's default stores forgotten)."""
    from jitguard._src.store import tiers

    for name in ("JITGUARD_STORE", "JITGUARD_REDIS_URL", "JITGUARD_CACHE_KEY",
                 "JITGUARD_CACHE_MAX_BYTES", "JITGUARD_REDIS_TIMEOUT", "JITGUARD_REDIS_PREFIX"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "jitguard-cache"
    monkeypatch.setenv("JITGUARD_CACHE_DIR", str(path))
    monkeypatch.setattr(tiers, "_shared", {})
    return path


@pytest.fixture
def redis_prefix() -> Iterator[tuple[str, str]]:
    """(URL, key prefix) on the test Redis, the prefix unique to the test; its keys are
    deleted afterwards. Skips without Redis (fails with ``JITGUARD_REQUIRE_REDIS=1``)."""
    import uuid

    import redis

    url = redis_or_skip()
    prefix = f"jitguard-test:{uuid.uuid4().hex[:12]}"
    yield url, prefix
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A local TCP server that accepts connections and never answers (a hung Redis)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()
