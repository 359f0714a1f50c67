"""Errors and warnings: one root, ``JitGuardError``; each subclass also inherits the
builtin it specializes (docs: API, Errors and warnings). Each class's ``__module__`` is
``jitguard``, where it is also importable, so tracebacks print ``jitguard.GuardCompileError``.

Re-exports only; the code lives in ``jitguard._src``. Every name here is also importable
from ``jitguard`` itself, the same object ([Note: Public submodules] in ``jitguard``).

May import: jitguard._src.
"""

from ._src.errors import ArtifactError as ArtifactError
from ._src.errors import CaptureError as CaptureError
from ._src.errors import EnvironmentVariableWarning as EnvironmentVariableWarning
from ._src.errors import GuardCompileError as GuardCompileError
from ._src.errors import GuardKindError as GuardKindError
from ._src.errors import GuardMismatchError as GuardMismatchError
from ._src.errors import GuardSchemaError as GuardSchemaError
from ._src.errors import InvalidCompileIdError as InvalidCompileIdError
from ._src.errors import JitGuardError as JitGuardError
from ._src.errors import LargeGuardSetWarning as LargeGuardSetWarning
from ._src.errors import NoCompileContextError as NoCompileContextError
from ._src.errors import NoTracingContextError as NoTracingContextError
from ._src.errors import RecompileError as RecompileError
from ._src.errors import RecompileLimitError as RecompileLimitError
from ._src.errors import RecompileLimitWarning as RecompileLimitWarning
from ._src.errors import RestartCompile as RestartCompile
from ._src.errors import SourceError as SourceError
from ._src.errors import SourceTypeError as SourceTypeError
from ._src.errors import StoreError as StoreError
from ._src.errors import StoreWarning as StoreWarning
from ._src.errors import UnreadableSourceError as UnreadableSourceError

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
