"""TENSORS_MATCH: TENSOR_MATCH on many tensors in one call of a C++ tensor checker (jitguard's
native one, or torch's).

May import: jitguard._src.errors, jitguard._src.compiler.kinds,
jitguard._src.torch.tensor_match, jitguard._src.torch.native_checks, torch.

# [Note: Batched tensor checks]
# Reading a tensor's metadata from Python costs about 0.5 us (eight attribute reads and
# method calls, each through torch's argument handling), and a module argument has one
# tensor per parameter and buffer, all re-read on every call (see [Note: Guarding an
# nn.Module]). torch ships a C++ checker for exactly TENSOR_MATCH's meaning,
# ``torch._C._dynamo.guards.TensorGuards`` (exact type, dispatch keys with the thread-local
# sets folded in, dtype, device index, requires_grad, rank, sizes, strides): one call checks
# a whole list for ~45 ns a tensor. TENSORS_MATCH uses it: the generated check is one call,
# ``___tensor_guards.check(v1, ..., vn)``, made after the per-source guards (it is
# relational), so when the sources are ID_MATCHed the objects are known tensors.
# Its reference meaning is TENSOR_MATCH with ``dispatch_keys="torch"`` on each tensor (the
# same semantics written in Python), and the failure text is that tensor's TENSOR_MATCH
# text. Where jitguard's native checker is built, the call goes to it instead, with the
# same verdicts at a fifth of the cost ([Note: A native tensor checker] in
# native_checks). torch's checker is built with the dynamic-dims keywords always given
# (without them the 2.13 binary crashes); if a torch build lacks it, the check falls back
# to the Python meaning. Only strided tensors are batched.
#
# The C++ checker also insists that no two of its tensors are the same object (a batch is
# of distinct inputs), so TENSORS_MATCH's meaning includes that: the reference fails, and
# the reason says which two sources hold one tensor, exactly when the C++ check does; and
# a batch built over one tensor twice is refused (guard the second source with TENSOR_MATCH
# or DUPLICATE_INPUT instead).

# [Note: A packed tensor checker]
# The C++ checker keeps, for each tensor, two small heap vectors (the sizes and strides it
# compares), read on every check. Built right after a compile, in a heap that compile
# left full of small freed chunks, those allocations take chunks scattered over the heap,
# and every check then misses the cache twice more per tensor. Measured on Qwen3 x36 (401
# tensors): the first model compiled after torch.compile had run hit in ~67 us, a second
# copy in ~59 us, and rebuilding the first one's checker alone made it ~59 us too. So the
# checker of a batch of at least ``PACKED_MIN`` tensors is built ``PACKING_PASSES`` times
# and the last is kept: each pass takes more of the scattered chunks of those sizes, so
# the last one's vectors come from fresher, contiguous memory (the earlier ones are
# freed only after the last is built). 4 passes brought that hit to ~61 us. Each pass
# checks the same tensors against the same specs: the kept checker is what one build
# gives, at a few hundred us more of compile time for a few hundred tensors. With the
# native checker ([Note: A native tensor checker]) torch's is only its fallback for odd
# calls, built once; the native one keeps every expectation in one array.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..compiler.kinds import EmitContext, RelationalKind
from ..errors import GuardKindError
from . import native_checks
from .tensor_match import TensorMatch, TensorSpec

__all__ = ["PACKED_MIN", "PACKING_PASSES", "TensorsMatch", "build_checker", "checker_available"]

_TensorGuards: Any
try:
    from torch._C._dynamo.guards import TensorGuards as _TensorGuards
except ImportError:  # pragma: no cover - present in torch 2.13
    _TensorGuards = None

_TENSOR_MATCH = TensorMatch()
#: [Note: A packed tensor checker]: batches this large are built this many times.
PACKED_MIN = 16
PACKING_PASSES = 4


def checker_available() -> bool:
    return _TensorGuards is not None


class BatchSpec(NamedTuple):
    specs: tuple[TensorSpec, ...]
    # the check, called on the tensors: the native checker or a TensorGuards' ``check``;
    # None where torch has no TensorGuards
    checker: Any


class TensorsMatch(RelationalKind):
    """Every source holds a strided tensor passing TENSOR_MATCH (``dispatch_keys="torch"``)
    against its build-time value, checked in one C++ call
    (``functools.partial(TENSORS_MATCH, others=(source, ...))``; ``sizes=``/``strides=``,
    one entry per tensor, are each tensor's TENSOR_MATCH ``sizes=``/``strides=``)."""

    name = "TENSORS_MATCH"
    cost = 10

    def extra_sources(self, guard: Any, **options: Any) -> tuple[Any, ...]:
        if set(options) - {"others", "sizes", "strides"}:
            raise GuardKindError(
                f"TENSORS_MATCH on {guard.name} takes others= (a tuple of sources) and "
                f"sizes=/strides= (one TENSOR_MATCH sizes=/strides= per tensor), got "
                f"{sorted(options)}"
            )
        return tuple(options.get("others", ()))

    def expect(self, value: Any, guard: Any, **options: Any) -> BatchSpec:
        specs = []
        per_tensor: list[dict[str, Any]] = [{} for _ in value]
        for what in ("sizes", "strides"):
            given = options.get(what)
            if given is None:
                continue
            if len(given) != len(value):
                raise GuardKindError(
                    f"TENSORS_MATCH on {guard.name}: {what}= has {len(given)} entries for "
                    f"{len(value)} tensors"
                )
            for opts, dims in zip(per_tensor, given, strict=True):
                if dims is not None:
                    opts[what] = dims
        first: dict[int, int] = {}
        for i, v in enumerate(value):
            j = first.setdefault(id(v), i)
            if j != i:
                names = (guard.name, *(s.name() for s in options.get("others", ())))
                raise GuardKindError(
                    f"TENSORS_MATCH on {guard.name}: {names[j]} and {names[i]} hold the same "
                    f"tensor; batch each tensor once and guard the other source with "
                    f"TENSOR_MATCH or DUPLICATE_INPUT"
                )
        for v, opts in zip(value, per_tensor, strict=True):
            spec = _TENSOR_MATCH.expect(v, guard, dispatch_keys="torch", **opts)
            if spec.strides is None:
                raise GuardKindError(
                    f"TENSORS_MATCH on {guard.name}: a {spec.layout} tensor cannot be batched; "
                    f"guard it by TENSOR_MATCH"
                )
            specs.append(spec)
        return BatchSpec(tuple(specs), build_checker(value, specs))

    def holds(self, value: Any, params: BatchSpec) -> bool:
        return (
            len(value) == len(params.specs)
            and all(_TENSOR_MATCH.holds(v, s) for v, s in zip(value, params.specs, strict=False))
            and _first_shared(value) is None
        )

    def emit(self, var: Any, params: BatchSpec, ctx: EmitContext) -> str:
        if params.checker is not None:
            return f"{ctx.const(params.checker, 'tensor_guards')}({', '.join(var)})"
        holds = ctx.const(self.holds, "tensors_match")
        return f"{holds}(({', '.join(var)},), {ctx.const(params, 'specs')})"

    def code(self, name: Any, params: BatchSpec) -> str:
        return f"TENSOR_MATCH on {len(name)} tensors: {', '.join(name)}"

    def detail(self, params: BatchSpec) -> dict[str, Any]:
        """Each tensor's TENSOR_MATCH detail, in source order."""
        return {"per_source": [_TENSOR_MATCH.detail(spec) for spec in params.specs]}

    def reason(self, name: Any, value: Any, params: BatchSpec) -> str:
        for n, v, s in zip(name, value, params.specs, strict=False):
            if not _holds_quietly(v, s):
                return _TENSOR_MATCH.reason(n, v, s)
        shared = _first_shared(value)
        if shared is not None:
            i, j = shared
            return f"{self.code(name, params)} failed: {name[i]} is the same tensor as {name[j]}"
        return f"{self.code(name, params)} failed"


def build_checker(tensors: Any, specs: Any) -> Any:
    """The check for ``tensors`` against ``specs`` (one TENSOR_MATCH spec each): the native
    checker where it is on, with torch's as its fallback, else torch's ``check``; None where
    torch has no TensorGuards."""
    if _TensorGuards is None:
        return None
    sizes = [list(s.sizes) for s in specs]
    strides = [list(s.strides or ()) for s in specs]
    passes = 1
    if not native_checks.enabled() and len(specs) >= PACKED_MIN:
        passes = PACKING_PASSES
    built = [_TensorGuards(*tensors, dynamic_dims_sizes=sizes, dynamic_dims_strides=strides)
             for _ in range(passes)]
    torch_check = built[-1].check  # [Note: A packed tensor checker]
    del built
    return native_checks.tensor_checker(tensors, sizes, strides, torch_check)


def _first_shared(values: Any) -> Any:
    """(i, j) for the first two positions holding the same object, or None."""
    seen: dict[int, int] = {}
    for j, v in enumerate(values):
        i = seen.setdefault(id(v), j)
        if i != j:
            return (i, j)
    return None


def _holds_quietly(value: Any, spec: TensorSpec) -> bool:
    try:
        return _TENSOR_MATCH.holds(value, spec)
    except Exception:
        return False
