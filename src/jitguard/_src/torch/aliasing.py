"""Aliasing between input tensors: NO_TENSOR_ALIASING (no two share storage) and
STORAGE_OVERLAP (the ``StorageOverlap`` environment expression).

May import: jitguard._src.errors, jitguard._src.guards, jitguard._src.compiler.builder,
jitguard._src.compiler.kinds, torch.

# [Note: Tensor aliasing guards]
# A graph compiled for inputs that do not alias may be wrong for inputs that do (a mutation
# of one is visible through the other), so aliasing is part of what a cache entry assumes.
#   * NO_TENSOR_ALIASING: no two of the guarded tensors share a storage. Storage identity is
#     the address of the StorageImpl (``torch._C._storage_address``, one call per tensor),
#     so two views of one buffer alias even when their bytes do not overlap. torch's
#     NO_TENSOR_ALIASING only compares the tensor objects; this is stricter, and object
#     identity alone is the core's NO_ALIASING kind. Use it for the non-parameter input
#     tensors (torch leaves parameters out, ``skip_no_tensor_aliasing_guards_on_parameters``).
#   * STORAGE_OVERLAP: built from ``StorageOverlap(overlapping, non_overlapping)``, which the
#     AOT stage emits after deciding which inputs may overlap. It holds when the inputs that
#     overlap some other one (in memory, not just storage) are exactly the ``overlapping``
#     ones. Tensors are grouped by storage; within a group torch's own
#     ``compute_overlapping_tensors`` decides, as it did when the expression was made.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from ..compiler.builder import GuardBuilder, Leaf
from ..compiler.kinds import EmitContext, RelationalKind, create_fn_for
from ..errors import GuardKindError
from ..guards import Source, StorageOverlap

__all__ = [
    "NoTensorAliasing",
    "StorageOverlapKind",
    "no_tensor_aliasing_guard",
    "overlapping_indices",
    "storage_overlap_handler",
]

_storage_address = torch._C._storage_address  # type: ignore[attr-defined]


def _storages(values: Sequence[Any]) -> list[int]:
    return [_storage_address(v) for v in values]


class NoTensorAliasing(RelationalKind):
    """No two of the tensors share storage
    (``functools.partial(NO_TENSOR_ALIASING, others=(source, ...))``)."""

    name = "NO_TENSOR_ALIASING"

    def extra_sources(self, guard: Any, **options: Any) -> tuple[Any, ...]:
        if set(options) != {"others"} or not options["others"]:
            raise GuardKindError(
                f"NO_TENSOR_ALIASING on {guard.name} takes others= (a non-empty tuple of "
                f"sources), got {sorted(options)}"
            )
        return tuple(options["others"])

    def expect(self, value: Any, guard: Any, **options: Any) -> None:
        for v in value:
            if not isinstance(v, torch.Tensor):
                raise GuardKindError(
                    f"NO_TENSOR_ALIASING on {guard.name}: every source must hold a tensor, "
                    f"found {type(v).__name__}"
                )
        return None

    def holds(self, value: Any, params: None) -> bool:
        addresses = _storages(value)
        return len(set(addresses)) == len(addresses)

    def emit(self, var: Any, params: None, ctx: EmitContext) -> str:
        addr = ctx.const(_storage_address, "storage_address")
        if len(var) == 2:
            return f"{addr}({var[0]}) != {addr}({var[1]})"
        reads = ", ".join(f"{addr}({v})" for v in var)
        return f"len({{{reads}}}) == {ctx.const(len(var), 'n')}"

    def code(self, name: Any, params: None) -> str:
        return f"no two of {', '.join(name)} share storage"

    def reason(self, name: Any, value: Any, params: None) -> str:
        seen: dict[int, str] = {}
        for n, v in zip(name, value, strict=False):
            try:
                address = _storage_address(v)
            except Exception as e:
                return f"{self.code(name, params)} failed: {n} has no storage ({e})"
            if address in seen:
                same = "is the same tensor as" if _same(name, value, seen[address], n) else "shares storage with"
                return f"{self.code(name, params)} failed: {seen[address]} {same} {n}"
            seen[address] = n
        return f"{self.code(name, params)} failed"


def _same(names: Sequence[str], values: Sequence[Any], a: str, b: str) -> bool:
    by_name = dict(zip(names, values, strict=False))
    return by_name[a] is by_name[b]


def overlapping_indices(tensors: Sequence[Any]) -> set[int]:
    """Indices of the tensors that overlap (in memory) another one of ``tensors``."""
    from torch._C._dynamo.guards import compute_overlapping_tensors

    groups: dict[int, list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault(_storage_address(t), []).append(i)
    out: set[int] = set()
    for members in groups.values():
        if len(members) < 2:
            continue
        found = compute_overlapping_tensors([tensors[i] for i in members], symbolic=False)
        out.update(members[j] for j in found)
    return out


def _overlap_ok(n_overlapping: int, *tensors: Any) -> bool:
    return overlapping_indices(tensors) == set(range(n_overlapping))


class StorageOverlapKind(RelationalKind):
    """The inputs that overlap another input are exactly the first ``n`` sources (the
    ``overlapping_sources`` of a ``StorageOverlap``); built by the environment handler."""

    name = "STORAGE_OVERLAP"

    def extra_sources(self, guard: Any, **options: Any) -> tuple[Any, ...]:
        raise GuardKindError(
            "STORAGE_OVERLAP is built from a StorageOverlap environment expression "
            "(compile_guards(env_exprs=[StorageOverlap(...)])), not from a guard"
        )

    def holds(self, value: Any, params: int) -> bool:
        return _overlap_ok(params, *value)

    def emit(self, var: Any, params: int, ctx: EmitContext) -> str:
        fn = ctx.const(_overlap_ok, "storage_overlap")
        return f"{fn}({ctx.const(params, 'n')}, {', '.join(var)})"

    def code(self, name: Any, params: int) -> str:
        over, rest = name[:params], name[params:]
        return (
            f"storage overlap: {', '.join(over) or '(none)'} overlap; "
            f"{', '.join(rest) or '(none)'} overlap nothing"
        )

    def reason(self, name: Any, value: Any, params: int) -> str:
        try:
            found = overlapping_indices(value)
        except Exception as e:
            return f"{self.code(name, params)} failed: {type(e).__name__}: {e}"
        now = [name[i] for i in sorted(found)]
        return f"{self.code(name, params)} failed: now overlapping: {', '.join(now) or '(none)'}"


STORAGE_OVERLAP = StorageOverlapKind()


def storage_overlap_handler(builder: GuardBuilder, expr: StorageOverlap) -> None:
    """``StorageOverlap`` -> one STORAGE_OVERLAP leaf over all its sources."""
    sources = (*expr.overlapping_sources, *expr.non_overlapping_sources)
    if len(sources) < 2:
        return
    for s in sources:
        value = builder.get(s)
        if not isinstance(value, torch.Tensor):
            raise GuardKindError(
                f"StorageOverlap: {s.name()} holds a {type(value).__name__}, not a tensor"
            )
    builder.add_leaf(Leaf(STORAGE_OVERLAP, sources, len(expr.overlapping_sources)))


def no_tensor_aliasing_guard(sources: Sequence[Source]) -> Any:
    """The guard that no two of ``sources`` (two or more tensors) share storage."""
    if len(sources) < 2:
        raise GuardKindError("NO_TENSOR_ALIASING needs at least two sources")
    kind_fn = create_fn_for("NO_TENSOR_ALIASING")
    first, *others = sources
    return first.make_guard(functools.partial(kind_fn, others=tuple(others)))
