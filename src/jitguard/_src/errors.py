"""The error hierarchy: one root, ``JitGuardError``; each subclass also inherits the builtin
it specializes, so ``except ValueError`` keeps working where the specification raised one.

May import: nothing from jitguard.
"""

from __future__ import annotations

__all__ = [
    "CaptureError",
    "GuardCompileError",
    "GuardMismatchError",
    "GuardKindError",
    "InvalidCompileIdError",
    "JitGuardError",
    "NoCompileContextError",
    "NoTracingContextError",
    "SourceError",
    "UnreadableSourceError",
]


class JitGuardError(Exception):
    """Root of every error jitguard raises on purpose."""


class InvalidCompileIdError(JitGuardError, ValueError):
    """A string is not the text form of a ``CompileId``."""


class SourceError(JitGuardError, ValueError):
    """A source was built from arguments that cannot name a value (a dotted attribute,
    a key with no literal form, a base that allows no sub-guards)."""


class UnreadableSourceError(JitGuardError, LookupError):
    """A source names something that has no value in a frame (a shape env, an ephemeral)."""


class GuardKindError(JitGuardError, TypeError):
    """A guard kind was given a value or a source it cannot guard."""


class GuardCompileError(JitGuardError, ValueError):
    """A set of guards cannot be compiled into a check function."""


class NoCompileContextError(JitGuardError, RuntimeError):
    """``CompileContext.get()`` was called outside ``compile_context``."""


class NoTracingContextError(JitGuardError, RuntimeError):
    """``TracingContext.get()`` was called outside ``tracing``."""


class CaptureError(JitGuardError, RuntimeError):
    """``jitguard.torch.compile(..., fullgraph=True)``: TorchDynamo could not capture the
    function as one graph (the message names the graph break)."""


class GuardMismatchError(JitGuardError, AssertionError):
    """Verify mode: jitguard's check and torch's own guard tree disagree about a call (the
    message gives both explanations)."""
