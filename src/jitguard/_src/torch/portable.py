"""Portable torch guards: the guard-set document codecs of what torch kinds expect.

May import: jitguard._src._util, jitguard._src.errors, jitguard._src.guard_exprs, jitguard._src.compiler.schema, jitguard._src.compiler.values,
jitguard._src.torch.tensor_match, jitguard._src.torch.batched, jitguard._src.torch.dynamo_kinds,
torch.

# [Note: Portable torch guards]
# The kinds a ``jitguard.torch.compile`` entry holds are written to a guard-set document
# ([Note: Guard set schema]) as follows, so a stored entry's guards can be checked in
# another process:
#   * ``torch.dtype``, ``torch.layout``, ``torch.memory_format`` by name (``"float32"``),
#     ``torch.device`` by its text (``"cuda:0"``); read back as torch's own singletons,
#     so TENSOR_MATCH's ``dtype is`` test holds as it did;
#   * TENSOR_MATCH's spec by its fields (type by name, dtype, device, requires_grad, layout,
#     sizes and strides with None where unchecked, the dispatch flags and the raw dispatch
#     key set: its bits are torch's own enum, fixed for one torch version, which the store
#     key holds); the weak reference to the build-time tensor (export info only) is not
#     written;
#   * TENSORS_MATCH by its tensors' specs. Its C++ checker is rebuilt from example tensors
#     made to each spec (``torch.empty_strided`` of that dtype, device, sizes and strides,
#     the exact type, requires_grad), each first checked against its spec by TENSOR_MATCH's
#     reference meaning with dispatch keys compared as torch does: a checker built from a
#     tensor that passes the spec checks the same facts. When no such tensor can be made
#     (a dynamic dim, a device absent here, a tensor subclass), the check uses the
#     reference meaning in Python: the same verdicts, slower;
#   * DIMENSION_DYNAMIC_MARKING and GLOBAL_STATE as records of plain values (the latter in
#     the core: [Note: Portable global state]);
#   * SHAPE_ENV's sympy expressions as trees: a symbol by its name and assumptions, an
#     integer, rational or float by its value, anything else as its class (by
#     ``module:qualname``) and its arguments. Reading one back constructs only classes
#     that are loaded subclasses of ``sympy.Basic`` (sympy's own, torch's sympy functions),
#     unevaluated where sympy allows; nothing is parsed or evaluated from text.
# Identity guards on classes, functions, builtins and code objects re-bind by name
# ([Note: Re-binding by name]); one on any other object stays not portable.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from .._util import all_subclasses
from ..compiler.schema import register_schema_codec, register_schema_type
from ..compiler.values import Ident
from ..errors import GuardSchemaError
from ..guard_exprs import SLoc
from .batched import BatchSpec, build_checker, checker_available
from .dynamo_kinds import MarkingSpec
from .tensor_match import TensorMatch, TensorSpec

__all__ = ["example_tensor", "register_codecs", "rebuild_checker"]

_TENSOR_MATCH = TensorMatch()


def _named(kind: type, prefix: str) -> dict[str, Any]:
    return {str(v).removeprefix(prefix): v for v in vars(torch).values() if type(v) is kind}


_DTYPES = _named(torch.dtype, "torch.")
_LAYOUTS = _named(torch.layout, "torch.")
_FORMATS = _named(torch.memory_format, "torch.")


def _by_name(table: dict[str, Any], what: str) -> Any:
    def decode(name: Any) -> Any:
        try:
            return table[name]
        except (KeyError, TypeError):
            raise GuardSchemaError(f"{name!r} is not a {what} of this torch") from None

    return decode


def _encode_name(prefix: str) -> Any:
    return lambda v: str(v).removeprefix(prefix)


def _decode_device(text: Any) -> torch.device:
    try:
        return torch.device(text)
    except (RuntimeError, TypeError) as e:
        raise GuardSchemaError(f"{text!r} is not a torch device: {e}") from None


_SPEC_FIELDS = tuple(f for f in TensorSpec._fields if f != "ref")


def _encode_spec(spec: TensorSpec) -> dict[str, Any]:
    return {f: getattr(spec, f) for f in _SPEC_FIELDS}


def _decode_spec(data: Any) -> TensorSpec:
    if not isinstance(data, dict) or set(data) != set(_SPEC_FIELDS):
        raise GuardSchemaError(f"a TENSOR_MATCH spec has the fields {list(_SPEC_FIELDS)}")
    if not isinstance(data["type"], Ident):
        raise GuardSchemaError("a TENSOR_MATCH spec's type must be a class")
    return TensorSpec(**data, ref=None)


def example_tensor(spec: TensorSpec) -> Optional[torch.Tensor]:
    """A tensor that passes ``spec`` (TENSOR_MATCH's reference meaning), or None when none
    can be made here ([Note: Portable torch guards])."""
    tp = spec.type.get()
    if tp not in (torch.Tensor, torch.nn.Parameter) or spec.strides is None:
        return None
    sizes = [d for d in spec.sizes if d is not None]
    strides = [d for d in spec.strides if d is not None]
    if len(sizes) != len(spec.sizes) or len(strides) != len(spec.strides):
        return None
    if spec.neg or spec.conj or spec.inference:
        return None
    try:
        t = torch.empty_strided(sizes, strides, dtype=spec.dtype, device=spec.device)
        if tp is torch.nn.Parameter:
            t = torch.nn.Parameter(t, requires_grad=spec.requires_grad)
        elif spec.requires_grad:
            t.requires_grad_(True)
        ok = _TENSOR_MATCH.holds(t, spec)
    except Exception:
        return None
    return t if ok else None


def rebuild_checker(specs: tuple[TensorSpec, ...]) -> Any:
    """The C++ check for ``specs`` (``batched.build_checker``), built from example tensors,
    or None."""
    if not checker_available():
        return None
    examples = [example_tensor(s) for s in specs]
    if any(e is None for e in examples):
        return None
    return build_checker(examples, specs)


def _encode_batch(batch: BatchSpec) -> tuple[TensorSpec, ...]:
    return batch.specs


def _decode_batch(specs: Any) -> BatchSpec:
    if not isinstance(specs, tuple) or not all(isinstance(s, TensorSpec) for s in specs):
        raise GuardSchemaError("a TENSORS_MATCH spec is a tuple of TENSOR_MATCH specs")
    return BatchSpec(specs, rebuild_checker(specs))


def _encode_sympy(expr: Any) -> Any:
    if expr.is_Symbol:
        return {"symbol": expr.name, "assumptions": dict(expr.assumptions0)}
    if expr.is_Integer:
        return {"int": int(expr)}
    if expr.is_Rational:
        return {"rational": [int(expr.p), int(expr.q)]}
    if expr.is_Float:
        return {"float": float(expr)}
    if expr in (sympy_true(), sympy_false()):
        return {"bool": bool(expr)}
    cls = type(expr)
    return {"call": f"{cls.__module__}:{cls.__qualname__}", "args": tuple(expr.args)}


def sympy_true() -> Any:
    import sympy

    return sympy.true


def sympy_false() -> Any:
    import sympy

    return sympy.false


_sympy_classes: dict[str, type] = {}


def _sympy_class(key: str) -> type:
    import sympy

    if key not in _sympy_classes:
        for sub in all_subclasses(sympy.Basic):
            _sympy_classes[f"{sub.__module__}:{sub.__qualname__}"] = sub
    try:
        return _sympy_classes[key]
    except KeyError:
        raise GuardSchemaError(f"{key} is not a loaded sympy class") from None


def _decode_sympy(data: Any) -> Any:
    import sympy

    if not isinstance(data, dict):
        raise GuardSchemaError(f"{data!r} is not a sympy expression")
    if "symbol" in data:
        return sympy.Symbol(str(data["symbol"]), **{str(k): bool(v) for k, v in data["assumptions"].items()})
    if "int" in data:
        return sympy.Integer(int(data["int"]))
    if "rational" in data:
        p, q = data["rational"]
        return sympy.Rational(int(p), int(q))
    if "float" in data:
        return sympy.Float(float(data["float"]))
    if "bool" in data:
        return sympy.true if data["bool"] else sympy.false
    cls = _sympy_class(str(data["call"]))
    args = tuple(data["args"])
    try:
        return cls(*args, evaluate=False)
    except TypeError:
        return cls(*args)


_registered = False


def register_codecs() -> None:
    """Register the codecs of [Note: Portable torch guards] (idempotent)."""
    global _registered
    if _registered:
        return
    register_schema_codec(torch.dtype, _encode_name("torch."), _by_name(_DTYPES, "dtype"),
                          name="torch:dtype")
    register_schema_codec(torch.layout, _encode_name("torch."), _by_name(_LAYOUTS, "layout"),
                          name="torch:layout")
    register_schema_codec(torch.memory_format, _encode_name("torch."),
                          _by_name(_FORMATS, "memory format"), name="torch:memory_format")
    register_schema_codec(torch.device, str, _decode_device, name="torch:device")
    register_schema_codec(TensorSpec, _encode_spec, _decode_spec, name="jitguard.torch:TensorSpec")
    register_schema_codec(BatchSpec, _encode_batch, _decode_batch, name="jitguard.torch:BatchSpec")
    register_schema_type(MarkingSpec)
    register_schema_type(SLoc)
    import sympy

    register_schema_codec(sympy.Basic, _encode_sympy, _decode_sympy, name="sympy",
                          subclasses=True)
    _registered = True
