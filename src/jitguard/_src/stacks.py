"""Cheap stack capture, formatted only on demand.

May import: nothing from jitguard.

# [Note: Cheap stack capture]
# Guards are installed by the thousand while tracing, and almost none of their stacks are
# ever shown. Capture therefore keeps only (code object, line number) pairs, walking
# ``frame.f_back`` with no source lines read and no ``FrameSummary`` built. Reading files
# (through ``linecache``) happens in ``format()``/``summary()``, i.e. only when a message
# is actually produced, like a captured traceback.
"""

from __future__ import annotations

import sys
import traceback
from types import CodeType
from typing import Optional, Union

__all__ = ["CapturedStack", "format_frame"]


class CapturedStack:
    """A stack captured as (code, line) pairs, oldest first."""

    __slots__ = ("_frames",)

    def __init__(self, frames: tuple[tuple[CodeType, int], ...]) -> None:
        self._frames = frames

    @classmethod
    def extract(cls, *, skip: int = 0, limit: Optional[int] = None) -> CapturedStack:
        """Capture the caller's stack; ``skip`` drops that many more innermost frames."""
        frame = sys._getframe(1 + skip)
        out: list[tuple[CodeType, int]] = []
        while frame is not None and (limit is None or len(out) < limit):
            out.append((frame.f_code, frame.f_lineno or 0))
            frame = frame.f_back  # type: ignore[assignment]
        out.reverse()
        return cls(tuple(out))

    def __len__(self) -> int:
        return len(self._frames)

    def summary(self) -> traceback.StackSummary:
        """The stack as a ``traceback.StackSummary`` (source lines read now)."""
        return traceback.StackSummary.from_list(
            [
                traceback.FrameSummary(code.co_filename, line, code.co_name)
                for code, line in self._frames
            ]
        )

    def format(self) -> list[str]:
        """Lines in the form of ``traceback.format_list``."""
        return self.summary().format()

    def __repr__(self) -> str:
        return f"<CapturedStack of {len(self._frames)} frames>"


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
