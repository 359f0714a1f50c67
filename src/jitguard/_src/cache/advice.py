"""The recompile advisor: the source that keeps causing recompiles, the evidence, and the fix.
Read from the recompile records the cache keeps and the guards of its entries, never from
the text of a reason. The rules themselves are in cache.advice_rules (and, for torch, in
the torch integration, registered with ``register_advice_rule``).

May import: _util, config, structured, compiler.kinds, compiler.values, cache.reasons.
The built-in rules (cache.advice_rules) register themselves when imported: the modules
that ask for advice (cache.inspection, cache.miss) import them, so that this module and
its rules import no cycle.

# [Note: Recompile advice]
# A recompile record ([Note: Recompile reasons]) is *caused* by the sources whose guards
# failed in every entry it covers (when no source failed in all of them: every source that
# failed). A guard over several sources (a batched tensor guard) counts only the sources
# whose pinned value differs from what the record's own new entry pinned, when that entry
# is still there. A cause under another cause (``L['m']._parameters['weight']`` under
# ``L['m']``) folds into it. A source *churns* when it caused at least ``threshold``
# recompiles (``jitguard.config.advice_threshold``, default 3), or, once the recompile
# limit refused a call, when it is the cause of that refusal that caused the most (it used
# the limit up). A source the cache now guards as dynamic (declared, or made so by automatic
# dynamic) has stopped churning, and so has a tensor whose newest entry has the changing
# dims dynamic (Dynamo's automatic dynamic shapes). Each churning source goes to the rules in order, registered rules first
# (the torch integration's: tensor sizes, dtype, device, requires_grad, a module's
# ``training``), then the built-in ones (a global or closure variable, a scalar argument
# pinned by value, an object guarded by identity); the first that answers wins: an
# ``Advice``, or ``NO_ADVICE`` (the churn is fine: ``training`` flipping compiles each mode
# once); a source no rule takes gets a plain advice naming it. The values seen are what
# the source's guards pinned in each entry, oldest first (``GuardKind.detail``, else the
# params). Nothing is computed on the hot path: ``cache.advice()``, ``jitguard.explain``
# and the recompile limit's warning and error compute it when read; a recompile computes it
# only while the ``jitguard.recompiles`` logger is at INFO or a trace is on, and then logs
# each advice once, the first time it fires (and traces it: a ``jitguard_advice`` artifact).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional, Union

from .. import structured
from .._util import constant_repr
from ..compiler.kinds import guard_kinds
from ..compiler.values import Ident
from ..config import config
from .reasons import RecompileRecord, log

__all__ = [
    "NO_ADVICE",
    "Advice",
    "AdviceContext",
    "Churn",
    "Evidence",
    "Seen",
    "advise",
    "announce",
    "limit_advice",
    "register_advice_rule",
]

# Failures not made from a guard (an entry gone or invalidated, an explanation that raised):
# they say nothing about a source.
_NOT_A_CAUSE = frozenset({"GONE", "UNEXPLAINED", "NONDETERMINISTIC", "INVALIDATED", ""})


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What an advice rests on: the distinct values the source's guards pinned, oldest
    first, and how many recompiles the source caused (``limit``: the recompile limit it
    used up, when it did)."""

    values: tuple[str, ...]
    recompiles: int
    limit: Union[int, str, None] = None

    def __str__(self) -> str:
        n = self.recompiles
        text = f"{n} recompile{'' if n == 1 else 's'}"
        if self.limit is not None:
            text += f" (recompile limit {self.limit} hit)"
        if self.values:
            text += "; values seen: " + ", ".join(self.values)
        return text


@dataclasses.dataclass(frozen=True)
class Advice:
    """One piece of advice: ``source`` (its name, as in the reasons) churns; ``message``
    says what churns and what to do, ``evidence`` the values seen and the recompiles caused,
    ``fix`` the code to write (None where there is none); ``rule`` names the rule that
    gave it. See [Note: Recompile advice]."""

    source: str
    message: str
    evidence: Evidence
    fix: Optional[str] = None
    rule: str = "generic"

    def __repr__(self) -> str:
        fix = f", fix={self.fix!r}" if self.fix else ""
        return (f"Advice({self.source}: {self.message!r}, evidence=<{self.evidence}>{fix}, "
                f"rule={self.rule!r})")

    def lines(self) -> list[str]:
        """The advice as text: the message, the evidence, and the fix when there is one."""
        out = [self.message, f"  evidence: {self.evidence}"]
        if self.fix:
            fix = self.fix.splitlines()
            out.append(f"  fix: {fix[0]}")
            out.extend(f"       {line}" for line in fix[1:])
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "rule": self.rule, "message": self.message,
            "fix": self.fix,
            "evidence": {"values": list(self.evidence.values),
                         "recompiles": self.evidence.recompiles,
                         "limit": self.evidence.limit},
        }


