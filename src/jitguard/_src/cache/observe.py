"""What the cache reports about its compiles: a record per compile (always kept), the
``compile``/``guards``/``dispatch`` logs, the structured trace events, and the warning for
a guard set that grew too large.

May import: config, errors, integrations, structured, ids, guards, compiler.*, dispatch.entry,
cache.reasons.

# [Note: Compile events]
# ``FunctionCache`` (so ``specialize`` and everything built on it, ``jitguard.torch.compile``
# included) calls ``CompileLog.compiled``/``failed`` after every compile. Always, cheaply:
# a ``CompileInfo`` (compile id, wall-clock start, compile time, guard count, the check's
# cost, outcome) is kept for ``jitguard.explain``. The check's cost is measured right there,
# on the arguments that made the entry, as a hit runs it: the first call is not counted (it
# takes the structure snapshot and warms caches: on a 36-layer Qwen3 it took 3.1 ms where a
# hit's check takes about 0.1 ms); then up to nine more calls, stopping once 5 ms are spent,
# and the fastest is kept, in ns per call. A first call of 50 ms or more is kept as it is,
# and a check that raises gets no cost. Everything else is built only when someone listens:
# the ``compile`` log line, the ``guards`` log lines, and, when a structured trace is on
# ([Note: Structured trace]), these records, all under the compile id, in the event names
# tlparse renders:
#   * ``dynamo_start``: the user's stack at the call that compiled (jitguard's frames left
#     out), ending with the compiled function's own ``def`` line;
#   * ``artifact`` ``recompile_reasons`` (json): one ``"<entry id>: <reason>"`` per failing
#     guard of every existing entry (recompiles only);
#   * ``dynamo_guards``: one item per check: ``code`` (the guard as text), ``kind``,
#     ``sources``, the kind's ``detail`` when it has one, and the guard's ``user_stack``;
#   * ``artifact`` ``jitguard_check_source`` (string): the generated check, chunks included;
#   * ``compilation_metrics``: ``co_name``/``co_filename``/``co_firstlineno``, ``cache_size``
#     (entries before this one), ``guard_count``, ``guard_latency_us`` (the check's cost),
#     ``start_time``, ``entire_frame_compile_time_s``, ``recompile_reason``, and for a compile
#     that raised ``fail_type``/``fail_reason`` (tlparse then marks the compile as failed).
#
# [Note: Large guard sets]
# A guard set with more than ``jitguard.config.large_guard_set`` checks (default 1,000) is
# checked in full on every call that reaches it (a 100,000-item list argument makes 100,001
# checks: seconds to compile, milliseconds per call). The first time one of a function's
# compiles passes the threshold, a ``LargeGuardSetWarning`` says how many checks there are,
# what a call costs (for a check with a structure snapshot, how many it runs while the
# structure is unchanged), and which source made them: starting from the source with the most
# checks at or under it, it descends into a source under it while that one holds at least
# nine tenths of them, so it names ``L['cfg'].table`` rather than ``L['cfg']``.
"""

from __future__ import annotations

import collections
import dataclasses
import linecache
import logging
import os
import sys
import time
import traceback
import warnings
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Optional

from .. import structured
from ..compiler.builder import Leaf
from ..config import config
from ..dispatch.entry import CacheEntry
from ..errors import LargeGuardSetWarning
from ..guards import ChainedSource, Source
from ..ids import CompileId
from ..integrations import ensure_loaded
from .reasons import RecompileRecord

__all__ = [
    "CompileInfo",
    "CompileLog",
    "guard_report",
    "heaviest_source",
    "leaf_key",
    "measure_check",
]

compile_log = logging.getLogger("jitguard.compile")
guards_log = logging.getLogger("jitguard.guards")
dispatch_log = logging.getLogger("jitguard.dispatch")

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../jitguard/_src
_PKG_ROOT = os.path.dirname(_PKG_DIR)  # .../jitguard
_SLOW_CHECK_NS = 50_000_000  # a first call this slow is not repeated
_MORE_CALLS = 9
_MEASURE_BUDGET_NS = 5_000_000


