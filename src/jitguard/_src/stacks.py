"""Cheap stack capture, formatted only on demand.

May import: nothing from jitguard.

# [Note: Cheap stack capture]
# Guards are installed by the thousand while tracing, and almost none of their stacks are
# ever shown. Capture therefore keeps only (code object, instruction offset) pairs, walking
# ``frame.f_back``: no line number computed, no source line read, no ``FrameSummary`` built,
# no frame kept alive. Line numbers come from ``code.co_lines()`` and source lines from
# ``linecache`` in ``format()``/``summary()``, i.e. only when a message is actually
# produced, like a captured traceback.
"""

from __future__ import annotations

import sys
import traceback
from types import CodeType
from typing import Optional, Union

__all__ = ["CapturedStack", "format_frame"]


class CapturedStack:
    """A stack captured as (code, instruction offset) pairs, oldest first."""

    __slots__ = ("_frames",)

    def __init__(self, frames: tuple[tuple[CodeType, int], ...]) -> None:
        self._frames = frames

    @classmethod
    def extract(cls, *, skip: int = 0, limit: Optional[int] = None) -> CapturedStack:
        """Capture the caller's stack; ``skip`` drops that many more innermost frames."""
        frame = sys._getframe(1 + skip)
        out: list[tuple[CodeType, int]] = []
        append = out.append
        while frame is not None and (limit is None or len(out) < limit):
            append((frame.f_code, frame.f_lasti))
            frame = frame.f_back  # type: ignore[assignment]
        out.reverse()
        return cls(tuple(out))

    def __len__(self) -> int:
        return len(self._frames)

    def summary(self) -> traceback.StackSummary:
        """The stack as a ``traceback.StackSummary`` (source lines read now)."""
        return traceback.StackSummary.from_list(
            [
                traceback.FrameSummary(code.co_filename, _line_of(code, lasti), code.co_name)
                for code, lasti in self._frames
            ]
        )

    def lines(self) -> list[tuple[str, int, str]]:
        """(filename, line number, function name) per frame, oldest first; reads no file."""
        return [(c.co_filename, _line_of(c, lasti), c.co_name) for c, lasti in self._frames]

    def format(self) -> list[str]:
        """Lines in the form of ``traceback.format_list``."""
        return self.summary().format()

    def __repr__(self) -> str:
        return f"<CapturedStack of {len(self._frames)} frames>"


def _line_of(code: CodeType, lasti: int) -> int:
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line if line is not None else code.co_firstlineno
    return code.co_firstlineno


def format_frame(frame: Union[traceback.FrameSummary, str, None], *, line: bool = False) -> str:
    """``file:line in name`` for a frame summary (a string is returned as it is)."""
    if frame is None:
        return ""
    if isinstance(frame, str):
        return frame
    text = f"{frame.filename}:{frame.lineno} in {frame.name}"
    if line and frame.line:
        text += f"\n    {frame.line.strip()}"
    return text
