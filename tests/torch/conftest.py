"""Fixtures for the torch tests (torch is imported inside them: a module without torch
skips itself with ``pytest.importorskip``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


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
