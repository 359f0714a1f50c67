"""Fixtures for the torch tests (torch is imported inside them: a module without torch
skips itself with ``pytest.importorskip``). Every torch test runs with verify mode on
(``JITGUARD_VERIFY=1``): each ``jitguard.torch.compile`` call is checked against torch's own
guard tree ([Note: Verify mode])."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("JITGUARD_VERIFY", "1")


@pytest.fixture
def restore_grad_mode() -> Iterator[None]:
    """Put back torch's grad mode whatever the test does (modules that need it name it in
    ``pytestmark``)."""
    import torch

    enabled = torch.is_grad_enabled()
    try:
        yield
    finally:
        torch.set_grad_enabled(enabled)


@pytest.fixture
def fresh_dynamo() -> Iterator[None]:
    """Dynamo's caches empty before and after the test (``torch._dynamo.reset()``), as torch's
    own TestCase does (modules that need it name it in ``pytestmark``)."""
    import torch

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