class _NoAdvice:
    """What a rule returns for a churn that needs no advice."""

    def __repr__(self) -> str:
        return "NO_ADVICE"


NO_ADVICE: Any = _NoAdvice()


@dataclasses.dataclass(frozen=True)
class Seen:
    """What one guard of an entry pinned on the source: the guard's ``kind``, its
    ``params``, its ``detail`` for this source (``GuardKind.detail``; for a kind over
    several sources, this source's part), ``value`` (as text), ``key`` (for comparing) and
    ``fact``: the name of the dispatch fact it pins ("value", "id", "len", ...; see
    ``GuardKind.fact``), None when it pins none."""

    compile_id: str
    kind: str
    params: Any
    detail: Optional[dict[str, Any]]
    value: str
    key: str
    fact: Optional[str] = None  # the name of the fact the guard pins (``GuardKind.fact``)


@dataclasses.dataclass(frozen=True)
class Churn:
    """A source that caused ``recompiles`` recompiles: the guard ``kinds`` that failed on
    it, what each entry's guards pinned on it (``seen``, oldest entry first), and the
    recompile ``limit`` when it used the limit up."""

    source: str
    kinds: tuple[str, ...]
    recompiles: int
    seen: tuple[Seen, ...]
    limit: Union[int, str, None] = None

    def of_kind(self, *kinds: str) -> tuple[Seen, ...]:
        """What the guards of these kinds (by name) pinned."""
        return tuple(s for s in self.seen if s.kind in kinds)

    def pinning(self, *facts: str) -> tuple[Seen, ...]:
        """What the guards that pin one of these facts ("value", "id", ...) pinned."""
        return tuple(s for s in self.seen if s.fact in facts)

    def values(self, seen: Optional[Iterable[Seen]] = None) -> tuple[str, ...]:
        """The distinct values seen, oldest first."""
        return tuple(dict.fromkeys(s.value for s in (self.seen if seen is None else seen)))

    def evidence(self, values: Optional[Sequence[str]] = None) -> Evidence:
        return Evidence(tuple(self.values() if values is None else values), self.recompiles,
                        self.limit)


@dataclasses.dataclass(frozen=True)
class AdviceContext:
    """What a rule knows of the function: its report name (``where``), its name in code
    (``name``), its parameters and closure variables, and the ``frontend`` it was compiled
    with ("specialize", "jitguard.torch.compile", ...); ``cache`` is the FunctionCache."""

    where: str
    name: str
    params: tuple[str, ...]
    freevars: tuple[str, ...]
    frontend: str
    cache: Any


Rule = Callable[[Churn, AdviceContext], Any]
_rules: list[tuple[str, Rule]] = []
_builtin: list[tuple[str, Rule]] = []


def register_advice_rule(name: str, rule: Rule, *, builtin: bool = False) -> None:
    """Add an advice rule: ``rule(churn, ctx)`` returns an ``Advice``, ``NO_ADVICE``, or None
    (not this rule's). Registered rules are tried before the built-in ones, the last
    registered first; registering a name again replaces that rule. See
    [Note: Recompile advice]."""
    table = _builtin if builtin else _rules
    table[:] = [(n, r) for n, r in table if n != name]
    if builtin:
        table.append((name, rule))
    else:
        table.insert(0, (name, rule))


# ---- what the entries pinned ---------------------------------------------------------------


def _text(value: Any) -> str:
    if isinstance(value, Ident):
        obj = value.get()
        name = getattr(obj, "__qualname__", None) if obj is not None else None
        what = f"{value.type_name} {name}" if isinstance(name, str) else value.type_name
        return f"<{what} at {value.id:#x}>"
    text = constant_repr(value)  # never raises (an int past the decimal digit limit)
    return text if len(text) <= 60 else text[:57] + "..."


def _key(value: Any) -> str:
    if isinstance(value, Ident):
        return f"id {value.id:#x}"
    try:
        return json.dumps(value, sort_keys=True, default=constant_repr)
    except Exception:  # a key json cannot write, an int past the decimal digit limit
        return constant_repr(value)


