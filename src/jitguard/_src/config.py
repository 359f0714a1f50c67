"""Process-wide switches. Every switch here is documented where it is read.

May import: nothing from jitguard.
"""

from __future__ import annotations

__all__ = ["config"]


class _Config:
    """Mutable settings. Plain attributes, read at the moment they matter."""

    # When True, FSDP-managed modules are treated as specialized nn modules, so guards on
    # them may be skipped the way a specialized module's are. Off by default (sound).
    unsafe_skip_fsdp_module_guards: bool = False

    # A compile that makes more checks than this warns once per function
    # (``LargeGuardSetWarning``, see [Note: Large guard sets] in jitguard/_src/cache/observe.py).
    large_guard_set: int = 1000

    # A source that causes this many recompiles churns: ``cache_of(f).advice()`` names it
    # and the fix ([Note: Recompile advice] in jitguard/_src/cache/advice.py).
    advice_threshold: int = 3

    def __repr__(self) -> str:
        fields = {k: getattr(self, k) for k in dir(type(self)) if not k.startswith("_")}
        return f"jitguard.config({fields})"


config = _Config()
