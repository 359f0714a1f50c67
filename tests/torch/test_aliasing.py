"""Aliasing between input tensors: NO_TENSOR_ALIASING (distinct storages), the
StorageOverlap environment expression (STORAGE_OVERLAP), DuplicateInputs on tensors."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import jitguard.torch as jgt  # noqa: E402
from jitguard import (  # noqa: E402
    DuplicateInputs,
    GuardCompileError,
    LocalSource,
    StorageOverlap,
    compile_guards,
)

X, Y, Z = LocalSource("x"), LocalSource("y"), LocalSource("z")


def no_alias(*frame: Any) -> Any:
    names = ["x", "y", "z"][: len(frame)]
    guard = jgt.no_tensor_aliasing_guard([LocalSource(n) for n in names])
    return compile_guards([guard], f_locals=dict(zip(names, frame, strict=True)), arg_names=names)


def test_distinct_tensors_hit() -> None:
    """Separately allocated tensors pass, again and again."""
    c = no_alias(torch.randn(3), torch.randn(3), torch.randn(3))
    assert c(torch.randn(3), torch.randn(3), torch.randn(3))


def test_same_tensor_twice_is_a_miss() -> None:
    """The same tensor in two slots fails, and the reason says so."""
    c = no_alias(torch.randn(3), torch.randn(3))
    a = torch.randn(3)
    assert not c(a, a)
    assert c.explain(a, a)[0].reason == (
        "no two of L['x'], L['y'] share storage failed: L['x'] is the same tensor as L['y']"
    )


def test_views_of_one_storage_are_a_miss() -> None:
    """Two views of one buffer alias even when their elements do not overlap."""
    c = no_alias(torch.randn(3), torch.randn(3), torch.randn(3))
    base = torch.randn(6)
    a, b = base[:3], base[3:]
    assert not c(a, torch.randn(3), b)
    assert c.explain(a, torch.randn(3), b)[0].reason.endswith("L['x'] shares storage with L['z']")


def test_two_source_form_is_one_comparison() -> None:
    """Two tensors compile to one storage-address inequality."""
    c = no_alias(torch.randn(2), torch.randn(2))
    line = next(ln for ln in c.source.splitlines() if "NO_TENSOR_ALIASING" in ln)
    assert "!=" in line and "len(" not in line


def test_building_on_aliased_inputs_is_refused() -> None:
    """Guards built from a frame where the inputs alias reject that frame."""
    a = torch.randn(3)
    with pytest.raises(GuardCompileError, match="share storage"):
        no_alias(a, a[:2])


def test_non_tensor_is_refused_at_build() -> None:
    """Every source must hold a tensor."""
    with pytest.raises(Exception, match="must hold a tensor"):
        no_alias(torch.randn(2), 3)


def test_needs_two_sources() -> None:
    """One source is not an aliasing guard."""
    with pytest.raises(Exception, match="at least two"):
        jgt.no_tensor_aliasing_guard([X])


@settings(max_examples=40, deadline=None)
@given(picks=st.lists(st.integers(0, 3), min_size=3, max_size=3))
def test_no_aliasing_generated_agrees_with_reference(picks: list[int]) -> None:
    """Random picks among shared and fresh storages: generated == reference == truth."""
    base = torch.randn(8)
    pool = [base[:2], base[4:6], torch.randn(2), torch.randn(2)]
    c = no_alias(torch.randn(2), torch.randn(2), torch.randn(2))
    values = [pool[i] for i in picks]
    storages = {torch._C._storage_address(v) for v in values}  # type: ignore[attr-defined]
    assert c(*values) == c.reference(*values) == (len(storages) == 3)


# ---- StorageOverlap ---------------------------------------------------------------------


def overlap_check(overlapping: list[Any], non_overlapping: list[Any], frame: dict[str, Any]) -> Any:
    expr = StorageOverlap(overlapping, non_overlapping)
    return compile_guards(env_exprs=[expr], f_locals=frame, arg_names=list(frame))


def test_storage_overlap_hit_and_miss() -> None:
    """Overlapping views stay overlapping, disjoint inputs stay disjoint."""
    base = torch.randn(10)
    frame = {"x": base[:6], "y": base[4:], "z": torch.randn(3)}
    c = overlap_check([X, Y], [Z], frame)
    b2 = torch.randn(10)
    assert c(b2[:6], b2[4:], torch.randn(3))
    assert not c(torch.randn(6), torch.randn(6), torch.randn(3))
    failure = c.explain(torch.randn(6), torch.randn(6), torch.randn(3))[0]
    assert failure.kind == "STORAGE_OVERLAP" and "now overlapping: (none)" in failure.reason


def test_storage_overlap_new_overlap_is_a_miss() -> None:
    """A non-overlapping input that now overlaps another is a miss."""
    base = torch.randn(10)
    c = overlap_check([X, Y], [Z], {"x": base[:6], "y": base[4:], "z": torch.randn(3)})
    b2 = torch.randn(10)
    assert not c(b2[:6], b2[4:], b2[5:8])
    assert "now overlapping: L['x'], L['y'], L['z']" in c.explain(b2[:6], b2[4:], b2[5:8])[0].reason


def test_same_storage_without_overlap_counts_as_non_overlapping() -> None:
    """Disjoint halves of one buffer do not overlap in memory."""
    base = torch.randn(10)
    c = overlap_check([], [X, Y], {"x": base[:5], "y": base[5:]})
    b2 = torch.randn(10)
    assert c(b2[:5], b2[5:]) and not c(b2[:6], b2[4:])
    assert jgt.overlapping_indices([b2[:6], b2[4:], torch.randn(2)]) == {0, 1}


def test_duplicate_inputs_on_tensors() -> None:
    """The core's DuplicateInputs handler works on tensors: same object required."""
    a = torch.randn(3)
    c = compile_guards(env_exprs=[DuplicateInputs(X, Y)], f_locals={"x": a, "y": a}, arg_names=["x", "y"])
    assert c(a, a) and not c(a, a.view(3))