def _seen(compile_id: str, kind_name: str, params: Any, index: int) -> Seen:
    detail: Optional[dict[str, Any]] = None
    fact: Optional[str] = None
    kind = guard_kinds().get(kind_name)
    if kind is not None:
        try:
            detail = kind.detail(params)
        except Exception:  # a detail that raised: the params then
            detail = None
        try:
            pinned = kind.fact(params)
            fact = pinned[0] if pinned is not None else None
        except Exception:
            fact = None
    if detail is not None and isinstance(detail.get("per_source"), list):
        parts = detail["per_source"]
        detail = parts[index] if index < len(parts) else None
    if detail is not None:
        return Seen(compile_id, kind_name, params, detail, _key(detail), _key(detail), fact)
    return Seen(compile_id, kind_name, params, None, _text(params), _key(params), fact)


class _Pinned:
    """compile id -> source name -> kind -> Seen, from the live entries and the failures."""

    def __init__(self) -> None:
        self.by: dict[str, dict[str, dict[str, Seen]]] = {}
        self.order: dict[str, tuple[int, int]] = {}

    def add(self, compile_id: Any, kind: str, params: Any, names: Sequence[str]) -> None:
        cid = str(compile_id)
        if cid not in self.order:
            self.order[cid] = (getattr(compile_id, "frame_id", 0),
                               getattr(compile_id, "frame_compile_id", len(self.order)))
        per = self.by.setdefault(cid, {})
        for i, name in enumerate(names):
            kinds = per.setdefault(name, {})
            if kind not in kinds:
                kinds[kind] = _seen(cid, kind, params, i)

    def get(self, compile_id: Any, name: str, kind: str) -> Optional[Seen]:
        return self.by.get(str(compile_id), {}).get(name, {}).get(kind)

    def of(self, name: str, kinds: Iterable[str]) -> tuple[Seen, ...]:
        wanted = set(kinds)
        out = []
        for cid in sorted(self.by, key=lambda c: self.order[c]):
            for kind, seen in self.by[cid].get(name, {}).items():
                if kind in wanted:
                    out.append(seen)
        return tuple(out)


def _under(name: str, base: str) -> bool:
    return len(name) > len(base) and name.startswith(base) and name[len(base)] in ".["


def _fold(names: set[str]) -> set[str]:
    """The names not under another one of them."""
    return {n for n in names if not any(_under(n, other) for other in names)}


def _causes(record: RecompileRecord, pinned: _Pinned) -> tuple[set[str], dict[str, set[str]]]:
    """The sources that caused ``record`` and, per source, the kinds that failed on it."""
    new = record.compile_id
    per_entry: list[set[str]] = []
    kinds: dict[str, set[str]] = {}
    for item in record.entries:
        names: set[str] = set()
        for failure in item.failures:
            if failure.kind in _NOT_A_CAUSE:
                continue
            these: Sequence[str] = failure.source_names or (failure.kind,)
            if len(these) > 1 and new is not None:
                changed = []
                for n in these:
                    old, now = (pinned.get(item.compile_id, n, failure.kind),
                                pinned.get(new, n, failure.kind))
                    if old is None or now is None or old.key != now.key:
                        changed.append(n)
                these = changed or these
            for n in these:
                names.add(n)
                kinds.setdefault(n, set()).add(failure.kind)
        if names:
            per_entry.append(names)
    if not per_entry:
        return set(), kinds
    causes = set.intersection(*per_entry) or set.union(*per_entry)
    return _fold(causes), kinds


def _context(cache: Any) -> AdviceContext:
    fn = getattr(cache, "fn", None)
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", None)
    return AdviceContext(
        where=getattr(cache, "where", "?"),
        name=name if isinstance(name, str) and name.isidentifier() else "f",
        params=tuple(getattr(getattr(cache, "signature", None), "params", ())),
        freevars=tuple(getattr(code, "co_freevars", ())),
        frontend=getattr(cache, "advice_frontend", "specialize"),
        cache=cache,
    )


