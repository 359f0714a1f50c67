"""Constants a guard can pin by value, and the strict equality EQUALS_MATCH means by it.

May import: _util, compiler.array_facts.

A numpy dtype is a constant (numpy 2 has a class per dtype, so it cannot be registered by
type): two dtypes are strictly equal when their classes and ``dtype_key``s are
([Note: Array facts]), never by numpy's looser ``==`` (which ignores metadata and compares
with strings). numpy is never imported for it.
"""

from __future__ import annotations

import enum
import math
import struct
from typing import Any

from .._util import SCALAR_TYPES
from .array_facts import dtype_key, numpy_or_none

__all__ = [
    "EXACT_EQ_TYPES",
    "MAX_CONSTANT_DEPTH",
    "is_constant",
    "is_dtype",
    "is_enum_member",
    "is_registered_constant",
    "needs_strict",
    "one_of",
    "register_constant_type",
    "strict_equal",
]

# The scalars whose ``==`` between two values of the type is exact equality: not float and
# complex (``0.0 == -0.0``, NaN).
EXACT_EQ_TYPES = tuple(t for t in SCALAR_TYPES if t is not float and t is not complex)
# A list, not a set: membership is decided by identity (see one_of).
_CONSTANT_TYPES: list[type] = [*SCALAR_TYPES, tuple, frozenset, range, slice]
_BUILTIN_CONSTANTS = len(_CONSTANT_TYPES)


def register_constant_type(tp: type) -> None:
    """Let EQUALS_MATCH hold values of ``tp`` (immutable, with a meaningful ``==``)."""
    if not one_of(tp, _CONSTANT_TYPES):
        _CONSTANT_TYPES.append(tp)


def is_registered_constant(value: Any) -> bool:
    """``value`` is of a type passed to ``register_constant_type`` (torch.dtype, ...) or a
    numpy dtype: its ``repr`` is trusted in failure texts."""
    return one_of(type(value), _CONSTANT_TYPES[_BUILTIN_CONSTANTS:]) or is_dtype(value)


def one_of(tp: type, types_: Any) -> bool:
    """``tp`` is one of ``types_`` by identity (``in`` would ask a metaclass ``__eq__``)."""
    return any(tp is t for t in types_)


def is_enum_member(value: Any) -> bool:
    return issubclass(type(value), enum.Enum)


def is_dtype(value: Any) -> bool:
    """``value`` is a numpy dtype (by its real type; numpy is not imported for it)."""
    np = numpy_or_none()
    return np is not None and issubclass(type(value), np.dtype)


# Constants nested deeper than this are not constants: the strict comparisons recurse.
MAX_CONSTANT_DEPTH = 32


def is_constant(value: Any, depth: int = 0) -> bool:
    """``value`` can be pinned by EQUALS_MATCH: a constant type's value, or a tuple,
    frozenset or slice of these nested at most ``MAX_CONSTANT_DEPTH`` deep."""
    tp = type(value)
    if is_enum_member(value):
        return True
    if tp is tuple or tp is frozenset or tp is slice:
        if depth >= MAX_CONSTANT_DEPTH:
            return False
        items = (value.start, value.stop, value.step) if tp is slice else value
        return all(is_constant(v, depth + 1) for v in items)
    return one_of(tp, _CONSTANT_TYPES) or is_dtype(value)


def needs_strict(value: Any) -> bool:
    """True if ``==`` cannot stand for strict equality on ``value``: a NaN (unequal to itself),
    a float zero (``0.0 == -0.0``) or a numpy dtype, anywhere inside."""
    tp = type(value)
    if is_dtype(value):
        return True
    if tp is float:
        return value == 0.0 or math.isnan(value)
    if tp is complex:
        return needs_strict(value.real) or needs_strict(value.imag)
    if tp is tuple or tp is frozenset:
        return any(needs_strict(v) for v in value)
    if tp is slice:
        return any(needs_strict(v) for v in (value.start, value.stop, value.step))
    return False


_DOUBLE = struct.Struct("<d")


def nan_bits(value: float) -> bytes:
    """A NaN's bits: its sign and payload, which ``math.copysign`` and ``struct`` show
    (``float("nan")`` and ``-float("nan")`` are two NaNs to a function that reads them)."""
    return _DOUBLE.pack(value)


CANONICAL_NAN = nan_bits(float("nan"))


def _float_equal(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b) and nan_bits(a) == nan_bits(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def strict_equal(value: Any, expected: Any) -> bool:
    """Equal with the same exact type at every level; a NaN equals a NaN of the same bits
    (sign and payload), ``0.0`` and ``-0.0`` differ. So ``1``, ``1.0`` and ``True`` are three different constants,
    ``(1, 2) != (1.0, 2.0)``, ``slice(0, 2) != slice(0.0, 2)``, ``range(0, 4, 2) !=
    range(0, 3, 2)``, and enum members match only themselves."""
    if value is expected:
        return True
    tp = type(expected)
    if type(value) is not tp:
        return False
    if issubclass(tp, enum.Enum):
        return value is expected
    if tp is slice or tp is range:
        return strict_equal(
            (value.start, value.stop, value.step), (expected.start, expected.stop, expected.step)
        )
    if tp is tuple:
        return len(value) == len(expected) and all(
            strict_equal(a, b) for a, b in zip(value, expected, strict=True)
        )
    if tp is frozenset:
        if len(value) != len(expected):
            return False
        unmatched = list(expected)
        for a in value:
            for i, b in enumerate(unmatched):
                if strict_equal(a, b):
                    del unmatched[i]
                    break
            else:
                return False
        return True
    if tp is float:
        return _float_equal(value, expected)
    if tp is complex:
        return _float_equal(value.real, expected.real) and _float_equal(value.imag, expected.imag)
    if is_dtype(expected):  # last: the builtin constants above pay nothing for it
        return bool(dtype_key(value) == dtype_key(expected))
    return bool(value == expected)
