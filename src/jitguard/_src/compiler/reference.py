"""The reference evaluator: a slow, plainly correct interpreter of leaves, and the failure
reasons built from it.

May import: guards, stacks, compiler.builder, compiler.values.

Every value is read through the sources' own ``access``/``get_value`` (no generated code) and every
check through ``GuardKind.holds``. Tests compare it with the generated check function on
random guards and values; ``CheckFunction.explain`` uses it to say what failed.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Iterable
from typing import Any, Optional

from ..guards import ChainedSource, Guard, Source
from .builder import Leaf

__all__ = ["GuardFailure", "evaluate", "evaluate_leaf", "explain_leaves"]


@dataclasses.dataclass(frozen=True)
class GuardFailure:
    """One failed guard: what it checked, why it failed, and where it was installed;
    ``params`` are the failed leaf's params (what it pinned: the recompile advisor reads
    them), None for a failure not made from a leaf."""

    reason: str
    kind: str
    source_names: tuple[str, ...]
    guard: Optional[Guard] = None
    user_stack: Optional[traceback.StackSummary] = None
    params: Any = dataclasses.field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return self.reason

    def format(self, *, user_stack: bool = True) -> str:
        """The reason, then ``User stack trace:`` and the stack when one is known: per
        frame ``  File "...", line N, in name`` and its source line (no column carets), the
        form torch.compile's recompile log uses."""
        text = self.reason
        if user_stack and self.user_stack:
            frames = []
            for frame in self.user_stack:
                frames.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
                if frame.line:
                    frames.append(f"    {frame.line.strip()}")
            text += "\nUser stack trace:\n" + "\n".join(frames)
        return text


class _ReadError(Exception):
    """Reading ``source`` raised ``error`` (``source`` is the first one on the chain that
    failed, which may be a base of the source asked for)."""

    def __init__(self, source: Source, error: BaseException) -> None:
        super().__init__(source, error)
        self.source, self.error = source, error


class _Reader:
    """Reads sources for one evaluation, each at most once (as the generated code does),
    remembering failures so a broken base is read once and reported, by its own name, for
    everything under it."""

    def __init__(self, f_locals: Any, f_globals: Any) -> None:
        self.f_locals, self.f_globals = f_locals, f_globals
        self.values: dict[Source, Any] = {}
        self.errors: dict[Source, _ReadError] = {}

    def read(self, source: Source) -> Any:
        if source in self.values:
            return self.values[source]
        if source in self.errors:
            raise self.errors[source]
        try:
            if isinstance(source, ChainedSource):
                value = source.access(self.read(source.base))
            else:
                value = source.get_value(self.f_locals, self.f_globals)
        except _ReadError as e:
            self.errors[source] = e
            raise
        except Exception as e:
            error = _ReadError(source, e)
            self.errors[source] = error
            raise error from e
        self.values[source] = value
        return value


def _failure(leaf: Leaf, reason: str) -> GuardFailure:
    return GuardFailure(
        reason=reason,
        kind=leaf.kind.name,
        source_names=tuple(s.name() for s in leaf.sources),
        guard=leaf.guard,
        user_stack=leaf.user_stack,
        params=leaf.params,
    )


def evaluate_leaf(leaf: Leaf, reader: _Reader, *, explain: bool) -> Optional[GuardFailure]:
    """None if the leaf holds; else a failure (with a reason only when ``explain``)."""
    values = []
    for source in leaf.sources:
        try:
            values.append(reader.read(source))
        except _ReadError as e:
            if not explain:
                return _FAILED
            return _failure(
                leaf,
                f"{e.source.name()} could not be read: {type(e.error).__name__}: {e.error}",
            )
    value: Any = tuple(values) if leaf.kind.relational else (values[0] if values else None)
    try:
        ok = bool(leaf.kind.holds(value, leaf.params))
    except Exception as e:
        if not explain:
            return _FAILED
        return _failure(leaf, f"{leaf.code()} failed: checking raised {type(e).__name__}: {e}")
    if ok:
        return None
    if not explain:
        return _FAILED
    try:
        reason = leaf.kind.reason(leaf.names(), value, leaf.params)
    except Exception as e:
        reason = f"{leaf.code()} failed (the reason could not be built: {type(e).__name__})"
    if len(leaf.sources) == 1:
        reason += _closure_hint(leaf.sources[0], reader)
    return _failure(leaf, reason)


def _closure_hint(source: Source, reader: _Reader) -> str:
    """`` (HINT: guard on "n")`` when ``source`` reads a closure variable of a function
    (``F.__closure__[i].cell_contents``, then perhaps more): the innermost such variable,
    by the name the function's code gives it, and the rest of the path after it
    (``"transform".scale``). Empty when there is none or it cannot be named."""
    for link in source.chain():
        if not (isinstance(link, ChainedSource) and link.name().endswith(".cell_contents")):
            continue
        item = link.base
        index = getattr(item, "index", None)
        if not (isinstance(item, ChainedSource) and type(index) is int
                and isinstance(item.base, ChainedSource)
                and item.base.name().endswith(".__closure__")):
            continue
        try:
            names = reader.read(item.base.base).__code__.co_freevars
            var = names[index]
        except Exception:  # not a plain function, or a read that fails: no hint
            return ""
        return f' (HINT: guard on "{var}"{source.name()[len(link.name()):]})'
    return ""


_FAILED = GuardFailure("failed", "", ())


def evaluate(leaves: Iterable[Leaf], f_locals: Any, f_globals: Any) -> bool:
    """True if every leaf holds for this frame (a read or check that raises fails)."""
    reader = _Reader(f_locals, f_globals)
    return all(evaluate_leaf(leaf, reader, explain=False) is None for leaf in leaves)


def explain_leaves(
    leaves: Iterable[Leaf], f_locals: Any, f_globals: Any, *, first_only: bool = False
) -> list[GuardFailure]:
    """The failures of the leaves, in check order. A source that cannot be read is a
    reason of its own only when no failed guard reads it or a source it derives from (a
    guard below a failed one says nothing more), and is reported once; a reason given
    twice is given once ([Note: Recompile reasons] in cache.reasons)."""
    reader = _Reader(f_locals, f_globals)
    # (failure, the source that could not be read or None, the leaf's sources)
    failures: list[tuple[GuardFailure, Optional[Source], tuple[Source, ...]]] = []
    for leaf in leaves:
        failure = evaluate_leaf(leaf, reader, explain=True)
        if failure is None:
            continue
        unreadable = next((reader.errors[s].source for s in leaf.sources if s in reader.errors),
                          None)
        failures.append((failure, unreadable, leaf.sources))
        if first_only:
            break
    failed = {s for _, unreadable, sources in failures if unreadable is None for s in sources}
    out: list[GuardFailure] = []
    seen: set[str] = set()
    for failure, unreadable, _ in failures:
        if unreadable is not None and any(link in failed for link in unreadable.chain()):
            continue
        if failure.reason not in seen:
            seen.add(failure.reason)
            out.append(failure)
    return out
