"""The torch rules of the recompile advisor ([Note: Recompile advice] in
jitguard/_src/cache/advice.py): a tensor whose sizes, dtype, device, requires_grad or
strides keep changing; a module's ``training`` flipping (no advice: each mode compiles
once); a scalar argument Dynamo pinned by value. Registered by ``install``; the cache never
imports this. Rules read the guard kinds and the pinned details, never reason text.

May import: jitguard._src.cache.advice, jitguard._src.cache.advice_rules,
jitguard._src.torch.module_kinds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from ..cache.advice import NO_ADVICE, Advice, AdviceContext, Churn, Seen, register_advice_rule
from ..cache.advice_rules import code_of, local_root, pinned_values
from .module_kinds import ModuleStateSpec

__all__ = ["DYNAMO", "register_advice_rules"]

DYNAMO = "jitguard.torch.compile"
TENSOR_KINDS = ("TENSOR_MATCH", "TENSORS_MATCH")


def _times(n: int) -> str:
    return f"{n} recompile{'' if n == 1 else 's'}"


def _list(values: Sequence[str], limit: int = 6) -> str:
    text = ", ".join(values[:limit])
    return text + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _distinct(seen: Sequence[Seen], field: str) -> list[Any]:
    out: list[Any] = []
    for s in seen:
        value = (s.detail or {}).get(field)
        if value not in out:
            out.append(value)
    return out


def _changing_dims(seen: Sequence[Seen], *, static_only: bool) -> list[int]:
    """The dims whose size differs between the entries (with ``static_only``, between the
    entries that checked it)."""
    sizes = [tuple((s.detail or {}).get("sizes") or ()) for s in seen]
    ndims = {len(x) for x in sizes}
    if len(ndims) != 1:
        return []
    (ndim,) = ndims
    return [d for d in range(ndim)
            if len({x[d] for x in sizes if x[d] is not None or not static_only}) > 1]


def _dims_text(dims: Sequence[int]) -> str:
    return f"dim {dims[0]}" if len(dims) == 1 else "dims " + ", ".join(map(str, dims))


def _sizes_text(size: Any) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in size) + ")"


def _dtype_code(dtype: Any) -> str:
    return str(dtype) if str(dtype).startswith("torch.") else f"torch.{dtype}"


def _compiled(ctx: AdviceContext) -> str:
    """What the user compiled, in a snippet: a module's ``forward`` is compiled for the
    module."""
    return "model" if ctx.params[:1] == ("self",) and ctx.name == "forward" else ctx.name


def _spec_fix(root: Optional[str], ctx: AdviceContext) -> str:
    if root is not None and root in ctx.params:
        return f'jitguard.specialize({ctx.name}, dynamic=["{root}"])'
    return f"jitguard.specialize({ctx.name}, dynamic=[...])  # the source that changes"


def tensor(churn: Churn, ctx: AdviceContext) -> Optional[Advice]:
    """A tensor guard that keeps failing: its sizes (mark the dim dynamic), dtype or device
    (cast once at the call site), requires_grad (set it once), strides (make it
    contiguous)."""
    seen = churn.of_kind(*TENSOR_KINDS)
    if len(seen) < 2:
        return None
    src, expr, n = churn.source, code_of(churn.source), churn.recompiles
    changed = _changing_dims(seen, static_only=False)
    newest = (seen[-1].detail or {}).get("sizes") or ()
    if changed and all(d < len(newest) and newest[d] is None for d in changed):
        return NO_ADVICE  # the newest entry has those dims dynamic: the churn has stopped
    dims = _changing_dims(seen, static_only=True)
    if dims:
        sizes = list(dict.fromkeys(_sizes_text((s.detail or {}).get("sizes") or ()) for s in seen))
        if ctx.frontend == DYNAMO:
            fix = "\n".join(f"torch._dynamo.mark_dynamic({expr}, {d})  # before the call"
                            for d in dims)
            fix += f"\n# or: jitguard.torch.compile({_compiled(ctx)}, dynamic=True)"
            # why it stayed static is not known here: say what can make it so
            how = ("it stayed static in each entry (dynamic=False, mark_static, or a graph "
                   "that needs that exact size, such as another model's layer width)")
        else:
            fix = _spec_fix(local_root(src), ctx)
            how = "its sizes are guarded exactly"
        return Advice(
            src,
            f"{src} changed its size in {_dims_text(dims)} (sizes {_list(sizes)}) and {how}, so "
            f"each size compiled again ({_times(n)}); unless the graph needs each size, mark "
            f"{'that dim' if len(dims) == 1 else 'those dims'} dynamic so that one entry "
            f"serves every size.",
            churn.evidence(sizes), fix, rule="tensor-size",
        )
    for field, what in (("dtype", "dtype"), ("device", "device"),
                        ("requires_grad", "requires_grad")):
        values = _distinct(seen, field)
        if len(values) < 2:
            continue
        texts = [str(v) for v in values]
        if field == "dtype":
            fix = f"{expr} = {expr}.to({_dtype_code(values[0])})  # once, at the call site"
            todo = "cast it once, at the call site, to the dtype you mean"
        elif field == "device":
            fix = f'{expr} = {expr}.to("{values[0]}")  # once, at the call site'
            todo = "move it once, at the call site, to the device you mean"
        else:
            fix = (f"{expr}.requires_grad_({values[0]})  # once, at the call site"
                   if values[0] else f"{expr} = {expr}.detach()  # once, at the call site")
            todo = "set requires_grad once, at the call site"
        return Advice(
            src,
            f"{src} flip-flops in {what} ({_list(texts)}), and each {what} compiled again "
            f"({_times(n)}); {todo}.",
            churn.evidence(texts), fix, rule=f"tensor-{field.replace('_', '-')}",
        )
    strides = _distinct(seen, "strides")
    if len(strides) > 1:
        texts = [_sizes_text(s or ()) for s in strides]
        return Advice(
            src,
            f"{src} arrives with different strides ({_list(texts)}), and each layout compiled "
            f"again ({_times(n)}); make it contiguous once, at the call site.",
            churn.evidence(texts), f"{expr} = {expr}.contiguous()  # at the call site",
            rule="tensor-strides",
        )
    return None


def _only_training_differs(seen: Sequence[Seen]) -> bool:
    specs = [s.params for s in seen if isinstance(s.params, ModuleStateSpec)]
    if len(specs) != len(seen) or len({spec.training for spec in specs}) < 2:
        return False
    rest = {spec._replace(training=False) for spec in specs} if all(
        _hashable(spec) for spec in specs) else None
    return rest is not None and len(rest) == 1


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def training(churn: Churn, ctx: AdviceContext) -> Any:
    """A module's ``training`` flipping: train and eval each compile once, which is fine."""
    if churn.source.endswith(".training") and not set(churn.kinds) & set(TENSOR_KINDS):
        return NO_ADVICE
    if set(churn.kinds) == {"NN_MODULE_STATE"} and _only_training_differs(
            churn.of_kind("NN_MODULE_STATE")):
        return NO_ADVICE
    return None


