"""Reading a tensor's metadata for the tensor guards: dispatch keys (raw or with the
thread-local sets folded in), the dispatch flags, torch's dtype names, and the TENSOR_MATCH
fact that the specializing cache dispatches on.

May import: jitguard._src.errors, torch.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Hashable, Iterable
from typing import Any, NamedTuple, Optional

import torch

from ..errors import GuardKindError

__all__ = ["FactSpec", "MODES", "dtype_name", "fact_name", "fact_tuple", "flags", "keys_of",
           "parse_fact_name", "raw_keys", "tensor_fact"]

_dispatch_keys = torch._C._dispatch_keys
_tls_include = torch._C._dispatch_tls_local_include_set
_tls_exclude = torch._C._dispatch_tls_local_exclude_set
_STRIDED = torch.strided
MODES = ("subset", "exact", "torch")


def keys_of(t: Any, mode: str) -> Any:
    """The dispatch key set compared in ``mode``: the tensor's own ("exact"), or with the
    thread-local include/exclude sets folded in as torch's checker does ("torch")."""
    keys = _dispatch_keys(t)
    if mode == "torch":
        keys = (keys | _tls_include()) - _tls_exclude()
    return keys


def raw_keys(t: Any, mode: str) -> int:
    return int(keys_of(t, mode).raw_repr())


@functools.cache
def dtype_name(dtype: torch.dtype) -> str:
    """torch's C++ name of a dtype (``Float``, ``Half``, ``BFloat16``), as its failure texts
    print it; ``str(dtype)`` when it has none."""
    try:
        with warnings.catch_warnings():  # quantized dtypes warn that they are deprecated
            warnings.simplefilter("ignore")
            name = torch.empty(0, dtype=dtype).type()
    except Exception:
        return str(dtype)
    name = name.rsplit(".", 1)[-1]
    return name[: -len("Tensor")] if name.endswith("Tensor") else name


def flags(t: Any, dtype: torch.dtype) -> tuple[bool, bool, bool]:
    return (bool(t.is_neg()), bool(dtype.is_complex and t.is_conj()), bool(t.is_inference()))


# ---- facts --------------------------------------------------------------------------------
# The fact name carries what fact_of needs besides the value (which dims are unchecked,
# whether keys are compared exactly), so equal facts mean the guard holds.


class FactSpec(NamedTuple):
    free_sizes: frozenset[int]
    free_strides: Optional[frozenset[int]]  # None: strides not compared
    keys_mode: str


def fact_name(params: Any) -> str:
    free_sizes = ",".join(str(i) for i, e in enumerate(params.sizes) if e is None)
    if params.strides is None:
        free_strides = "-"
    else:
        free_strides = ",".join(str(i) for i, e in enumerate(params.strides) if e is None)
    return (
        f"TENSOR_MATCH[sizes-free={free_sizes};strides-free={free_strides};"
        f"keys={params.keys_mode}]"
    )


@functools.lru_cache(maxsize=1024)
def parse_fact_name(fact: str) -> FactSpec:
    try:
        inner = fact[fact.index("[") + 1 : fact.rindex("]")]
        fields = dict(part.split("=", 1) for part in inner.split(";"))

        def ints(text: str) -> frozenset[int]:
            return frozenset(int(t) for t in text.split(",") if t)

        free_strides = None if fields["strides-free"] == "-" else ints(fields["strides-free"])
        if fields["keys"] not in MODES:
            raise ValueError(fields["keys"])
        return FactSpec(ints(fields["sizes-free"]), free_strides, fields["keys"])
    except (ValueError, KeyError) as e:
        raise GuardKindError(f"not a TENSOR_MATCH fact name: {fact!r}") from e


def _blank(values: Iterable[int], free: frozenset[int]) -> tuple[Optional[int], ...]:
    return tuple(None if i in free else v for i, v in enumerate(values))


def fact_tuple(params: Any) -> Hashable:
    bits: Any = (
        (params.neg, params.conj, params.inference)
        if params.keys_mode == "subset"
        else params.keys
    )
    return (
        params.type.id,
        params.dtype,
        params.device,
        params.requires_grad,
        params.layout,
        params.sizes,
        params.strides,
        bits,
    )


def tensor_fact(spec: FactSpec, value: Any) -> Hashable:
    """The TENSOR_MATCH fact of a runtime value: equal to a guard's fact iff it holds."""
    if not isinstance(value, torch.Tensor):
        return ("not a tensor", id(type(value)))
    dtype = value.dtype
    layout = value.layout
    strides: Optional[tuple[Optional[int], ...]] = None
    if spec.free_strides is not None:
        if layout is not _STRIDED:
            return ("no strides", id(type(value)), layout)
        strides = _blank(value.stride(), spec.free_strides)
    bits: Any = (
        flags(value, dtype) if spec.keys_mode == "subset" else raw_keys(value, spec.keys_mode)
    )
    device = value.device
    return (
        id(type(value)),
        dtype,
        device,
        bool(value.requires_grad),
        layout,
        _blank(value.shape, spec.free_sizes),
        strides,
        bits,
    )
