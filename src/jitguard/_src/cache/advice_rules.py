"""The built-in rules of the recompile advisor ([Note: Recompile advice] in cache.advice): a
global or closure variable baked into each compile, a scalar argument pinned by value, an
object guarded by identity and created anew on each call, a list or tuple whose length keeps
changing, and the plain advice for a source no rule takes. Rules read sources, kinds and pinned values, never reason text.

May import: _util, compiler.kinds, compiler.values, cache.advice.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from .._util import SCALAR_TYPES
from ..compiler.kinds import FACT_ID, FACT_LEN, FACT_TYPE_LEN, FACT_VALUE
from ..compiler.values import Ident
from .advice import Advice, AdviceContext, Churn, Seen, register_advice_rule

__all__ = ["code_of", "local_root", "pinned_values", "register_builtin_rules", "variable_of"]

_LOCAL = re.compile(r"^L\['([A-Za-z_]\w*)'\]")
_GLOBAL = re.compile(r"^G\['([A-Za-z_]\w*)'\]")
_CELL = re.compile(r"\.__closure__\[(\d+)\]\.cell_contents")
# The rules name no kind ([Note: Kinds own their cache data]): they ask what fact a guard
# pins. A value by equality, an object by identity, a length:
VALUE = FACT_VALUE.name
IDENTITY = FACT_ID.name
LENGTH = (FACT_LEN.name, FACT_TYPE_LEN.name)


def pinned_values(churn: Churn) -> tuple[Seen, ...]:
    """What the guards that pin the source's value by equality pinned (a scalar's)."""
    return churn.pinning(VALUE)


def local_root(name: str) -> Optional[str]:
    """``x`` for ``L['x']`` and anything under it; None for another root."""
    m = _LOCAL.match(name)
    return m.group(1) if m else None


def code_of(name: str) -> str:
    """The source as the caller would write it: ``L['x'].w`` is ``x.w``, ``G['K']`` is ``K``."""
    return _GLOBAL.sub(r"\1", _LOCAL.sub(r"\1", name))


def variable_of(name: str, ctx: AdviceContext) -> Optional[tuple[str, str]]:
    """(what, variable) when ``name`` reads a module global (``("global", "K")``) or a
    closure variable of the function (``("closure variable", "k")``); else None."""
    m = _GLOBAL.match(name)
    if m:
        return "global", m.group(1)
    m = _CELL.search(name)
    if m and int(m.group(1)) < len(ctx.freevars):
        return "closure variable", ctx.freevars[int(m.group(1))]
    root = local_root(name)
    # Dynamo names a closure variable of the frame like a local: L['k']
    if root is not None and root in ctx.freevars and root not in ctx.params:
        return "closure variable", root
    return None


def _list(values: Any, limit: int = 6) -> str:
    values = list(values)
    text = ", ".join(values[:limit])
    return text + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _times(n: int) -> str:
    return f"{n} recompile{'' if n == 1 else 's'}"


_LAST = re.compile(r"(?:\.([A-Za-z_]\w*)|\['([A-Za-z_]\w*)'\])$")


def _part_of_argument(churn: Churn, ctx: AdviceContext) -> Optional[str]:
    """The name to pass a scalar under an argument by (``mode`` for ``L['cfg'].mode``),
    when the churn is one pinned by value."""
    root = local_root(churn.source)
    if root is None or root not in ctx.params or churn.source == f"L['{root}']":
        return None
    if _scalar_values(churn) is None:
        return None
    m = _LAST.search(churn.source)
    return (m.group(1) or m.group(2)) if m else None


def baked_in(churn: Churn, ctx: AdviceContext) -> Optional[Advice]:
    """A module global, a closure variable, or a scalar inside an argument (an attribute of
    a config object) that the compile baked in and that keeps changing: pass it as an
    argument."""
    found = variable_of(churn.source, ctx)
    part = _part_of_argument(churn, ctx) if found is None else None
    if found is None and part is None:
        return None
    values = churn.values()
    args = ", ".join([*(p for p in ctx.params[:1]), "..."]) if ctx.params else "..."
    if found is not None:
        what, var = found
        subject = f"The {what} {var}"
        where = "the module" if what == "global" else "the closure"
        call = var
    else:
        assert part is not None
        subject, var, where, call = churn.source, part, code_of(churn.source), code_of(churn.source)
    return Advice(
        churn.source,
        f"{subject} is baked into each compile and kept changing "
        f"({_list(values)}: {_times(churn.recompiles)}); pass it to {ctx.name} as an "
        f"argument of its own instead of reading it from {where}.",
        churn.evidence(values),
        f"def {ctx.name}({args}, {var}): ...  # read {var} from the argument\n"
        f"{ctx.name}({args}, {call})",
        rule="baked-in",
    )


def _scalar_values(churn: Churn) -> Optional[list[Any]]:
    seen = pinned_values(churn)
    if not seen or not all(type(s.params) in SCALAR_TYPES for s in seen):
        return None
    return [s.params for s in seen]


def pinned_scalar(churn: Churn, ctx: AdviceContext) -> Optional[Advice]:
    """A scalar argument of a ``specialize``d function guarded by its value, that keeps
    changing: declare it dynamic (guarded by type), or use a policy that guards by type."""
    root = local_root(churn.source)
    if ctx.frontend != "specialize" or root is None or churn.source != f"L['{root}']":
        return None
    if root not in ctx.params or _scalar_values(churn) is None:
        return None
    values = churn.values(pinned_values(churn))
    return Advice(
        churn.source,
        f"The argument {root} is guarded by its value, so each new value compiled again "
        f"({_list(values)}: {_times(churn.recompiles)}); declare it dynamic so that it is "
        f"guarded by its type only, or use a policy that guards scalars by type.",
        churn.evidence(values),
        f'jitguard.specialize({ctx.name}, dynamic=["{root}"])  # or policy="types"',
        rule="pinned-scalar",
    )


def _object_kind(churn: Churn) -> str:
    for seen in churn.pinning(IDENTITY):
        params = seen.params
        if isinstance(params, Ident):
            obj = params.get()
            if params.type_name == "function" and getattr(obj, "__name__", "") == "<lambda>":
                return "lambda"
            return params.type_name
    return "object"


def new_object(churn: Churn, ctx: AdviceContext) -> Optional[Advice]:
    """An object guarded by identity that is created anew on each call (a lambda, a
    ``functools.partial``, a module instance): create it once, outside the loop."""
    seen = tuple(s for s in churn.pinning(IDENTITY) if isinstance(s.params, Ident))
    if len({s.key for s in seen}) < 2:
        return None
    what = _object_kind(churn)
    expr = code_of(churn.source)
    made = {"lambda": "lambda ...: ...", "partial": "functools.partial(...)"}.get(
        what, f"{what}(...)")
    return Advice(
        churn.source,
        f"{churn.source} is guarded by identity and got a new {what} on each call "
        f"({_times(churn.recompiles)}, {len(churn.values(seen))} distinct objects); create "
        f"it once, outside the loop, and pass that same object on every call.",
        churn.evidence(churn.values(seen)),
        f"{expr} = {made}  # once, before the loop\n"
        f"for ...:\n    {ctx.name}(..., {expr})",
        rule="new-object",
    )


def _length(params: Any) -> Optional[int]:
    if type(params) is int:
        return params
    if type(params) is tuple and params and type(params[-1]) is int:
        return params[-1]
    return None


def changing_length(churn: Churn, ctx: AdviceContext) -> Optional[Advice]:
    """A list or tuple whose length keeps changing: each length compiles once; keep it
    fixed, or pass the items as one tensor or array."""
    seen = churn.pinning(*LENGTH)
    lengths = list(dict.fromkeys(_length(s.params) for s in seen))
    if len(lengths) < 2 or None in lengths:
        return None
    expr = code_of(churn.source)
    texts = [str(n) for n in lengths]
    fix = None
    if ctx.frontend == "jitguard.torch.compile":
        fix = f"{ctx.name}(..., torch.stack({expr}))  # one tensor: its length is a dim"
    return Advice(
        churn.source,
        f"The length of {churn.source} kept changing (lengths {_list(texts)}: "
        f"{_times(churn.recompiles)}), and each length compiled again; keep it fixed (pad "
        f"it to one length), or pass its items as one tensor or array.",
        churn.evidence(texts), fix, rule="length",
    )


def generic(churn: Churn, ctx: AdviceContext) -> Advice:
    """Any other churning source: name it, with the guards that kept failing on it."""
    kinds = "/".join(churn.kinds) or "its"
    return Advice(
        churn.source,
        f"{churn.source} caused {_times(churn.recompiles)}: its {kinds} guard failed each "
        f"time; make it the same on every call, or have the compiler guard it more loosely.",
        churn.evidence(),
        None,
        rule="generic",
    )


def register_builtin_rules() -> None:
    for name, rule in (("new-object", new_object), ("baked-in", baked_in),
                       ("pinned-scalar", pinned_scalar), ("length", changing_length),
                       ("generic", generic)):
        register_advice_rule(name, rule, builtin=True)


register_builtin_rules()
