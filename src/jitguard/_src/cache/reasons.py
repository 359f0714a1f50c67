"""Recompile reasons: why each existing entry rejected a call, as records, log lines and
per-guard counts.

May import: ids, compiler.reference, cache.entry.

# [Note: Recompile reasons]
# On every miss with entries present, each entry's check is explained (the reference
# evaluator names every failing guard) and each failure becomes a line
# ``"<entry's compile id>: <reason>"``, e.g. ``0/0: L['n'] == 7 failed: got 8``, the form
# torch.compile users know (sources keep their ``L[...]`` names). The lines are logged on
# the ``jitguard.recompiles`` logger (INFO; one message per recompile, entries in dispatch
# order), kept as a ``RecompileRecord`` on the function, and counted per guard:
# ``"<kind> <sources>"`` -> how many recompiles it took part in, on the entry and summed over
# the function.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any, Optional

from ..compiler.reference import GuardFailure
from ..ids import CompileId
from .entry import CacheEntry

__all__ = [
    "EntryFailures",
    "RecompileRecord",
    "collect_failures",
    "failure_key",
    "format_recompile",
    "log",
]

log = logging.getLogger("jitguard.recompiles")


def failure_key(failure: GuardFailure) -> str:
    """The per-guard counting key: the guard kind and the sources it reads."""
    names = ", ".join(failure.source_names)
    return f"{failure.kind} {names}" if names else failure.kind


@dataclasses.dataclass(frozen=True)
class EntryFailures:
    """Why one entry rejected a call."""

    compile_id: CompileId
    failures: tuple[GuardFailure, ...]

    def lines(self) -> list[str]:
        if not self.failures:
            return [f"{self.compile_id}: (no guard failed when re-evaluated)"]
        return [f"{self.compile_id}: {f.reason}" for f in self.failures]


@dataclasses.dataclass(frozen=True)
class RecompileRecord:
    """One recompile: the entry it made (``compile_id``; None when it was refused), the
    failures of every entry that existed, and the sources it made dynamic."""

    compile_id: Optional[CompileId]
    entries: tuple[EntryFailures, ...]
    made_dynamic: tuple[str, ...] = ()
    outcome: str = "compiled"

    def reasons(self) -> list[str]:
        """One ``"<compile id>: <reason>"`` line per failing guard, entries in dispatch order."""
        return [line for e in self.entries for line in e.lines()]

    def __str__(self) -> str:
        return "; ".join(self.reasons())


def collect_failures(entries: Sequence[CacheEntry], values: tuple[Any, ...]) -> tuple[EntryFailures, ...]:
    """Explain every entry's rejection of ``values`` (entries in the order given)."""
    out = []
    for entry in entries:
        try:
            failures = tuple(entry.check.explain(*values))
        except Exception as e:  # a reason must never break the call
            failures = (
                GuardFailure(f"the failures could not be explained: {type(e).__name__}: {e}",
                             "UNEXPLAINED", ()),
            )
        out.append(EntryFailures(entry.compile_id, failures))
    return tuple(out)


def count_failures(entries: Sequence[CacheEntry], per_entry: Sequence[EntryFailures]) -> None:
    """Count each failing guard once on its entry."""
    by_id = {e.compile_id: e for e in entries}
    for item in per_entry:
        entry = by_id.get(item.compile_id)
        if entry is None:
            continue
        for key in dict.fromkeys(failure_key(f) for f in item.failures):
            entry.failure_counts[key] += 1


def format_recompile(
    what: str, compile_id: Optional[CompileId], per_entry: Sequence[EntryFailures],
    made_dynamic: Sequence[str] = (),
) -> str:
    """The message logged for one recompile."""
    head = f"Recompiling function {what}" + (f" as {compile_id}" if compile_id else "")
    lines = [head, "    triggered by the following guard failure(s):"]
    lines += [f"    - {line}" for e in per_entry for line in e.lines()]
    if made_dynamic:
        lines.append(f"    now dynamic (an int changed value): {', '.join(made_dynamic)}")
    return "\n".join(lines)
