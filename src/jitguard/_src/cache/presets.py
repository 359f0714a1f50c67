"""Policy presets: ``specialize(fn, policy="values")`` (the default: scalars by value) and
``policy="types"`` (scalars by type, arrays by ARRAY_MATCH, as numba types its arguments).

May import: _util, integrations, guards, sources, compiler.*, cache.policy.

# [Note: Policy presets]
# "values" is the default policy ([Note: Argument rules]): an int is guarded by its value,
# so ``f(3)`` and ``f(4)`` are two entries until automatic dynamic relaxes it.
# "types" is what a type-specializing JIT (numba) needs, one entry per argument type:
#   * int, float, complex, str, bytes, bool, None: by exact type (TYPE_MATCH); by value
#     when ``specialize(..., static=[...])`` names them (numba's literal arguments);
#   * arrays (numpy ndarrays and their subclasses; objects with ``__array_interface__``;
#     objects with DLPack): ARRAY_MATCH with ``aligned=True``: exact type, dtype, ndim,
#     layout class (C, F, A), writeable, aligned: numba's ``Array(dtype, ndim, layout,
#     readonly)`` plus alignment, one exact dispatch fact;
#   * numpy scalars: by exact type; those whose type does not fix the dtype
#     (datetime64, timedelta64, str_, bytes_, void) also by their dtype (EQUALS_MATCH on
#     ``.dtype``);
#   * tuples, lists, dicts: as in "values" (exact type, length or keys), each item by these
#     rules (so ``(1, 2.0)`` is a tuple of an int and a float);
#   * anything else: the default policy's rules (torch tensors by TENSOR_MATCH once the
#     torch integration is loaded; other objects by type and identity).
# Rules registered on a "types" policy itself (``types_policy().register``) come first.
# The array and numpy rules are found by looking at the type (numpy is never imported for
# it: an ndarray cannot exist before numpy is).
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Union

from .._util import SCALAR_TYPES
from ..compiler.array_facts import numpy_or_none
from ..compiler.builder import GuardBuilder
from ..guards import Source
from ..integrations import ensure_loaded
from ..sources import AttrSource
from .policy import _MISSING as MISSING
from .policy import (
    ArgContext,
    ArgPolicy,
    ArgRule,
    _static_lookup,
    default_policy,
    object_rule,
    real_mro,
)

__all__ = ["POLICY_PRESETS", "TypesPolicy", "resolve_policy", "types_policy"]

_ARRAY_MATCH = functools.partial(GuardBuilder.ARRAY_MATCH, aligned=True)


def scalar_type_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """A builtin scalar by its exact type; by value where ``static=`` names it."""
    if ctx.is_static(source):
        ctx.by_value(source, value)
    else:
        ctx.by_type(source, value)


def array_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """An array by ARRAY_MATCH (with alignment); its identity is not guarded."""
    ctx.guard(source, _ARRAY_MATCH)


def numpy_scalar_rule(ctx: ArgContext, source: Source, value: Any) -> None:
    """A numpy scalar by exact type (and by dtype where the type does not fix it)."""
    ctx.by_type(source, value)
    np = numpy_or_none()
    tp = type(value)
    fixed = issubclass(tp, (np.number, np.bool_)) and not issubclass(tp, np.timedelta64)
    if not fixed:
        ctx.guard(AttrSource(source, "dtype"), GuardBuilder.EQUALS_MATCH)


def _is_array_type(tp: type) -> bool:
    np = numpy_or_none()
    if np is not None and issubclass(tp, np.ndarray):
        return True
    if _static_lookup(tp, "__array_interface__") is not MISSING:
        return True
    return (_static_lookup(tp, "__dlpack__") is not MISSING
            and _static_lookup(tp, "__dlpack_device__") is not MISSING)


class TypesPolicy(ArgPolicy):
    """The "types" preset ([Note: Policy presets]): scalars by type, arrays by ARRAY_MATCH.
    Rules registered on it come first; others fall through to its base (the default
    policy)."""

    def __init__(self, base: Optional[ArgPolicy] = None) -> None:
        super().__init__(base=base or default_policy)
        for tp in SCALAR_TYPES:
            self.register(tp, scalar_type_rule, subclasses=False)

    def rule_for(self, tp: type) -> ArgRule:
        for klass in real_mro(tp):  # this policy's own rules first
            found = self._rules.get(id(klass))
            if found is not None and found.tp is klass and (klass is tp or found.subclasses):
                return found.rule
        ensure_loaded()  # the torch integration's rules, once torch is imported
        base = self.base.rule_for(tp) if self.base is not None else object_rule
        if base is not object_rule:
            return base
        np = numpy_or_none()
        if np is not None and issubclass(tp, np.generic):  # before arrays: it has an interface
            return numpy_scalar_rule
        if _is_array_type(tp):
            return array_rule
        return object_rule


_types: Optional[TypesPolicy] = None
POLICY_PRESETS = ("values", "types")


def types_policy() -> TypesPolicy:
    """The shared "types" policy (what ``policy="types"`` means)."""
    global _types
    if _types is None:
        _types = TypesPolicy()
    return _types


def resolve_policy(policy: Union[ArgPolicy, str, None]) -> ArgPolicy:
    """The policy ``specialize(policy=...)`` names: None or "values" is the default, "types"
    the types preset ([Note: Policy presets]), an ``ArgPolicy`` itself."""
    if isinstance(policy, ArgPolicy):
        return policy
    if policy is None or policy == "values":
        return default_policy
    if policy == "types":
        return types_policy()
    raise ValueError(
        f"policy must be an ArgPolicy or one of {POLICY_PRESETS}, got {policy!r}"
    )
