"""Helpers that generated checks call for a batch of leaves ([Note: Batched leaves]). Each
is plain Python here, which is its meaning; when the C extension is there (and
``JITGUARD_PURE_PYTHON=1`` is not set) the generated checks call its C version instead.

May import: _speedups.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

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
    if os.environ.get("JITGUARD_PURE_PYTHON", "") == "1":
        return None
    try:
        from .. import _speedups  # type: ignore[attr-defined]
    except ImportError:
        return None
    return getattr(_speedups, name, None)  # None: a build from before it was added


dicts_lack: Callable[..., bool] = _c_version("dicts_lack") or dicts_lack_py
