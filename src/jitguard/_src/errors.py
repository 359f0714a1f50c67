"""The error hierarchy: one root, ``JitGuardError``; each subclass also inherits the builtin
it specializes, so ``except ValueError`` keeps working where the specification raised one.

May import: nothing from jitguard.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ArtifactError",
    "CaptureError",
    "EnvironmentVariableWarning",
    "GuardCompileError",
    "GuardKindError",
    "GuardMismatchError",
    "GuardSchemaError",
    "InvalidCompileIdError",
    "JitGuardError",
    "LargeGuardSetWarning",
    "NoCompileContextError",
    "NoTracingContextError",
    "RecompileError",
    "RecompileLimitError",
    "RecompileLimitWarning",
    "RestartCompile",
    "SourceError",
    "SourceTypeError",
    "StoreError",
    "StoreWarning",
    "UnreadableSourceError",
]


class JitGuardError(Exception):
    """Root of every error jitguard raises on purpose."""


class InvalidCompileIdError(JitGuardError, ValueError):
    """A string is not the text form of a ``CompileId``."""


class SourceError(JitGuardError, ValueError):
    """A source was built from arguments that cannot name a value (a dotted attribute,
    a key with no literal form, a base that allows no sub-guards)."""


class SourceTypeError(SourceError, TypeError):
    """A source was given an argument of the wrong type (a name that is not a str, a base
    that is not a Source): a ``TypeError`` too, as a builtin constructor would raise."""


class UnreadableSourceError(JitGuardError, LookupError):
    """A source names something that has no value in a frame (a shape env, an ephemeral)."""


class GuardKindError(JitGuardError, TypeError):
    """A guard kind was given a value or a source it cannot guard."""


class GuardCompileError(JitGuardError, ValueError):
    """A set of guards cannot be compiled into a check function."""


class GuardSchemaError(JitGuardError, ValueError):
    """A guard-set document that cannot be read, or a guard set that cannot be compiled from
    one ([Note: Guard set schema]); the message names the guard and what to do."""


class NoCompileContextError(JitGuardError, RuntimeError, AssertionError):
    """``CompileContext.get()`` was called outside ``compile_context``. Also an
    ``AssertionError``: what the specification raises there, so code written against it
    catches this too."""


class NoTracingContextError(JitGuardError, RuntimeError):
    """``TracingContext.get()`` was called outside ``tracing``."""


# ---- the specializing cache ----------------------------------------------------------


class RecompileError(JitGuardError, RuntimeError):
    """A specialized function would have recompiled where recompiling is forbidden
    (``no_recompiles()``, ``error_on_recompile=True``). ``record`` is the
    ``RecompileRecord`` of the refused recompile (``record.reasons()``)."""

    def __init__(self, message: str, record: Any = None) -> None:
        super().__init__(message)
        self.record = record


class RecompileLimitError(RecompileError):
    """A specialized function reached its recompile limit with ``on_limit="raise"``."""


class RecompileLimitWarning(UserWarning):
    """A specialized function reached its recompile limit and now runs uncompiled on a miss
    (a warning, not an error: the call still returns the right result)."""


class LargeGuardSetWarning(UserWarning):
    """A compile made more checks than ``jitguard.config.large_guard_set``; every call that
    reaches its entry runs them all (see [Note: Large guard sets])."""


class RestartCompile(JitGuardError):
    """Raised by a compiler to start its attempt again from a fresh tracing context (a
    request to the cache, not a failure: it never reaches the caller unless the compiler
    restarts more than ``max_restarts`` times).

    ``dynamic`` and ``static`` (parameter names or sources) change how the next attempt
    guards those arguments, and stay in force for the function's later compiles.
    """

    def __init__(
        self, reason: str = "", *, dynamic: Any = (), static: Any = (),
    ) -> None:
        super().__init__(reason or "restart requested")
        self.reason = reason
        # Parameter names become ``LocalSource``s where the cache reads these
        # (``cache.request.as_source``): this module imports nothing from jitguard.
        self.dynamic = tuple(dynamic)
        self.static = tuple(static)


class CaptureError(JitGuardError, RuntimeError):
    """``jitguard.torch.compile(..., fullgraph=True)``: TorchDynamo could not capture the
    function as one graph (the message names the graph break)."""


class GuardMismatchError(JitGuardError, AssertionError):
    """Verify mode: jitguard's check and torch's own guard tree disagree about a call (the
    message gives both explanations)."""


class StoreError(JitGuardError, RuntimeError):
    """The persistent store cannot be opened as asked (a Redis URL without redis-py, a key
    file others can read, an unusable cache directory). Faults while a store is in use are
    never raised: they are ``StoreWarning``s, and the function compiles instead."""


class StoreWarning(UserWarning):
    """A stored entry was refused (bad signature, corrupt, stale) or a tier failed (disk
    full, Redis down or slow): the function compiles instead, and the result is right."""


class ArtifactError(JitGuardError, ValueError):
    """A compiled artifact cannot be stored, or a stored one cannot be used in this process;
    the message says why (a backend torch cannot serialize, code changed since it was
    stored, ...)."""


class EnvironmentVariableWarning(UserWarning):
    """A ``JITGUARD_*`` environment variable holds a value it does not take: its default
    is used instead ([Note: Environment variables] in jitguard/_src/env.py)."""


# [Note: Public submodules] (in ``jitguard``): a class says the module users reach it by, so
# a traceback or repr prints ``jitguard.GuardCompileError``; pickle finds it there too.
for _name in __all__:
    globals()[_name].__module__ = "jitguard"
del _name
