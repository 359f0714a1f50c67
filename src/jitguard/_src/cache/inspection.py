"""The inspection API of a ``FunctionCache`` (``CacheInspection``, a base class of it):
entries, compile ids and infos, recompile records and reasons, guard failure counts, stats,
store events and key, the snapshot. Read-only: nothing here takes the compile lock or
changes the cache (``lookup`` and ``clear``, which touch the call path, stay in
cache.specialize).

May import: everything in ``jitguard._src`` except ``torch``; every ``cache`` module except
cache.specialize, cache.miss, cache.decorators and cache.explain; cache.miss for types only
(its ``MissPath``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..dispatch.entry import CacheEntry
from ..dispatch.snapshot import Snapshot
from ..dispatch.table import EntryTable
from ..guards import Source
from ..ids import CompileId
from . import advice_rules  # noqa: F401  (the built-in rules register on import)
from .advice import Advice, advise
from .observe import CompileInfo
from .persist import Persistence, StoreEvent
from .reasons import RecompileRecord
from .scope import Scope
from .stats import CacheStats, Counters

if TYPE_CHECKING:
    from .miss import MissPath

__all__ = ["CacheInspection"]


class CacheInspection:
    """What a ``FunctionCache`` tells about itself; the state it reads is set by
    ``FunctionCache.__init__`` ([Note: The call path])."""

    where: str

    @property
    def advice_frontend(self) -> str:
        """What the advisor's rules are told the function was compiled with (its scope's
        ``frontend``, [Note: Scopes])."""
        return self.scope.frontend
    _table: EntryTable
    _counters: Counters
    scope: Scope
    _persist: Optional[Persistence]
    _misses: MissPath  # the miss path's state: counts, records, dynamic and static sources

    def entries(self) -> tuple[CacheEntry, ...]:
        """The live entries, in dispatch order (most specific first, then oldest). Takes no
        lock, so a compiler may call it; dead entries are left out here and dropped for good
        on the next miss."""
        return tuple(e for e in self._table.snapshot.entries if e.valid)

    def compile_ids(self) -> list[CompileId]:
        return [e.compile_id for e in self.entries()]

    @property
    def recompiles(self) -> tuple[RecompileRecord, ...]:
        """The last ``history`` recompiles (and refused recompiles at the limit), oldest
        first ([Note: Recompile reasons])."""
        return self._misses.history.records()

    @property
    def recompile_counts(self) -> dict[str, int]:
        """Every recompile record ever made (kept or not), by outcome: "compiled", "limit"
        (refused at the recompile limit), "forbidden"."""
        return dict(self._misses.history.counts)

    def reasons(self) -> list[str]:
        """Every reason line of the recompiles kept, oldest first."""
        return [line for record in self._misses.history.records() for line in record.reasons()]

    def advice(self, *, threshold: Optional[int] = None) -> list[Advice]:
        """What to change so that this function stops recompiling: one ``Advice`` per source
        that churns (caused at least ``threshold`` recompiles, default
        ``jitguard.config.advice_threshold``, or used up the recompile limit), most
        recompiles first; [] without churn. See [Note: Recompile advice]."""
        return advise(self, threshold=threshold)

    def compile_infos(self) -> tuple[CompileInfo, ...]:
        """The last ``history`` compiles, oldest first: id, outcome, compile time, guard
        count, the check's cost ([Note: Compile events])."""
        return self._misses.compile_log.recent()

    def compile_info(self, entry: CacheEntry) -> Optional[CompileInfo]:
        """The compile that made ``entry`` (None for an entry of another function)."""
        return self._misses.compile_log.info_of(entry)

    def guard_failure_counts(self) -> dict[str, int]:
        """``"<kind> <sources>"`` -> in how many entry rejections of the recompiles kept that
        guard failed."""
        return dict(self._misses.history.failure_counts())

    @property
    def dynamic(self) -> frozenset[Source]:
        """The sources guarded as dynamic now (declared, or made so by a recompile)."""
        return self._misses.dynamic

    @property
    def static(self) -> frozenset[Source]:
        return self._misses.static

    def stats(self) -> CacheStats:
        """The counters now: exact under threads but for the calls in flight while an entry
        is evicted or invalidated ([Note: Counters under threads])."""
        c = self._counters
        with c.lock:  # one consistent snapshot: entries and dropped_hits move together
            entries = list(self._table)
            counts = {name: c.get(name) for name in c.NAMES}
            hits = sum(e.hits for e in entries)
        compiles = counts["compiles"]
        return self.scope.stats(self, CacheStats(  # type: ignore[arg-type]
            hits=hits + counts["dropped_hits"],
            misses=counts["misses"],
            compiles=compiles,
            recompiles=max(0, compiles - 1) if self._misses.compiles else 0,
            restarts=counts["restarts"],
            failures=counts["failures"],
            fallbacks=counts["fallbacks"],
            # dropped entries, and those dead since the last miss (dropped on the next)
            invalidations=counts["invalidations"] + sum(1 for e in entries if not e.valid),
            entries=sum(1 for e in entries if e.valid),
            evictions=counts["evictions"],
        ))

    def guard_layer(self, entry: CacheEntry) -> Optional[dict[str, str]]:
        """Which guards decide ``entry``'s calls and why (``{"layer", "why"}``), for a cache
        whose entries are not all decided by jitguard's own check (``jitguard.torch.compile``
        says so per entry, through its scope: [Note: Scopes]); None: jitguard's check,
        nothing more to say."""
        return self.scope.guard_layer(self, entry)  # type: ignore[arg-type]

    def store_events(self) -> tuple[StoreEvent, ...]:
        """What happened to this function's stored entries, oldest first: loaded, rejected
        (why), stale (why), saved, not stored ([Note: Persistent entries] 5); () without a
        store."""
        return self._persist.events() if self._persist is not None else ()

    @property
    def has_store(self) -> bool:
        """Whether this function's entries are kept in a store ([Note: Persistent entries])."""
        return self._persist is not None

    @property
    def store_key(self) -> Optional[str]:
        """The key this function's entries are stored under (None without a store)."""
        return self._persist.key if self._persist is not None else None

    def snapshot(self) -> Snapshot:
        """The published snapshot (the dispatcher's view), for debugging."""
        return self._table.snapshot

    def __repr__(self) -> str:
        return f"<FunctionCache {self.where}: {len(self._table.snapshot.entries)} entries>"
