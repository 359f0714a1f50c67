"""``GuardSource``: where the root of a source lives, which decides how its guards are
treated.

May import: config.
"""

from __future__ import annotations

import enum

from .config import config

__all__ = ["GuardSource"]


class GuardSource(enum.Enum):
    """Where the root of a source lives; decides how its guards are treated."""

    LOCAL = 0
    GLOBAL = 1
    LOCAL_SPECIALIZED_NN_MODULE = 2
    GLOBAL_SPECIALIZED_NN_MODULE = 3
    CONSTANT = 4
    RANDOM_VALUE = 5
    SHAPE_ENV = 6
    LOCAL_FSDP_MODULE = 7
    GLOBAL_FSDP_MODULE = 8
    BACKWARD_STATE = 9
    EPHEMERAL = 10
    SYNTHETIC_LOCAL = 11
    LOCAL_UNSPECIALIZED_NN_MODULE = 12
    GLOBAL_UNSPECIALIZED_NN_MODULE = 13
    LOCAL_UNSPECIALIZED_BUILTIN_NN_MODULE = 14
    GLOBAL_UNSPECIALIZED_BUILTIN_NN_MODULE = 15

    def is_fsdp_module(self) -> bool:
        return self in _FSDP

    def is_specialized_nn_module(self) -> bool:
        """True for specialized nn-module sources; FSDP modules count too when
        ``jitguard.config.unsafe_skip_fsdp_module_guards`` is set (the specification reads
        Dynamo's config flag here; jitguard has its own)."""
        if config.unsafe_skip_fsdp_module_guards and self in _FSDP:
            return True
        return self in _SPECIALIZED

    def is_unspecialized_nn_module(self) -> bool:
        return self in _UNSPECIALIZED

    def is_unspecialized_builtin_nn_module(self) -> bool:
        return self in _UNSPECIALIZED_BUILTIN

    def is_local(self) -> bool:
        return self in _LOCAL


_FSDP = frozenset({GuardSource.LOCAL_FSDP_MODULE, GuardSource.GLOBAL_FSDP_MODULE})
_SPECIALIZED = frozenset(
    {GuardSource.LOCAL_SPECIALIZED_NN_MODULE, GuardSource.GLOBAL_SPECIALIZED_NN_MODULE}
)
_UNSPECIALIZED_BUILTIN = frozenset(
    {
        GuardSource.LOCAL_UNSPECIALIZED_BUILTIN_NN_MODULE,
        GuardSource.GLOBAL_UNSPECIALIZED_BUILTIN_NN_MODULE,
    }
)
_UNSPECIALIZED = _UNSPECIALIZED_BUILTIN | {
    GuardSource.LOCAL_UNSPECIALIZED_NN_MODULE,
    GuardSource.GLOBAL_UNSPECIALIZED_NN_MODULE,
}
_LOCAL = frozenset(
    {
        GuardSource.LOCAL,
        GuardSource.LOCAL_SPECIALIZED_NN_MODULE,
        GuardSource.LOCAL_FSDP_MODULE,
        GuardSource.LOCAL_UNSPECIALIZED_NN_MODULE,
        GuardSource.LOCAL_UNSPECIALIZED_BUILTIN_NN_MODULE,
    }
)