@dataclasses.dataclass(frozen=True)
class CompileInfo:
    """One compile of a specialized function, as ``jitguard.explain`` reports it.

    ``outcome``: "compiled" (an entry was made), "not kept" (the compiler changed the
    arguments: the artifact served that call only) or "failed" (the compile raised:
    ``error``). ``check_cost_ns``: the new check's cost per call (None when not measured).
    """

    compile_id: CompileId
    outcome: str
    started_at: float  # time.time() when the compile began
    compile_time_s: float
    guard_count: int = 0
    check_cost_ns: Optional[float] = None
    recompile: bool = False
    error: Optional[str] = None

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["compile_id"] = str(self.compile_id)
        return out


def measure_check(fn: Callable[..., Any], values: tuple[Any, ...]) -> Optional[float]:
    """ns per call of ``fn(*values)``: see [Note: Compile events]. None if it raised."""
    clock = time.perf_counter_ns
    try:
        t0 = clock()
        fn(*values)
        first = clock() - t0
        if first >= _SLOW_CHECK_NS:
            return float(first)
        times: list[int] = []
        while len(times) < _MORE_CALLS and sum(times) < _MEASURE_BUDGET_NS:
            t0 = clock()
            fn(*values)
            times.append(clock() - t0)
    except Exception:
        return None
    return float(min(times))


def leaf_key(leaf: Leaf) -> str:
    """A check's counting key, as ``failure_key`` makes it from a failure: the kind and the
    sources it reads."""
    names = ", ".join(s.name() for s in leaf.sources)
    return f"{leaf.kind.name} {names}" if names else leaf.kind.name


def guard_report(leaf: Leaf, *, intern: Any = None) -> dict[str, Any]:
    """One check as JSON-ready fields: ``code``, ``kind``, ``sources`` and, when the kind
    gives one, ``detail``; with ``intern``, the guard's ``user_stack`` as trace frames."""
    out: dict[str, Any] = {
        "code": leaf.code(),
        "kind": leaf.kind.name,
        "sources": [s.name() for s in leaf.sources],
    }
    try:
        detail = leaf.kind.detail(leaf.params)
    except Exception as e:  # inspection must not fail on a kind's bug
        detail = {"error": f"{type(e).__name__}: {e}"}
    if detail is not None:
        out["detail"] = detail
    if intern is not None:
        stack = leaf.user_stack
        out["user_stack"] = structured.frames(stack, intern) if stack else None
        out["stack"] = None
    return out


def heaviest_source(leaves: Sequence[Leaf]) -> tuple[Optional[Source], int]:
    """The source that made most of these checks, and how many are at or under it (see
    [Note: Large guard sets])."""
    under: Counter[Source] = Counter()
    children: dict[Optional[Source], set[Source]] = {}
    for leaf in leaves:
        seen: set[Source] = set()
        for leaf_source in leaf.sources:
            source: Optional[Source] = leaf_source
            child: Optional[Source] = None
            while source is not None:
                if child is not None:
                    children.setdefault(source, set()).add(child)
                if source in seen:
                    break
                seen.add(source)
                under[source] += 1
                parent = source.base if isinstance(source, ChainedSource) else None
                if parent is None:
                    children.setdefault(None, set()).add(source)
                child, source = source, parent
    roots = children.get(None)
    if not roots:
        return None, 0
    best = max(roots, key=lambda s: (under[s], s.name()))
    while True:
        kids = children.get(best)
        if not kids:
            break
        top = max(kids, key=lambda s: (under[s], s.name()))
        if under[top] * 10 < under[best] * 9:
            break
        best = top
    return best, under[best]


