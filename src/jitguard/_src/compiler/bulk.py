"""Helpers that generated checks call for a batch of leaves ([Note: Batched leaves]). Each
is plain Python here, which is its meaning; when the C extension is there (and
``JITGUARD_PURE_PYTHON=1`` is not set) the generated checks call its C version instead.

May import: native.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import native

__all__ = ["dicts_lack", "dicts_lack_py"]


def dicts_lack_py(attrs: tuple[str, ...], *values: Any) -> bool:
    """True when no value's instance ``__dict__`` holds any of ``attrs``; False for a value
    that has no ``__dict__``."""
    for value in values:
        try:
            d = value.__dict__
        except AttributeError:
            return False
        if d:
            for attr in attrs:
                if attr in d:
                    return False
    return True


def _c_version(name: str) -> Any:
    """The C version of ``name`` when the extension is in use ([Note: Loading the
    extension])."""
    return getattr(native.module, name, None) if native.module is not None else None


dicts_lack: Callable[..., bool] = _c_version("dicts_lack") or dicts_lack_py
