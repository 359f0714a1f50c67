"""Compile and trace identifiers: ``CompileId`` and ``TraceId``.

May import: errors.

# [Note: CompileId text form]
# The text form is what logs, traces and tools read, so it is the stable interface:
#   "<frame_id>/<frame_compile_id>"                 an ordinary compile
#   "!<compiled_autograd_id>"                       a compiled-autograd graph
#   "!<compiled_autograd_id>/<frame>/<compile>"     a frame compiled under it
# ``str`` and ``CompileId.from_string`` are exact inverses on these forms.
"""

from __future__ import annotations

import dataclasses
import re
from typing import NamedTuple, Optional

from .errors import InvalidCompileIdError

__all__ = ["CA_COMPILE_ID_PATTERN", "COMPILE_ID_PATTERN", "CompileId", "TraceId"]

# ``\Z`` rather than ``$``: ``$`` also matches before a trailing newline, so the
# specification's patterns accept "0/1\n". jitguard rejects it.
# ``re.ASCII``: ``\d`` would otherwise accept any Unicode digit ("\u0661/\u0662"), whose
# ``int`` is fine but whose ``str`` round trip is not.
COMPILE_ID_PATTERN = re.compile(r"^(?P<frame_id>\d+)/(?P<frame_compile_id>\d+)\Z", re.ASCII)
CA_COMPILE_ID_PATTERN = re.compile(
    r"^!(?P<compiled_autograd_id>\d+)(?:/(?P<frame_id>\d+)/(?P<frame_compile_id>\d+))?\Z",
    re.ASCII,
)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class CompileId:
    """Identifies one compiled graph program-wide. See [Note: CompileId text form].

    ``frame_id`` counts specialized frames (functions); ``frame_compile_id`` counts compiles of
    one frame, so it reads as "how many times has this function recompiled".
    """

    frame_id: Optional[int]
    frame_compile_id: Optional[int]
    compiled_autograd_id: Optional[int] = None

    def __str__(self) -> str:
        if self.compiled_autograd_id is not None:
            if (self.frame_id is None) != (self.frame_compile_id is None):
                raise AssertionError(
                    f"CompileId {self!r}: frame_id and frame_compile_id must both be set or both None"
                )
            if self.frame_id is None:
                return f"!{self.compiled_autograd_id}"
            return f"!{self.compiled_autograd_id}/{self.frame_id}/{self.frame_compile_id}"
        if self.frame_id is None or self.frame_compile_id is None:
            raise AssertionError(
                f"CompileId {self!r}: without compiled_autograd_id both frame ids must be set"
            )
        return f"{self.frame_id}/{self.frame_compile_id}"

    @classmethod
    def from_string(cls, compile_id: Optional[str]) -> Optional[CompileId]:
        """Parse the text form back into a ``CompileId`` (``None`` gives ``None``).

        Raises ``InvalidCompileIdError`` (a ``ValueError``) naming the string otherwise,
        including for a string with a trailing newline.
        """
        if compile_id is None:
            return None
        cause: Optional[Exception] = None
        if isinstance(compile_id, str):
            for pattern in (COMPILE_ID_PATTERN, CA_COMPILE_ID_PATTERN):
                match = pattern.match(compile_id)
                if match is not None:
                    try:
                        fields = {
                            k: None if v is None else int(v)
                            for k, v in match.groupdict().items()
                        }
                    except ValueError as e:  # more digits than int() accepts
                        cause = e
                        break
                    return cls(**fields)
        raise InvalidCompileIdError(
            f"Invalid compile_id {compile_id!r}: expected 'F/C', '!A' or '!A/F/C' with decimal ids"
        ) from cause


class TraceId(NamedTuple):
    """A ``CompileId`` plus the attempt: restarts of analysis within one compile count up
    from 0. Text form ``"0/1"`` for attempt 0, ``"0/1_2"`` otherwise."""

    compile_id: CompileId
    attempt: int

    def __str__(self) -> str:
        if self.attempt == 0:
            return str(self.compile_id)
        return f"{self.compile_id}_{self.attempt}"
