"""The root sources: those read straight from the frame (``L['x']``, ``G['cfg']``, ...) and
those that name a value no frame holds (the shape environment, global state, ephemerals).
Re-exported by ``sources``; [Note: Source protocol] there says how sources work.

May import: errors, guards.
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from .errors import SourceTypeError, UnreadableSourceError
from .guards import FrameSlot, GuardSource, Source, source_dataclass

__all__ = [
    "BackwardStateSource",
    "ConstantSource",
    "EphemeralSource",
    "GlobalSource",
    "GlobalStateSource",
    "LocalSource",
    "RandomValueSource",
    "ShapeEnvSource",
    "SyntheticLocalSource",
    "Unreadable",
]

@source_dataclass
class LocalSource(Source):
    """A local variable of the guarded frame: ``L['x']``.

    ``is_input`` (the value is an argument of the frame) is metadata and does not take part
    in equality, so two sources for the same place are the same source.
    """

    local_name: str
    is_input: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.local_name, str):
            raise SourceTypeError(f"LocalSource needs a str name, got {self.local_name!r}")

    def __eq__(self, other: object) -> bool:
        return type(other) is LocalSource and other.local_name == self.local_name

    def __hash__(self) -> int:
        return hash(("L", self.local_name))

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL

    def frame_slot(self) -> FrameSlot:
        return ("L", self.local_name)


@source_dataclass
class GlobalSource(Source):
    """A global of the guarded frame's module: ``G['cfg']``."""

    global_name: str

    def __post_init__(self) -> None:
        if not isinstance(self.global_name, str):
            raise SourceTypeError(f"GlobalSource needs a str name, got {self.global_name!r}")

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def guard_source(self) -> GuardSource:
        return GuardSource.GLOBAL

    def frame_slot(self) -> FrameSlot:
        return ("G", self.global_name)


@source_dataclass
class ConstantSource(Source):
    """A constant installed as a global under ``source_name``; it cannot be guarded."""

    source_name: str

    def name(self) -> str:
        return self.source_name

    def guard_source(self) -> GuardSource:
        return GuardSource.CONSTANT

    def frame_slot(self) -> FrameSlot:
        return ("G", self.source_name)


@source_dataclass
class RandomValueSource(Source):
    """The ``random_call_index``-th value a JIT pre-drew for a random call; the JIT passes it
    in the frame locals as ``random_value_<index>``."""

    random_call_index: int

    def name(self) -> str:
        return f"random_value_{self.random_call_index}"

    def guard_source(self) -> GuardSource:
        return GuardSource.RANDOM_VALUE

    def frame_slot(self) -> FrameSlot:
        return ("L", self.name())


@source_dataclass
class SyntheticLocalSource(Source):
    """A value the JIT made itself and keeps in the frame locals under ``local_name``.
    Sub-guards (attributes, items) on it are not allowed."""

    local_name: str

    def name(self) -> str:
        return f"SYNTHETIC_LOCAL[{self.local_name!r}]"

    def guard_source(self) -> GuardSource:
        return GuardSource.SYNTHETIC_LOCAL

    def frame_slot(self) -> FrameSlot:
        return ("L", self.local_name)


class Unreadable(Source):
    """Base of the sources that name something with no value in a frame: ``get_value``
    raises ``UnreadableSourceError``, and ``frame_slot`` is None. Set ``_what``."""

    _what: ClassVar[str] = "this source"

    def get_value(self, f_locals: Any, f_globals: Any) -> Any:
        raise UnreadableSourceError(
            f"{type(self).__name__} names {self._what}, which has no value in a frame; "
            f"only guard kinds that read no value (GLOBAL_STATE, SHAPE_ENV) may use it"
        )


@source_dataclass
class ShapeEnvSource(Unreadable):
    """The shape environment: the anchor of SHAPE_ENV guards."""

    _what = "the shape environment"

    def name(self) -> str:
        return ""

    def guard_source(self) -> GuardSource:
        return GuardSource.SHAPE_ENV


@source_dataclass
class GlobalStateSource(Unreadable):
    """Ambient process state (grad mode and the like): the anchor of GLOBAL_STATE guards."""

    _what = "ambient global state"

    def name(self) -> str:
        return ""

    def guard_source(self) -> GuardSource:
        return GuardSource.GLOBAL


@source_dataclass
class BackwardStateSource(Unreadable):
    """State carried to a backward pass."""

    _what = "backward state"

    def name(self) -> str:
        return ""

    def guard_source(self) -> GuardSource:
        return GuardSource.BACKWARD_STATE


@source_dataclass
class EphemeralSource(Unreadable):
    """A value that exists only during tracing: ``<ephemeral: desc>``."""

    desc: Optional[str] = None
    _what = "a value that exists only while tracing"

    def name(self) -> str:
        return f"<ephemeral{': ' + self.desc if self.desc is not None else ''}>"

    def guard_source(self) -> GuardSource:
        return GuardSource.EPHEMERAL

    def is_ephemeral(self) -> bool:
        return True
