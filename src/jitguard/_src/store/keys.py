"""Where a stored entry is filed: the function's identity, the environment, the store's key.

May import: _util, env, errors, store.* (the standard library otherwise).

# [Note: Store keys]
# A function's entries are filed under one key, the SHA-256 of a canonical JSON document:
#   * ``name``: ``module:qualname`` of the function;
#   * ``code``: a hash of its code object, recursively (bytecode, names, nested code
#     objects and constants; not its file name or line numbers, so moving a function in
#     its file keeps its entries), of its defaults and keyword defaults, and of its closure
#     cells' contents: a value with a portable form (None, bool, int, float, complex, str,
#     bytes, their tuples/lists/sets/dicts, a module, or a class or function found again at
#     its ``__module__``/``__qualname__``) is hashed by that form, a local function by its
#     code, defaults and closure (recursively), anything else by its type's name only (its value is not portable; a compiler that specializes on it must
#     guard it, as it must every global it reads); for a ``functools.wraps`` wrapper, of
#     every function of its ``__wrapped__`` chain (its ``name`` is the innermost's);
#   * ``compiler``: the qualified name of the compiler (two compilers never share entries);
#   * ``env``: the jitguard version, the Python implementation and version, the store's
#     format, and what the compiler's ``store_environment()`` adds (torch's version and
#     device, say).
# Anything that changes the key makes the old entries unreachable (they are "stale" to
# ``explain`` and the ``jitguard.store`` log, and age out of the local tier by LRU).
# Within a key, an entry is named by the hash of its guard-set document: the same
# specialization compiled by two processes is one entry.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import os
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Optional

from .. import env
from .._util import JSON_INT_BITS, wrapped_chain

__all__ = [
    "JITGUARD_VERSION",
    "STORE_FORMAT",
    "default_cache_dir",
    "entry_id",
    "environment",
    "function_identity",
    "function_key",
    "jitguard_version",
]

STORE_FORMAT = 1  # the record codec's format (store.codec), part of every key's environment


def default_cache_dir() -> Path:
    """``JITGUARD_CACHE_DIR``, else the user cache directory: ``$XDG_CACHE_HOME/jitguard``
    (``~/.cache/jitguard``), ``~/Library/Caches/jitguard`` on macOS,
    ``%LOCALAPPDATA%\\jitguard\\Cache`` on Windows."""
    explicit = env.directory("JITGUARD_CACHE_DIR")
    if explicit is not None:
        return explicit
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "jitguard" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "jitguard"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "jitguard"


# The package's version, as pyproject.toml says (tests/test_store_keys.py compares them):
# asking importlib.metadata would cost ~20 ms on the first load of a process.
JITGUARD_VERSION = "0.1.0"


def jitguard_version() -> str:
    """jitguard's version (part of every key's environment)."""
    return JITGUARD_VERSION


def environment(extra: Optional[Mapping[str, Any]] = None) -> dict[str, str]:
    """The environment part of a key: jitguard, Python and the store format, plus ``extra``
    (a compiler's ``store_environment()``; its values are taken as text). The base parts
    win over an extra part of the same name."""
    base = {
        "jitguard": jitguard_version(),
        "python": f"{sys.implementation.name}-{'.'.join(map(str, sys.version_info[:3]))}",
        "store_format": str(STORE_FORMAT),
    }
    out = {str(k): str(v) for k, v in (extra or {}).items()}
    out.update(base)
    return dict(sorted(out.items()))


# ---- function identity -------------------------------------------------------------------


def _qualified(obj: Any) -> Optional[str]:
    """``module:qualname`` when ``obj`` is found again there, else None."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<locals>" in qualname:
        return None
    current: Any = sys.modules.get(module)
    for part in qualname.split("."):
        current = getattr(current, part, None)
        if current is None:
            return None
    return f"{module}:{qualname}" if current is obj else None


def _portable(value: Any, depth: int = 0) -> Any:
    """A JSON form of ``value`` that is the same in every process, or a type-only mark."""
    tp = type(value)
    if depth > 20:
        return ["deep", tp.__qualname__]
    if tp is int and value.bit_length() > JSON_INT_BITS:
        return ["int", hex(value)]  # json writes ints in decimal, limited in length
    if value is None or tp is bool or tp is int or tp is str:
        return value
    if tp is float:
        return ["float", repr(value)] if not math.isfinite(value) else value
    if tp is complex:
        return ["complex", repr(value)]
    if tp is bytes:
        return ["bytes", value.hex()]
    if tp is tuple or tp is list:
        return [tp.__name__, [_portable(v, depth + 1) for v in value]]
    if tp is frozenset or tp is set:
        texts = sorted(json.dumps(_portable(v, depth + 1), sort_keys=True) for v in value)
        return [tp.__name__, texts]
    if tp is dict:
        pairs = [
            json.dumps([_portable(k, depth + 1), _portable(v, depth + 1)], sort_keys=True)
            for k, v in value.items()
        ]
        return ["dict", sorted(pairs)]
    if tp is types.CodeType:
        return ["code", _code_hash(value)]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if isinstance(value, enum.Enum):
        where = _qualified(tp)
        if where is not None:
            return ["enum", where, value.name]
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        where = _qualified(value)
        if where is not None:
            return ["object", where]
    if tp is types.FunctionType:  # a local function: by what it is, recursively
        return ["function", _code_hash(value.__code__),
                _portable(value.__defaults__, depth + 1),
                _portable(value.__kwdefaults__, depth + 1),
                [_portable(_cell(c), depth + 1) for c in value.__closure__ or ()]]
    return ["type", f"{tp.__module__}:{tp.__qualname__}"]


_EMPTY = ["empty cell"]


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # not filled yet
        return _EMPTY


def _code_hash(code: types.CodeType) -> str:
    h = hashlib.sha256()
    parts = [
        code.co_name, getattr(code, "co_qualname", code.co_name), code.co_argcount,
        code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
        list(code.co_names), list(code.co_varnames), list(code.co_freevars),
        list(code.co_cellvars), [_portable(c) for c in code.co_consts],
    ]
    h.update(code.co_code)
    h.update(json.dumps(parts, sort_keys=True, default=repr).encode())
    return h.hexdigest()


def function_identity(fn: Callable[..., Any]) -> Optional[dict[str, str]]:
    """``{"name", "code"}`` for a Python function (see [Note: Store keys]); None for a
    callable without code (a builtin, an object with ``__call__``), which is not stored.
    A ``functools.wraps`` wrapper is named as the function it wraps, and its code is every
    function's of the ``__wrapped__`` chain, the wrapper's first ([Note: A replaced
    __code__]: the code that runs is the wrapper's, and it runs the wrapped function's)."""
    chain = wrapped_chain(fn)
    target = chain[-1]
    code = getattr(target, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    name = f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', code.co_name)}"
    docs = [_code_doc(f) for f in chain if isinstance(getattr(f, "__code__", None), types.CodeType)]
    doc = docs[0] if len(docs) == 1 else {"chain": docs}
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    return {"name": name, "code": digest}


def _code_doc(fn: Any) -> dict[str, Any]:
    """What a function's entry of the store key holds: its code, defaults and closure."""
    return {
        "code": _code_hash(fn.__code__),
        "defaults": _portable(tuple(getattr(fn, "__defaults__", None) or ())),
        "kwdefaults": _portable(dict(getattr(fn, "__kwdefaults__", None) or {})),
        "closure": [_portable(_cell(cell)) for cell in getattr(fn, "__closure__", None) or ()],
    }


def _qualname_of(obj: Any) -> str:
    tp = obj if isinstance(obj, (type, types.FunctionType)) else type(obj)
    return f"{getattr(tp, '__module__', '?')}:{getattr(tp, '__qualname__', repr(tp))}"


def function_key(
    identity: Mapping[str, str], compiler: Any, env: Mapping[str, str]
) -> tuple[str, dict[str, Any]]:
    """The store key of a function's entries, and the document it hashes."""
    doc = {"name": identity["name"], "code": identity["code"],
           "compiler": _qualname_of(compiler), "env": dict(env)}
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    return digest[:32], doc


def entry_id(guards_doc: Mapping[str, Any]) -> str:
    """The name of an entry within its key: the hash of its guard-set document (less its
    ``name``, which holds a process-local compile id)."""
    doc = {k: v for k, v in guards_doc.items() if k != "name"}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
