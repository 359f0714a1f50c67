"""Which dims of a compile are symbolic: ``mark_dynamic`` and automatic dynamic shapes.

May import: jitguard._src.guards, jitguard._src.torch.tensor_match, torch.

# [Note: Dynamic shapes in jitguard.torch.compile]
# ``dynamic=False``: every size is static; every entry serves one set of sizes.
# ``dynamic=True``: every dim of every tensor argument, and every int argument, is symbolic
# from the first compile.
# ``dynamic=None`` (the default), automatic dynamic: the first entry is static. When a call
# misses and some existing entry rejected it only because of sizes (its failing guards are
# size/stride mismatches of tensors that otherwise match, and shape guards),
# the dims whose sizes differ from what that entry expected become dynamic for the
# function, and the new entry is traced with those dims symbolic, so it serves every size
# its shape guards allow. An int that changes value becomes dynamic the same way (the
# cache's automatic dynamic, [Note: Automatic dynamic]).
# ``mark_dynamic(t, dim)`` makes ``dim`` symbolic whenever ``t`` is compiled for (unless
# ``dynamic=False``); it takes effect at the next compile that sees ``t``, so mark before the
# first call (an entry that already serves ``t`` is not revisited).
# 0/1 specialization, as torch does it: a dim whose size is 0 or 1 when traced is never made
# symbolic (it is static, and the entry serves only that size), and a symbolic size is
# assumed >= 2, which is a guard. So sizes 0 and 1 always get entries of their own.
# Unlike torch, sizes that happen to be equal when traced get distinct symbols (no duck
# sizing); equalities the trace relies on are guarded either way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Union

import torch

from ..guards import Source
from .tensor_match import TensorMatch

__all__ = ["mark_dynamic", "marked_dims", "size_only_changes"]

_MARK = "_jitguard_dynamic_dims"
_TENSOR_MATCH = TensorMatch()


def mark_dynamic(t: torch.Tensor, dim: Union[int, Iterable[int]]) -> torch.Tensor:
    """Make ``dim`` (an int or several) of ``t`` symbolic whenever a function compiled with
    ``jitguard.torch.compile`` is compiled for ``t`` (see [Note: Dynamic shapes in
    jitguard.torch.compile]). Returns ``t``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"mark_dynamic needs a tensor, got {type(t).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    marked = set(getattr(t, _MARK, ()))
    for d in dims:
        if type(d) is not int or not -t.dim() <= d < t.dim():
            raise IndexError(f"mark_dynamic: {d!r} is not a dim of a {t.dim()}-d tensor")
        marked.add(d % t.dim())
    setattr(t, _MARK, frozenset(marked))
    return t


def marked_dims(t: torch.Tensor) -> frozenset[int]:
    """The dims ``mark_dynamic`` marked on ``t``."""
    return frozenset(getattr(t, _MARK, ()))


def size_only_changes(
    entries: Sequence[Any], values: tuple[Any, ...], tensors: Mapping[Source, Any]
) -> dict[Source, set[int]]:
    """Per tensor source, the dims whose sizes differ from what an entry expected, over the
    entries that reject ``values`` only for sizes: every failure is a TENSOR_MATCH or
    TENSORS_MATCH mismatch in sizes or strides of a tensor that otherwise matches, or a
    shape guard. ``tensors`` are the call's tensors by source."""
    out: dict[Source, set[int]] = {}
    for entry in entries:
        changed: dict[Source, set[int]] = {}
        try:
            failures = entry.check.explain(*values)
        except Exception:
            continue
        leaves_by_guard = {id(lf.guard): lf for lf in entry.check.leaves if lf.guard is not None}
        size_only = bool(failures)
        for failure in failures:
            if failure.kind == "SHAPE_ENV":  # a size outside the entry's shape guards
                continue
            leaf = leaves_by_guard.get(id(failure.guard)) if failure.guard is not None else None
            if leaf is None or leaf.kind.name not in ("TENSOR_MATCH", "TENSORS_MATCH"):
                size_only = False
                break
            if leaf.kind.name == "TENSOR_MATCH":
                pairs = [(leaf.sources[0], leaf.params)]
            else:
                pairs = list(zip(leaf.sources, leaf.params.specs, strict=True))
            for source, spec in pairs:
                value = tensors.get(source)
                if value is not None and _TENSOR_MATCH.holds(value, spec):
                    continue
                dims = _size_only_dims(spec, value)
                if dims is None:
                    size_only = False
                    break
                changed.setdefault(source, set()).update(dims)
            if not size_only:
                break
        if size_only:
            for source, dims in changed.items():
                out.setdefault(source, set()).update(dims)
    return out


def _size_only_dims(spec: Any, value: Any) -> Optional[set[int]]:
    """The dims whose size differs, if ``value`` fails the TENSOR_MATCH ``spec`` only in
    sizes or strides (same type, dtype, device, flags, rank); else None."""
    if not isinstance(value, torch.Tensor):
        return None
    try:
        same = (
            type(value) is spec.type.get()
            and value.dtype is spec.dtype
            and value.device == spec.device
            and bool(value.requires_grad) is spec.requires_grad
            and value.layout is spec.layout
            and value.dim() == len(spec.sizes)
        )
    except Exception:
        return None
    if not same:
        return None
    return {i for i, (a, e) in enumerate(zip(value.shape, spec.sizes, strict=True)) if e is not None and a != e}
