"""The assumptions made after tracing: shape guards (``ShapeGuard``, with where they arose,
``SLoc``) and environment expressions relating several inputs (``GuardEnvExpr``:
``DuplicateInputs``, ``StorageOverlap``). Re-exported by ``guards``.

May import: stacks, guards (for types only).
"""

from __future__ import annotations

import dataclasses
import traceback
from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union

from .stacks import format_frame

if TYPE_CHECKING:
    from .guards import Source

__all__ = ["DuplicateInputs", "GuardEnvExpr", "SLoc", "ShapeGuard", "StorageOverlap"]


@dataclasses.dataclass(frozen=True)
class SLoc:
    """Where a shape guard came from: the framework location and, when known, the user's."""

    framework_loc: Optional[Union[traceback.FrameSummary, str]]
    maybe_user_loc: Optional[str]

    def __str__(self) -> str:
        floc = format_frame(self.framework_loc)
        if self.maybe_user_loc is not None:
            return f"{self.maybe_user_loc} ({floc})"
        return f"({floc})"


class ShapeGuard(NamedTuple):
    """A boolean (sympy) expression over symbolic sizes that must hold, and where it arose."""

    expr: Any
    sloc: SLoc
    size_oblivious: bool


@dataclasses.dataclass(frozen=True)
class GuardEnvExpr:
    """Base of the guards that arise after tracing (from an AOT stage): facts relating
    several inputs rather than one source's value."""


@dataclasses.dataclass(frozen=True)
class DuplicateInputs(GuardEnvExpr):
    """Two inputs that were deduplicated: they must be the same object on every call."""

    input_source_a: Source
    input_source_b: Source

    def __post_init__(self) -> None:
        if self.input_source_a == self.input_source_b:
            raise AssertionError(
                f"DuplicateInputs needs two different sources, got {self.input_source_a!r} twice"
            )


@dataclasses.dataclass(frozen=True)
class StorageOverlap(GuardEnvExpr):
    """Inputs that share storage. ``overlapping_sources`` do (or may) overlap another input;
    ``non_overlapping_sources`` certainly overlap none."""

    overlapping_sources: list[Source]
    non_overlapping_sources: list[Source]