def _user_frames(fn_frame: Optional[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """The stack of the call being compiled, outermost first, without jitguard's own frames
    (its package and its generated code), ending with the compiled function's ``def``."""
    out: list[traceback.FrameSummary] = []
    frame: Any = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith(_PKG_ROOT) or filename.startswith("<jitguard")):
            out.append(
                traceback.FrameSummary(filename, frame.f_lineno, frame.f_code.co_name,
                                       lookup_line=False)
            )
        frame = frame.f_back
    out.reverse()
    if fn_frame is not None:
        out.append(fn_frame)
    return out


def _outside_jitguard_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside jitguard."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename.startswith(_PKG_ROOT)
        or frame.f_code.co_filename.startswith("<jitguard")
    ):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def _check_source(entry: CacheEntry) -> str:
    """The generated check's text, then each chunk's under a header."""
    check = entry.check
    parts = [check.source]
    for filename in check.filenames[1:]:
        text = "".join(linecache.getlines(filename))
        if text:
            parts.append(f"# ---- {filename}\n{text}")
    return "\n".join(parts)


class CompileLog:
    """The compile records of one specialized function, and what it reports about them:
    the last ``history`` compiles, and the compile of each live entry."""

    def __init__(self, fn: Callable[..., Any], where: str,
                 frame: Optional[traceback.FrameSummary], history: int = 64) -> None:
        self.fn = fn
        self.where = where
        self.frame = frame
        self.infos: collections.deque[CompileInfo] = collections.deque(maxlen=max(history, 0))
        self._by_entry: weakref.WeakKeyDictionary[CacheEntry, CompileInfo] = (
            weakref.WeakKeyDictionary()
        )
        self.warned_large = False

    def clear(self) -> None:
        self.infos.clear()
        self._by_entry = weakref.WeakKeyDictionary()
        self.warned_large = False

    def recent(self) -> tuple[CompileInfo, ...]:
        return tuple(self.infos)

    def info_of(self, entry: CacheEntry) -> Optional[CompileInfo]:
        return self._by_entry.get(entry)

    # ---- the hooks ---------------------------------------------------------------------
    def compiled(
        self, compile_id: CompileId, started: float, values: tuple[Any, ...],
        entry: Optional[CacheEntry], *, cache_size: int, record: Optional[RecompileRecord],
    ) -> CompileInfo:
        """After a compile that returned: ``started`` is its ``time.perf_counter()`` start,
        ``entry`` the entry made (None: not kept), ``cache_size`` the entries before it,
        ``record`` the recompile's record (None for a first compile; its reasons are read
        only when a trace is on)."""
        elapsed = time.perf_counter() - started
        wall = time.time() - elapsed
        ensure_loaded()  # the torch integration may add a trace sink or turn logs on
        cost = measure_check(entry.check.fn, values) if entry is not None else None
        guard_count = len(entry.check.leaves) if entry is not None else 0
        info = CompileInfo(
            compile_id, "compiled" if entry is not None else "not kept", wall, elapsed,
            guard_count, cost, recompile=record is not None,
        )
        self.infos.append(info)
        if entry is not None:
            self._by_entry[entry] = info
        if entry is not None and guard_count > config.large_guard_set and not self.warned_large:
            self.warned_large = True
            self._warn_large(entry, info)
        if compile_log.isEnabledFor(logging.INFO):
            cost_text = "not measured" if cost is None else f"{cost / 1000:.2f} us per call"
            compile_log.info(
                "%s: compiled %s in %.1f ms: %d checks, check %s%s", self.where, compile_id,
                elapsed * 1000, guard_count, cost_text,
                "" if entry is not None else " (not kept: the compiler changed the arguments)",
            )
        if entry is not None and guards_log.isEnabledFor(logging.INFO):
            lines = [f"    {leaf.code()}" for leaf in entry.check.leaves]
            guards_log.info("%s: guards of %s (%d):\n%s", self.where, compile_id,
                            len(lines), "\n".join(lines))
        if structured.active():
            self._trace(info, entry, cache_size, record, None)
        return info

    def failed(
        self, compile_id: CompileId, started: float, error: BaseException, *,
        cache_size: int, record: Optional[RecompileRecord],
    ) -> CompileInfo:
        """After a compile that raised ``error`` (the caller re-raises it)."""
        elapsed = time.perf_counter() - started
        ensure_loaded()
        info = CompileInfo(
            compile_id, "failed", time.time() - elapsed, elapsed, recompile=record is not None,
            error=f"{type(error).__name__}: {error}",
        )
        self.infos.append(info)
        if compile_log.isEnabledFor(logging.INFO):
            compile_log.info("%s: compile %s failed after %.1f ms: %s", self.where, compile_id,
                             elapsed * 1000, info.error)
        if structured.active():
            self._trace(info, None, cache_size, record, error)
        return info

    # ---- what they report --------------------------------------------------------------
    def _warn_large(self, entry: CacheEntry, info: CompileInfo) -> None:
        source, count = heaviest_source(entry.check.leaves)
        what = (
            f"{count:,} of them on {source.name()} and the values under it"
            if source is not None else "none of them on an argument"
        )
        cost = (
            "" if info.check_cost_ns is None
            else f", about {info.check_cost_ns / 1e6:.2f} ms per call"
        )
        took = f"{info.compile_time_s:.2f} s to compile{cost}"
        plan = getattr(entry.check, "structure_skip", None)
        if plan is not None:  # [Note: Skipping structure guards by version tags]
            runs = (f"While the structure they read is unchanged, a call that reaches this "
                    f"entry runs only the {len(plan.volatile.leaves):,} the structure snapshot "
                    f"cannot skip ({took}); a change to that structure makes the next call run "
                    f"them all. Nothing needs doing unless that cost matters; raise the "
                    f"threshold to silence this.")
        else:
            runs = (f"Every call that reaches this entry runs them all ({took}). Pass such a "
                    f"value inside an object (guarded by identity), register an argument rule "
                    f"for its type (jitguard.register_arg_rule), or raise the threshold.")
        warnings.warn(
            LargeGuardSetWarning(
                f"{self.where}: compile {info.compile_id} made {info.guard_count:,} checks "
                f"(more than jitguard.config.large_guard_set = {config.large_guard_set:,}); "
                f"{what}. {runs}"
            ),
            stacklevel=_outside_jitguard_stacklevel(),
        )

    def _trace(
        self, info: CompileInfo, entry: Optional[CacheEntry], cache_size: int,
        record: Optional[RecompileRecord], error: Optional[BaseException],
    ) -> None:
        cid = info.compile_id
        user = _user_frames(self.frame)
        where = "jitguard/_src/cache/observe.py:0"
        structured.emit("dynamo_start", lambda intern: {"stack": structured.frames(user, intern)},
                        compile_id=cid, where=where)
        lines: Optional[list[str]] = None
        if record is not None:
            lines = record.reasons()
            structured.emit(
                "artifact", lambda intern: {"name": "recompile_reasons", "encoding": "json"},
                compile_id=cid, payload=lines, where=where,
            )
        if entry is not None:
            leaves = entry.check.leaves
            structured.emit(
                "dynamo_guards", lambda intern: {}, compile_id=cid, where=where,
                payload=lambda intern: [guard_report(leaf, intern=intern) for leaf in leaves],
            )
            structured.emit(
                "artifact",
                lambda intern: {"name": "jitguard_check_source", "encoding": "string"},
                compile_id=cid, payload=_check_source(entry), where=where,
            )
        frame = self.frame
        metrics: dict[str, Any] = {
            "compile_id": str(cid),
            "co_name": frame.name if frame else getattr(self.fn, "__name__", None),
            "co_filename": frame.filename if frame else None,
            "co_firstlineno": frame.lineno if frame else None,
            "cache_size": cache_size,
            "accumulated_cache_size": cache_size,
            "guard_count": info.guard_count,
            "shape_env_guard_count": 0,
            "guard_latency_us": None if info.check_cost_ns is None else info.check_cost_ns / 1000,
            "start_time": info.started_at,
            "entire_frame_compile_time_s": info.compile_time_s,
            "recompile_reason": "; ".join(lines) if lines else None,
            "fail_type": type(error).__name__ if error is not None else None,
            "fail_reason": str(error) if error is not None else None,
            "restart_reasons": [],
            "outcome": info.outcome,
        }
        structured.emit("compilation_metrics", lambda intern: metrics, compile_id=cid, where=where)