def dynamo_scalar(churn: Churn, ctx: AdviceContext) -> Optional[Advice]:
    """An int or float argument Dynamo pinned by value (``dynamic=False``): compile it
    dynamic; a string or other constant: each value compiles once, so pass fewer."""
    root = local_root(churn.source)
    if ctx.frontend != DYNAMO or root is None or churn.source != f"L['{root}']":
        return None
    if root not in ctx.params:
        return None
    seen = pinned_values(churn)
    if not seen:
        return None
    values = churn.values(seen)
    numbers = all(type(s.params) in (int, float) for s in seen)
    if numbers:
        return Advice(
            churn.source,
            f"Dynamo pinned the argument {root} by its value, so each new value compiled "
            f"again ({_list(values)}: {_times(churn.recompiles)}); compile with dynamic=True "
            f"so that it becomes a symbolic input.",
            churn.evidence(values), f"jitguard.torch.compile({_compiled(ctx)}, dynamic=True)",
            rule="pinned-scalar",
        )
    return Advice(
        churn.source,
        f"Dynamo guards the argument {root} by its value and each new value compiled again "
        f"({_list(values)}: {_times(churn.recompiles)}); pass a value from a small fixed set, "
        f"or turn it into a tensor or an int before the call.",
        churn.evidence(values), None, rule="pinned-scalar",
    )


def register_advice_rules() -> None:
    for name, rule in (("torch-scalar", dynamo_scalar), ("torch-training", training),
                       ("torch-tensor", tensor)):
        register_advice_rule(name, rule)