def advise(cache: Any, extra: Sequence[RecompileRecord] = (), *,
           threshold: Optional[int] = None) -> list[Advice]:
    """The advice for ``cache`` (a FunctionCache) from its recompile records, plus
    ``extra`` ones (a refused recompile not yet kept). See [Note: Recompile advice]."""
    if threshold is None:
        threshold = config.advice_threshold
    if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
        raise ValueError(f"the advice threshold must be an int >= 1, got {threshold!r}")
    records = [*cache.recompiles, *extra]
    if not records:
        return []
    pinned = _Pinned()
    wanted: set[str] = set()  # only what failed is read from the live entries
    for record in records:
        for item in record.entries:
            for failure in item.failures:
                if failure.kind not in _NOT_A_CAUSE:
                    pinned.add(item.compile_id, failure.kind, failure.params,
                               failure.source_names)
                    wanted.update(failure.source_names)
    for entry in cache.entries():
        for leaf in entry.check.leaves:
            names = [s.name() for s in leaf.sources]
            if wanted.intersection(names):
                pinned.add(entry.compile_id, leaf.kind.name, leaf.params, names)
    counts: Counter[str] = Counter()
    kinds: dict[str, set[str]] = {}
    first: dict[str, int] = {}
    limit_causes: set[str] = set()
    for i, record in enumerate(records):
        causes, failed = _causes(record, pinned)
        for name in causes:
            kinds.setdefault(name, set()).update(failed.get(name, ()))
            first.setdefault(name, i)
            if record.outcome == "limit":
                limit_causes.add(name)
            elif record.outcome == "compiled":
                counts[name] += 1
    limit = getattr(cache, "recompile_limit", None)
    hit = bool(limit_causes) or cache.recompile_counts.get("limit", 0) > 0
    used_up: set[str] = set()
    if hit:  # the cause that recompiled most (a first compile alone uses up a limit of 1)
        pool = limit_causes or set(counts)
        top = max((counts[n] for n in pool), default=0)
        used_up = {n for n in pool if counts[n] == top} if top else set()
    churning = sorted({n for n, c in counts.items() if c >= threshold} | used_up,
                      key=lambda n: (-counts[n], first.get(n, 0), n))
    # A source the cache guards as dynamic now (declared, or made so by a recompile) no
    # longer churns, unless it used up the limit.
    relaxed = {s.name() for s in getattr(cache, "dynamic", ())} - used_up
    ctx = _context(cache)
    out = []
    for name in churning:
        if name in relaxed:
            continue
        churn = Churn(name, tuple(sorted(kinds.get(name, ()))), counts[name],
                      pinned.of(name, kinds.get(name, ())),
                      limit if name in used_up else None)
        advice = _apply(churn, ctx)
        if advice is not None:
            out.append(advice)
    return out


def _apply(churn: Churn, ctx: AdviceContext) -> Optional[Advice]:
    for _name, rule in (*_rules, *_builtin):
        answer = rule(churn, ctx)
        if answer is NO_ADVICE:
            return None
        if isinstance(answer, Advice):
            if churn.limit is not None:
                answer = dataclasses.replace(
                    answer, message=f"Recompile limit ({churn.limit}) hit: {answer.message}")
            return answer
    return None


def _one_line(advice: Advice) -> str:
    fix = "; ".join(line.strip() for line in (advice.fix or "").splitlines())
    return advice.message + (f" Fix: {fix}" if fix else "")


def announce(cache: Any, compile_id: Any, given: set[tuple[str, str, bool]]) -> None:
    """After a recompile record was kept (``compile_id``: the entry it made, None when it
    was refused): log each advice that fires for the first time, one line each, on
    ``jitguard.recompiles`` at INFO, and trace it as a ``jitguard_advice`` artifact; only
    while someone listens. A refusal at the limit logs no line of its own: the limit's
    message, logged there too, ends with the advice. ``given``: the (source, rule, at the
    limit) already logged, the miss path's (``MissPath.advised``), updated here. Never raises:
    advice must not break a call."""
    tracing = structured.active()
    if not (tracing or log.isEnabledFor(logging.INFO)):
        return
    try:
        found = advise(cache)
    except Exception as e:
        log.info("%s: no advice: the advisor raised %s: %s", cache.where, type(e).__name__, e)
        return
    new = [a for a in found if (a.source, a.rule, a.evidence.limit is not None) not in given]
    if not new:
        return
    given.update((a.source, a.rule, a.evidence.limit is not None) for a in new)
    for advice in new if compile_id is not None else ():
        log.info("%s: advice for %s: %s", cache.where, advice.source, _one_line(advice))
    if tracing:
        if compile_id is None:  # refused at the limit: under the function's last compile
            infos = cache.compile_infos()
            compile_id = infos[-1].compile_id if infos else None
        structured.emit(
            "artifact", lambda intern: {"name": "jitguard_advice", "encoding": "json"},
            compile_id=compile_id, payload=[a.as_dict() for a in new],
            where="jitguard/_src/cache/advice.py:0",
        )


def limit_advice(cache: Any) -> Callable[[RecompileRecord], list[str]]:
    """For the recompile limit's warning and error: the advice, with the refused record, as
    the lines that end the message."""

    def lines(record: RecompileRecord) -> list[str]:
        try:
            found = advise(cache, (record,))
        except Exception as e:
            return [f"(no advice: the advisor raised {type(e).__name__}: {e})"]
        out = []
        for advice in found:
            first, *rest = advice.lines()
            out.append(f"    - {first}")
            out.extend(f"    {line}" for line in rest)
        return out

    return lines

