"""The types guard-set documents may hold besides JSON values: record types (frozen
dataclasses and NamedTuples whose fields are writable) and codecs (an encoder and a
decoder of a type with no dataclass form), by the name a document records
([Note: Guard set schema] in compiler/schema.py).

May import: compiler.schema_homes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Optional

from .schema_homes import class_key

__all__ = ["codec_for", "decoders", "is_namedtuple", "record_types", "register_schema_codec",
           "register_schema_type"]


record_types: dict[str, type] = {}


def register_schema_type(tp: type) -> type:
    """Let guard-set documents hold instances of ``tp``, a frozen dataclass or NamedTuple
    whose fields are themselves writable (returns ``tp``, so it works as a decorator)."""
    if not (dataclasses.is_dataclass(tp) or is_namedtuple(tp)):
        raise TypeError(f"register_schema_type takes a dataclass or NamedTuple, got {tp!r}")
    record_types[class_key(tp)] = tp
    return tp


_codecs: dict[type, tuple[str, Callable[[Any], Any]]] = {}
_base_codecs: list[tuple[type, tuple[str, Callable[[Any], Any]]]] = []
decoders: dict[str, Callable[[Any], Any]] = {}


def register_schema_codec(
    tp: type, encode: Callable[[Any], Any], decode: Callable[[Any], Any],
    *, name: Optional[str] = None, subclasses: bool = False,
) -> None:
    """Let guard-set documents hold instances of exactly ``tp`` (with ``subclasses``, of any
    subclass of it): ``encode(obj)`` returns a writable value (raising ``TypeError`` when
    this object has none: its guard is then not portable, with that message as the
    reason), ``decode(value)`` rebuilds the object (raising ``GuardSchemaError`` or
    ``ValueError`` when it cannot). ``name`` (default ``module:qualname`` of ``tp``) is
    what the document records."""
    key = name or class_key(tp)
    if subclasses:
        _base_codecs.append((tp, (key, encode)))
    else:
        _codecs[tp] = (key, encode)
    decoders[key] = decode


def codec_for(tp: type) -> Optional[tuple[str, Callable[[Any], Any]]]:
    codec = _codecs.get(tp)
    if codec is None:
        for base, candidate in _base_codecs:
            if issubclass(tp, base):
                return candidate
    return codec


def is_namedtuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")
