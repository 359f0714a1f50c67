"""Fake-mode detection and the higher-order-op caches, for torch.

May import: jitguard._src.contexts, torch.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch.utils import _pytree as pytree

from ..contexts import HopSubgraphCache, InvokeSubgraphCache, integration_hooks

__all__ = ["active_fake_mode", "detect_fake_mode", "install_hooks"]


def _dispatch_fake_modes() -> list[Any]:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return [m for m in reversed(_get_current_dispatch_mode_stack()) if isinstance(m, FakeTensorMode)]


def active_fake_mode() -> Optional[Any]:
    modes = _dispatch_fake_modes()
    return modes[0] if modes else None


def detect_fake_mode(inputs: Any, ctx_mode: Optional[Any]) -> Optional[Any]:
    """Candidates in priority order: the tracing context's mode, active modes (innermost
    first), then the modes of fake tensors among the flattened inputs (tensor subclasses
    unwrapped). All must be one object."""
    from torch._subclasses.fake_tensor import FakeTensor, get_plain_tensors
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    found: list[tuple[Any, str, int]] = []
    if ctx_mode is not None:
        found.append((ctx_mode, "tracing context", 0))
    found.extend((m, "active fake mode", i) for i, m in enumerate(_dispatch_fake_modes()))
    for i, leaf in enumerate(pytree.tree_leaves(inputs)):
        if isinstance(leaf, FakeTensor):
            found.append((leaf.fake_mode, "fake tensor input", i))
        if is_traceable_wrapper_subclass(leaf):
            plain: list[Any] = []
            get_plain_tensors(leaf, out=plain)
            fakes = [t for t in plain if isinstance(t, FakeTensor)]
            found.extend((t.fake_mode, f"subclass input {i}", j) for j, t in enumerate(fakes))
    if not found:
        return None
    mode, desc1, i1 = found[0]
    for other, desc2, i2 in found[1:]:
        if other is not mode:
            raise AssertionError(
                f"fake mode ({mode}) from {desc1} {i1} doesn't match mode ({other}) from "
                f"{desc2} {i2}\n\nfake mode from {desc1} {i1} allocated at:\n"
                f"{getattr(mode, 'stack', '?')}\nfake mode from {desc2} {i2} allocated at:\n"
                f"{getattr(other, 'stack', '?')}"
            )
    return mode


def hop_caches() -> dict[Any, HopSubgraphCache]:
    from torch._higher_order_ops.invoke_subgraph import invoke_subgraph

    return {invoke_subgraph: InvokeSubgraphCache()}


def install_hooks() -> None:
    integration_hooks.detect_fake_mode = detect_fake_mode
    integration_hooks.active_fake_mode = active_fake_mode
    integration_hooks.hop_caches = hop_caches


del torch  # imported above so that importing this module fails fast without torch
