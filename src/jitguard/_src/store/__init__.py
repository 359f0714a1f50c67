"""The persistent store: entries kept across processes, locally (SQLite) and shared
(Redis), signed, keyed by function identity and environment.

May import: errors, logs, compiler.*, store.* (``redis`` lazily, in ``redis_tier``).

Modules: ``keys`` ([Note: Store keys]), ``signing`` ([Note: Store signing]), ``codec``
([Note: Stored value format]), ``sqlite`` ([Note: The local tier]), ``redis_tier``
([Note: The shared tier]), ``tiers`` (``Store``, [Note: Store faults]), ``cli``
(``python -m jitguard cache``). How a specialized function uses it: [Note: Persistent
entries] in ``cache.persist``.
"""

from __future__ import annotations

from .codec import StoredRecord
from .tiers import Store

__all__ = ["Store", "StoredRecord"]
