"""Helpers that generated checks call for a batch of leaves ([Note: Batched leaves]). Each
is plain Python here, which is its meaning; when the C extension is there (and
``JITGUARD_PURE_PYTHON=1`` is not set) the generated checks call its C version instead.

May import: native.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import native

__all__ = [
    "attrs_falsy",
    "attrs_falsy_py",
    "dicts_exclude",
    "dicts_exclude_py",
    "dicts_lack",
    "dicts_lack_py",
    "distinct",
    "distinct_py",
    "is_native",
    "keys_are",
    "keys_are_py",
]


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


def distinct_py(*values: Any) -> bool:
    """True when no two values are the same object (by identity: no user code runs)."""
    return len({id(v) for v in values}) == len(values)


def keys_are_py(d: Any, keys: tuple[Any, ...]) -> bool:
    """True when ``d`` is a dict whose keys in ``dict.keys`` order are ``keys``, one for
    one: the same object, or of the same exact type and equal (``==``)."""
    if not isinstance(d, dict) or dict.__len__(d) != len(keys):
        return False
    return all(
        k is e or (type(k) is type(e) and k == e)
        for k, e in zip(list(dict.keys(d)), keys, strict=True)
    )


def attrs_falsy_py(names: tuple[str, ...], *values: Any) -> bool:
    """True when ``getattr(values[i], names[i])`` is false for every ``i``: read and tested
    in order, stopping at the first true one (the ``not (a.x or b.y or ...)`` chain, one
    name per value); an exception of a read or of a truth test propagates."""
    if len(names) != len(values):
        raise TypeError("attrs_falsy(names: tuple, *values), a name per value")
    for value, name in zip(values, names, strict=True):
        if getattr(value, name):
            return False
    return True


def dicts_exclude_py(attrs: tuple[tuple[str, ...], ...], *values: Any) -> bool:
    """True when no name of ``attrs[i]`` is ``in`` the instance dict of ``values[i]``, read
    as ``object.__getattribute__(v, '__dict__')`` (a type's own ``__getattribute__`` is not
    run); a value without an instance dict raises AttributeError."""
    if len(attrs) != len(values):
        raise TypeError("dicts_exclude(attrs: tuple, *values), attrs per value")
    for value, names in zip(values, attrs, strict=True):
        d = object.__getattribute__(value, "__dict__")
        for name in names:
            if name in d:
                return False
    return True


def _c_version(name: str) -> Any:
    """The C version of ``name`` when the extension is in use ([Note: Loading the
    extension])."""
    return getattr(native.module, name, None) if native.module is not None else None


dicts_lack: Callable[..., bool] = _c_version("dicts_lack") or dicts_lack_py
attrs_falsy: Callable[..., bool] = _c_version("attrs_falsy") or attrs_falsy_py
dicts_exclude: Callable[..., bool] = _c_version("dicts_exclude") or dicts_exclude_py
distinct: Callable[..., bool] = _c_version("distinct") or distinct_py
keys_are: Callable[..., bool] = _c_version("keys_are") or keys_are_py


def is_native(helper: Callable[..., bool]) -> bool:
    """Whether ``helper`` (one of this module's) is the C version: a kind whose per-leaf
    Python test is faster than the Python version's loop calls the helper only then."""
    return helper not in (dicts_lack_py, attrs_falsy_py, dicts_exclude_py, distinct_py,
                          keys_are_py)
