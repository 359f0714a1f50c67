"""Recompile reasons: why the entries closest to a call rejected it, as records computed
when read, log lines, per-guard counts, and the bounded history that keeps them.

May import: _util, ids, compiler.reference, dispatch.entry.

# [Note: Recompile reasons]
# On a miss with entries present, the reasons cover the entries *closest* to the call
# (``closest_entries``): those under the call's dispatch key, then the most specific
# others, at most ``EXPLAINED`` of them; the other entries are reported as a count
# (``RecompileRecord.unexplained``). Each failure of a covered entry becomes a line
# ``"<entry's compile id>: <reason>"``, e.g. ``0/0: L['n'] == 7 failed: got 8``, the form
# torch.compile users know, covered entries in dispatch order, each text once. A source
# that cannot be read because a guard on it or its base failed is no reason of its own
# (``explain_leaves``). A function of the torch frontend names locals as torch does
# (``tensor 'x' ...``, ``len(xs) == 3``: ``torch_names``, ``display``); ``specialize``'s
# keep their sources' names (``L['n']``). A guard on a closure variable's cell names the
# variable (``... (HINT: guard on "n")``). The logged message is as short as torch's: per
# entry, its first failure and ``(+N more)``; every failure with the ``recompiles`` log at
# DEBUG (``+recompiles``) or the ``recompiles_verbose`` log on (which then gets the message
# instead). Under each failure shown it gives the user stack its guard was installed at
# (``User stack trace:`` and one line per frame and source line, as torch's recompile log),
# user frames only: frames in jitguard's or torch's own files (``hide_frames_under``) and
# the function's own definition are left out, and a stack with no frame left is not shown.
# ``reasons()`` stays one line per failure.
#
# The explanation is lazy, so that a miss costs the same with 10 entries as with 10,000:
# the record keeps the covered entries weakly and the call's values, and explains them
# when first read (``reasons()``, ``record.entries``, ``guard_failure_counts()``), then
# keeps the result. Values are kept only when reading them later gives the same answer as
# now: immutable scalars and tuples of them (``keepable``). Any other call (a list that
# may change, an object, a tensor) is explained at once, for the covered entries only,
# and its values are not kept at all. The explanation is also made at once when something
# needs it then: the ``jitguard.recompiles`` logger at INFO (one message per recompile),
# [Note: Automatic dynamic], a refused recompile's error or warning. An entry evicted or
# dropped before a lazy record is read is explained as ``(entry gone: not explained)``.
#
# The function keeps the last ``history`` records (default 64: ``RecompileHistory``) and
# counts every record by outcome. Per-guard counts (``"<kind> <sources>"`` -> in how many
# entry rejections that guard failed, on the entry and summed over the function) are
# counted over the records kept.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import re
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, Optional

from .._util import is_scalar_type
from ..compiler.reference import GuardFailure
from ..dispatch.entry import CacheEntry
from ..ids import CompileId

__all__ = [
    "EXPLAINED",
    "EntryFailures",
    "RecompileHistory",
    "RecompileRecord",
    "collect_failures",
    "display",
    "failure_key",
    "format_recompile",
    "hide_frames_under",
    "keepable",
    "log",
    "recompile_logger",
    "verbose_log",
]

log = logging.getLogger("jitguard.recompiles")
# Every failure of every entry, each with its user stack ([Note: Recompile reasons]).
verbose_log = logging.getLogger("jitguard.recompiles_verbose")

# How many entries (the closest to the call) a recompile's reasons cover.
EXPLAINED = 8
# How many recompile records a function keeps, by default.
HISTORY = 64

def keepable(values: tuple[Any, ...], depth: int = 0) -> bool:
    """True if every value is an immutable scalar, or a tuple of them (decided by exact
    type): explaining them later gives the text explaining them now would."""
    for v in values:
        tp = type(v)
        if is_scalar_type(tp):
            continue
        if tp is tuple and depth < 4 and keepable(v, depth + 1):
            continue
        return False
    return True


def failure_key(failure: GuardFailure) -> str:
    """The per-guard counting key: the guard kind and the sources it reads."""
    names = ", ".join(failure.source_names)
    return f"{failure.kind} {names}" if names else failure.kind


@dataclasses.dataclass(frozen=True)
class EntryFailures:
    """Why one entry rejected a call."""

    compile_id: Any
    failures: tuple[GuardFailure, ...]

    def shown(self) -> list[GuardFailure]:
        """The failures as reasons: each text once, in check order."""
        seen: set[str] = set()
        out = []
        for f in self.failures:
            if f.reason not in seen:
                seen.add(f.reason)
                out.append(f)
        return out

    def lines(self, *, user_stack: bool = False, fn_frame: Any = None,
              first_only: bool = False, torch_names: bool = False) -> list[str]:
        """One line per failure (each text once; with ``torch_names``, locals named as
        torch.compile names them, see ``display``); with ``first_only``, the first failure and ``(+N more)``. With
        ``user_stack``, each failure shown is followed by the user stack its guard was
        installed at, user frames only (``User stack trace:`` then its frames, one line
        each, as torch.compile's recompile log shows it): frames in a library's own files
        (jitguard's, torch's: ``hide_frames_under``) and frames that are only ``fn_frame``
        (the compiled function's own definition, all a specialized function's guards
        carry) are left out, and a stack with no frame left is not shown."""
        failures = self.shown()
        if not failures:
            return [f"{self.compile_id}: (no guard failed when re-evaluated)"]
        more = 0
        if first_only:
            failures, more = failures[:1], len(failures) - 1
        out = []
        for f in failures:
            text = display(f.reason) if torch_names else f.reason
            if more:
                text += f" (+{more} more)"
            if user_stack and f.user_stack:
                frames = [fr for fr in f.user_stack if _user_frame(fr, fn_frame)]
                text += _format_stack(frames)
            out.extend(f"{self.compile_id}: {text}".splitlines())
        return out


# [Note: Recompile reasons], the names: ``L['x']`` is written ``x``, as torch writes it.
_LOCAL = re.compile(r"(?<![\w\].])L\[\s*(['\"])(.*?)\1\s*\]")


def display(text: str) -> str:
    """A reason as torch.compile writes it: every local ``L['name']`` as ``name``."""
    return _LOCAL.sub(r"\2", text) if "L[" in text else text


# Directories whose frames are a library's, not the user's (see ``lines``).
_LIBRARY_DIRS: list[str] = [
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
]


def hide_frames_under(directory: str) -> None:
    """Leave frames in files under ``directory`` (a library's own) out of user stacks."""
    prefix = os.path.join(os.path.abspath(directory), "")
    if prefix not in _LIBRARY_DIRS:
        _LIBRARY_DIRS.append(prefix)


def _user_frame(frame: Any, fn_frame: Any) -> bool:
    if fn_frame is not None and _same_frame(frame, fn_frame):
        return False
    filename = os.path.abspath(frame.filename) if frame.filename else ""
    return not filename.startswith(tuple(_LIBRARY_DIRS))


def _format_stack(frames: Sequence[Any]) -> str:
    if not frames:
        return ""
    lines = []
    for frame in frames:
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    return "\nUser stack trace:\n" + "\n".join(lines)


def _same_frame(a: Any, b: Any) -> bool:
    return (a.filename, a.lineno, a.name) == (b.filename, b.lineno, b.name)


def explain_entry(entry: CacheEntry, values: tuple[Any, ...]) -> EntryFailures:
    """Explain one entry's rejection of ``values`` (an explanation that raises becomes a
    failure saying so: a reason must never break the call)."""
    try:
        failures = tuple(entry.check.explain(*values))
    except Exception as e:
        failures = (
            GuardFailure(f"the failures could not be explained: {type(e).__name__}: {e}",
                         "UNEXPLAINED", ()),
        )
    return EntryFailures(entry.compile_id, failures)


def collect_failures(entries: Sequence[CacheEntry], values: tuple[Any, ...]) -> tuple[EntryFailures, ...]:
    """Explain every entry's rejection of ``values`` (entries in the order given)."""
    return tuple(explain_entry(entry, values) for entry in entries)


def _gone(compile_id: Any) -> EntryFailures:
    return EntryFailures(
        compile_id, (GuardFailure("(entry gone: not explained)", "GONE", ()),)
    )


class RecompileRecord:
    """One recompile: the entry it made (``compile_id``; None when it was refused), why the
    entries closest to the call rejected it (``entries``, computed when first read, see
    [Note: Recompile reasons]), how many other entries there were (``unexplained``), and
    the sources it made dynamic."""

    __slots__ = (
        "__weakref__",
        "_entries",
        "_pending",
        "_values",
        "compile_id",
        "made_dynamic",
        "outcome",
        "torch_names",
        "unexplained",
    )

    def __init__(
        self,
        compile_id: Optional[CompileId],
        entries: Optional[tuple[EntryFailures, ...]] = None,
        made_dynamic: tuple[str, ...] = (),
        outcome: str = "compiled",
        *,
        pending: Sequence[CacheEntry] = (),
        values: Optional[tuple[Any, ...]] = None,
        unexplained: int = 0,
        torch_names: bool = False,
    ) -> None:
        self.compile_id = compile_id
        # the reasons name locals as torch.compile does (``display``)
        self.torch_names = torch_names
        self.made_dynamic = made_dynamic
        self.outcome = outcome
        self.unexplained = unexplained
        self._entries = entries
        # (weak reference, compile id) of each covered entry, until explained.
        self._pending: Optional[tuple[tuple[Any, Any], ...]] = None
        self._values: Optional[tuple[Any, ...]] = None
        if entries is None:
            self._pending = tuple((weakref.ref(e), e.compile_id) for e in pending)
            self._values = values

    @classmethod
    def explained_now(
        cls, compile_id: Optional[CompileId], covered: Sequence[CacheEntry],
        values: tuple[Any, ...], *, unexplained: int = 0, made_dynamic: tuple[str, ...] = (),
        outcome: str = "compiled", torch_names: bool = False,
    ) -> RecompileRecord:
        """A record explained at once: values that may change are not kept."""
        return cls(compile_id, collect_failures(covered, values), made_dynamic, outcome,
                   unexplained=unexplained, torch_names=torch_names)

    @property
    def explained(self) -> bool:
        return self._entries is not None

    @property
    def entries(self) -> tuple[EntryFailures, ...]:
        """Why each covered entry rejected the call, in dispatch order."""
        entries = self._entries
        if entries is None:
            values = self._values if self._values is not None else ()
            out = []
            for ref, compile_id in self._pending or ():
                entry = ref()
                out.append(_gone(compile_id) if entry is None else explain_entry(entry, values))
            entries = self._entries = tuple(out)
            self._pending = self._values = None
        return entries

    def reasons(self) -> list[str]:
        """One ``"<compile id>: <reason>"`` line per failing guard (each text once),
        entries in dispatch order."""
        return [line for e in self.entries for line in e.lines(torch_names=self.torch_names)]

    def __str__(self) -> str:
        text = "; ".join(self.reasons())
        if self.unexplained:
            text += f"; {_others(self.unexplained)}"
        return text

    def __repr__(self) -> str:
        return (f"<RecompileRecord {self.compile_id} {self.outcome}: "
                f"{len(self._pending or self._entries or ())} entries explained"
                f"{', lazily' if not self.explained else ''}, {self.unexplained} not>")


def _others(n: int) -> str:
    return f"(and {n} other entr{'y' if n == 1 else 'ies'}, not explained)"


class RecompileHistory:
    """The last ``size`` recompile records of a function, and a count of every record ever
    made, by outcome ("compiled", "limit", "forbidden")."""

    __slots__ = ("_records", "counts", "size")

    def __init__(self, size: int = HISTORY) -> None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"history must be an int >= 0, got {size!r}")
        self.size = size
        self._records: collections.deque[RecompileRecord] = collections.deque(maxlen=size)
        self.counts: collections.Counter[str] = collections.Counter()

    def add(self, record: RecompileRecord) -> None:
        self.counts[record.outcome] += 1
        if self.size:
            self._records.append(record)

    @property
    def total(self) -> int:
        """Every record ever added (kept or not)."""
        return sum(self.counts.values())

    def records(self) -> tuple[RecompileRecord, ...]:
        return tuple(self._records)

    def failure_counts(self) -> collections.Counter[str]:
        """``"<kind> <sources>"`` -> in how many entry rejections of the kept records that
        guard failed."""
        out: collections.Counter[str] = collections.Counter()
        for record in list(self._records):
            for item in record.entries:
                for failure in item.failures:
                    out[failure_key(failure)] += 1
        return out

    def counts_for(self, compile_id: Any) -> collections.Counter[str]:
        """Per guard of the entry ``compile_id``: in how many kept records it failed."""
        out: collections.Counter[str] = collections.Counter()
        for record in list(self._records):
            for item in record.entries:
                if item.compile_id == compile_id:
                    for key in dict.fromkeys(failure_key(f) for f in item.failures):
                        out[key] += 1
        return out

    def clear(self) -> None:
        self._records.clear()
        self.counts.clear()

    def __len__(self) -> int:
        return len(self._records)


def format_recompile(
    what: str, compile_id: Optional[CompileId], per_entry: Iterable[EntryFailures],
    made_dynamic: Sequence[str] = (), unexplained: int = 0, *, user_stack: bool = False,
    fn_frame: Any = None, verbose: bool = False, torch_names: bool = False,
) -> str:
    """The message for one recompile: per entry, its first failure and ``(+N more)``, or
    with ``verbose`` every failure (with ``user_stack``, each failure's user stack, less
    ``fn_frame``: see ``EntryFailures.lines``)."""
    head = f"Recompiling function {what}" + (f" as {compile_id}" if compile_id else "")
    lines = [head, "    triggered by the following guard failure(s):"]
    lines += [f"    - {line}" for e in per_entry
              for line in e.lines(user_stack=user_stack, fn_frame=fn_frame,
                                  first_only=not verbose, torch_names=torch_names)]
    if unexplained:
        lines.append(f"    {_others(unexplained)}")
    if made_dynamic:
        lines.append(f"    now dynamic (an int changed value): {', '.join(made_dynamic)}")
    return "\n".join(lines)


def recompile_logger() -> tuple[Optional[logging.Logger], bool]:
    """Where a recompile's message goes now, and whether it is the verbose one: the
    ``recompiles_verbose`` log when it is on, else ``recompiles`` (verbose at DEBUG, as
    ``+recompiles``), else nowhere (None)."""
    if verbose_log.isEnabledFor(logging.INFO):
        return verbose_log, True
    if log.isEnabledFor(logging.INFO):
        return log, log.isEnabledFor(logging.DEBUG)
    return None, False
