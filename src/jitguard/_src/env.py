"""Every ``JITGUARD_*`` environment variable: the one place they are read, validated and
listed (``VARIABLES``; docs/environment.md is the same table, and a test holds them equal).

May import: errors (the standard library otherwise).

# [Note: Environment variables]
# Each variable is read through one reader of its type: ``flag`` (1/0, true/false,
# yes/no, on/off, any case), ``size`` (bytes, or with a unit: 512KB, 64MB, 1GiB; KB is
# 1000 bytes, KiB 1024), ``seconds`` (a number, or with a unit: 500ms, 30s, 5m, 2h, 7d),
# ``text``, ``url`` and ``directory``/``store`` (a path; one whose parent folder does not
# exist is refused: jitguard never makes a chain of folders because of a typo). An empty
# or unset variable is its default. A value the reader refuses is one
# ``EnvironmentVariableWarning`` (once per variable and value, naming the variable, the
# value, what it takes and the default used) and the default is kept: an environment
# variable never makes jitguard fail, and never makes a folder of a value that is not a
# path (``JITGUARD_STORE=maybe`` is neither a switch nor a path: no store, and a warning).
# The values are read when they matter (most when a store, trace or log is set up; the
# dispatcher's ``JITGUARD_PURE_PYTHON`` once, when jitguard is imported), never on a call.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
import threading
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Optional, Union

from .errors import EnvironmentVariableWarning

__all__ = [
    "VARIABLES",
    "Variable",
    "directory",
    "flag",
    "raw",
    "refuse",
    "seconds",
    "size",
    "store",
    "text",
    "url",
    "usable_directory",
]


@dataclasses.dataclass(frozen=True)
class Variable:
    """One variable: its name, what it takes, its default and what it does."""

    name: str
    takes: str
    default: str
    meaning: str


VARIABLES: tuple[Variable, ...] = (
    Variable("JITGUARD_CACHE_DIR", "a directory", "the user cache directory "
             "(`~/.cache/jitguard`)", "where the persistent store lives"),
    Variable("JITGUARD_CACHE_KEY", "text, at least 16 bytes", "the key file in the store",
             "the key that signs stored entries (the same in every process sharing them)"),
    Variable("JITGUARD_CACHE_MAX_BYTES", "a size (`1000000`, `512KB`, `64MB`, `1GiB`)",
             "1 GiB", "the most the local store holds before it drops its oldest entries"),
    Variable("JITGUARD_LOGS", "log names (`recompiles,+guards`)", "none",
             "which of jitguard's logs print, as `set_logs` takes them"),
    Variable("JITGUARD_PINNED_INPUTS", "a switch", "on",
             "off: a `jitguard.torch.compile` hit reads its graph's inputs through "
             "Dynamo's chains, instead of taking those its structure check pinned "
             "(CPython 3.11; read at import)"),
    Variable("JITGUARD_PURE_PYTHON", "a switch", "off",
             "on: the dispatcher runs in pure Python, not the C hot path, and tensor "
             "guards on torch's own checker, not jitguard's C++ one (read at import)"),
    Variable("JITGUARD_REDIS_PREFIX", "text", "`jitguard`",
             "the prefix of the shared tier's Redis keys"),
    Variable("JITGUARD_REDIS_TIMEOUT", "seconds (`0.5`, `500ms`)", "0.5 s",
             "how long the shared tier waits for Redis"),
    Variable("JITGUARD_REDIS_TTL", "seconds (`3600`, `2h`, `7d`)", "7 days",
             "how long Redis keeps a shared entry"),
    Variable("JITGUARD_REDIS_URL", "a Redis URL (`redis://`, `rediss://`, `unix://`)",
             "none (no shared tier)", "the shared tier of the store"),
    Variable("JITGUARD_STORE", "a switch, or a directory", "off",
             "whether `specialize` and `jitguard.torch.compile` keep entries across "
             "processes when not told (on: the store in `JITGUARD_CACHE_DIR`)"),
    Variable("JITGUARD_STRUCTURE_SKIP", "a switch", "on",
             "off: a check of a model's structure guards runs them all on every call, "
             "instead of skipping them while no dict or class under its roots changed "
             "(Python 3.10-3.11 with the C hot path; read at import)"),
    Variable("JITGUARD_TRACE", "a directory", "none",
             "write a structured trace (tlparse's format) into this directory"),
    Variable("JITGUARD_VERIFY", "a switch", "off",
             "`jitguard.torch.compile` checks every call against torch's own guards too"),
)

_KNOWN = {v.name: v for v in VARIABLES}
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "B": 1, "K": 10**3, "KB": 10**3, "M": 10**6, "MB": 10**6,
               "G": 10**9, "GB": 10**9, "T": 10**12, "TB": 10**12,
               "KI": 2**10, "KIB": 2**10, "MI": 2**20, "MIB": 2**20, "GI": 2**30,
               "GIB": 2**30, "TI": 2**40, "TIB": 2**40}
_SECONDS = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d)?\s*$", re.IGNORECASE)
_SECOND_UNITS = {"": 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_URL_SCHEMES = ("redis://", "rediss://", "unix://")

_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()


def raw(name: str, get: Optional[Callable[[str], Optional[str]]] = None) -> Optional[str]:
    """The variable's text, stripped (read by ``get``, default ``os.environ.get``); None
    when it is unset or empty."""
    if name not in _KNOWN:
        raise KeyError(f"{name} is not one of jitguard's environment variables")
    value = (get or os.environ.get)(name)
    if value is None or not value.strip():
        return None
    return value.strip()


def refuse(name: str, value: str, why: str, default: str) -> None:
    """One warning per variable and value: what it takes, and the default kept."""
    with _lock:
        if (name, value) in _warned:
            return
        _warned.add((name, value))
    warnings.warn(
        f"jitguard: {name}={value!r} {why}; using the default ({default}). See "
        f"docs/environment.md for what each JITGUARD_* variable takes.",
        EnvironmentVariableWarning, stacklevel=_user_stacklevel(),
    )


def _user_stacklevel() -> int:
    """The ``stacklevel`` (for a ``warnings.warn`` in the caller) of the first frame outside
    jitguard and the import machinery: the user's line that read the variable, imported
    jitguard or called it."""
    level = 2
    frame: Optional[types.FrameType] = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            frame = frame.f_back  # warnings skips these frames itself: not counted
        elif str(frame.f_globals.get("__name__", "")).startswith("jitguard"):
            frame, level = frame.f_back, level + 1
        else:
            break
    return level


def flag(name: str, default: bool = False) -> bool:
    """A switch: 1/true/yes/on or 0/false/no/off (any case)."""
    value = raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    refuse(name, value, "is not a switch (1/0, true/false, yes/no, on/off)",
            "on" if default else "off")
    return default


def size(name: str, default: int) -> int:
    """A size in bytes, >= 1: ``1000000``, ``512KB``, ``64MB``, ``1GiB`` (KB = 1000 bytes,
    KiB = 1024)."""
    value = raw(name)
    if value is None:
        return default
    match = _SIZE.match(value.replace("_", ""))
    if match is not None:
        unit = (match.group(2) or "").upper()
        number = float(match.group(1)) * _SIZE_UNITS[unit]
        if number >= 1 and math.isfinite(number):
            return int(number)
    refuse(name, value, "is not a size of at least one byte (a whole number of bytes, or "
            "with a unit: 512KB, 64MB, 1GiB)", f"{default} bytes")
    return default


def seconds(name: str, default: float) -> float:
    """A duration in seconds, > 0: ``0.5``, ``500ms``, ``30s``, ``5m``, ``2h``, ``7d``."""
    value = raw(name)
    if value is None:
        return default
    match = _SECONDS.match(value)
    if match is not None:
        number = float(match.group(1)) * _SECOND_UNITS[(match.group(2) or "").lower()]
        if number > 0 and math.isfinite(number):
            return number
    refuse(name, value, "is not a duration above zero (seconds, or with a unit: 500ms, "
            "30s, 5m, 2h, 7d)", f"{default:g} s")
    return default


def text(name: str, *, min_bytes: int = 0, default: Optional[str] = None) -> Optional[str]:
    """Text (at least ``min_bytes`` bytes in UTF-8)."""
    value = raw(name)
    if value is None:
        return default
    if len(value.encode("utf-8")) < min_bytes:
        refuse(name, "<hidden>" if "KEY" in name else value,
                f"is shorter than {min_bytes} bytes", _KNOWN[name].default)
        return default
    return value


def url(name: str) -> Optional[str]:
    """A Redis URL (``redis://``, ``rediss://``, ``unix://``); None when unset or refused."""
    value = raw(name)
    if value is None:
        return None
    if value.lower().startswith(_URL_SCHEMES):
        return value
    refuse(name, value, "is not a Redis URL (redis://host:port/db, rediss://..., "
            "unix:///path)", _KNOWN[name].default)
    return None


def _looks_like_path(value: str) -> bool:
    return (os.path.isabs(value) or value.startswith(("~", "./", "../", ".\\", "..\\"))
            or value in (".", ".."))


def usable_directory(path: Path) -> Optional[str]:
    """Why ``path`` cannot be a jitguard directory (None when it can): it must be a
    directory, or not exist yet in a folder that does (never a chain of new folders)."""
    path = path.expanduser()
    if path.exists():
        return None if path.is_dir() else "is a file, not a directory"
    parent = path.absolute().parent
    if not parent.is_dir():
        return f"names a folder whose parent {str(parent)!r} does not exist"
    return None


def directory(name: str) -> Optional[Path]:
    """A directory (``~`` expanded) that exists or whose parent does; None when unset or
    refused."""
    value = raw(name)
    if value is None:
        return None
    why = usable_directory(Path(value))
    if why is not None:
        refuse(name, value, why, _KNOWN[name].default)
        return None
    return Path(value).expanduser()


def store(name: str = "JITGUARD_STORE",
          get: Optional[Callable[[str], Optional[str]]] = None) -> Union[bool, Path]:
    """A switch (True: the default store; False: none) or the directory of a store. A
    relative path is written ``./name`` (a bare word is a misspelt switch, not a folder)."""
    value = raw(name, get)
    if value is None:
        return False
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    if not _looks_like_path(value):
        refuse(name, value, "is neither a switch (1/0, true/false, yes/no, on/off) nor a "
                "path (absolute, or starting with ./ ../ ~)", "off, no store")
        return False
    why = usable_directory(Path(value))
    if why is not None:
        refuse(name, value, why, "off, no store")
        return False
    return Path(value).expanduser()
