"""``Store``: the two tiers together (local SQLite, shared Redis), signing, and faults.

May import: env, errors, logs, store.* (the standard library otherwise).

# [Note: Store faults]
# Nothing a store does raises into a call of a specialized function. A tier that fails to
# read or write (disk full, database locked past its timeout, unwritable directory, Redis
# down, refusing or too slow) is a ``StoreWarning`` and a log line on ``jitguard.store``;
# the call compiles as if nothing were stored, and the compile is kept in memory as
# usual. A value that fails its checks ([Note: Stored value format]) is one too, and is
# skipped. Only opening a store as asked can raise (``StoreError``: a Redis URL without
# redis-py, a key file others can read), when ``specialize`` is called, not on a call.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Optional, Union

from .. import env
from ..errors import StoreError, StoreWarning
from .codec import RecordError, StoredRecord, decode_record, encode_record
from .keys import default_cache_dir
from .redis_tier import RedisTier
from .signing import Signer
from .sqlite import DB_NAME, Row, SqliteTier, TierError

__all__ = ["DEFAULT_MAX_BYTES", "Fetched", "Store", "resolve_store", "store_log", "warn"]

DEFAULT_MAX_BYTES = 1 << 30
store_log = logging.getLogger("jitguard.store")
_ENV: Any = object()


def warn(message: str, stacklevel: int = 2) -> None:
    """A ``StoreWarning``, and the same line on the ``jitguard.store`` log (INFO)."""
    store_log.info("%s", message)
    warnings.warn(message, StoreWarning, stacklevel=stacklevel + 1)


class Fetched(NamedTuple):
    """A stored value as read: its entry id, bytes and the tier it came from."""

    entry: str
    value: bytes
    tier: str


def _max_bytes_env() -> int:
    return env.size("JITGUARD_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES)


class Store:
    """Where specialized functions keep their entries across processes.

    ``Store(directory=None, *, redis_url=..., max_bytes=None, key=None,
    redis_prefix=None, redis_timeout=None)``: the local tier is
    ``directory/store.sqlite3`` (default: ``JITGUARD_CACHE_DIR`` or the user cache
    directory) holding at most ``max_bytes`` (default ``JITGUARD_CACHE_MAX_BYTES``, else
    1 GiB; least recently used entries go first). The shared tier is Redis at
    ``redis_url`` (default ``JITGUARD_REDIS_URL``; None: no shared tier), read on a local
    miss and written on every compile, its keys under ``redis_prefix`` (default
    ``JITGUARD_REDIS_PREFIX``, else "jitguard"); ``redis_timeout``: seconds (default
    ``JITGUARD_REDIS_TIMEOUT``, else 0.5). ``key`` signs every value (default
    ``JITGUARD_CACHE_KEY``, else the per-user key file ``directory/key``). Pass it as
    ``specialize(..., store=Store(...))``; see [Note: Persistent entries].
    """

    def __init__(
        self,
        directory: Union[str, os.PathLike[str], None] = None,
        *,
        redis_url: Optional[str] = _ENV,
        max_bytes: Optional[int] = None,
        key: Optional[bytes] = None,
        redis_prefix: Optional[str] = None,
        redis_timeout: Optional[float] = None,
    ) -> None:
        self.directory = Path(directory).expanduser() if directory else default_cache_dir()
        if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes < 1):
            raise ValueError(f"max_bytes must be None or an int >= 1, got {max_bytes!r}")
        self.local = SqliteTier(self.directory / DB_NAME,
                                max_bytes=max_bytes if max_bytes else _max_bytes_env())
        url = env.url("JITGUARD_REDIS_URL") if redis_url is _ENV else redis_url
        self.shared: Optional[RedisTier] = (
            RedisTier(url, prefix=redis_prefix or env.text("JITGUARD_REDIS_PREFIX")
                      or "jitguard", timeout=redis_timeout) if url else None
        )
        self.signer = Signer(key) if key is not None else Signer.for_directory(self.directory)

    def __repr__(self) -> str:
        shared = f", shared={self.shared!r}" if self.shared is not None else ""
        return f"<Store {self.directory}{shared}>"

    # ---- reading -------------------------------------------------------------------------
    def fetch(self, key: str, tier: str = "sqlite") -> list[Fetched]:
        """The values stored under ``key`` in one tier ("sqlite" or "redis"); a tier that
        fails gives none (a warning says why). Values read from Redis are copied into the
        local tier (read-through)."""
        source: Any = self.local if tier == "sqlite" else self.shared
        if source is None:
            return []
        if isinstance(source, RedisTier) and source.down:
            store_log.info("skipping %r: off after a recent failure", source)
            return []
        try:
            found = source.get(key)
        except TierError as e:
            warn(f"jitguard store: {e}; compiling instead", stacklevel=3)
            return []
        if source is self.shared and found:
            self._copy_local(key, found)
        return [Fetched(entry, value, tier) for entry, value in found]

    def _copy_local(self, key: str, found: list[tuple[str, bytes]]) -> None:
        for entry, value in found:
            try:
                record = decode_record(value, self.signer)
            except RecordError:
                continue  # not copied; refused when loaded, with the reason
            try:
                self.local.put(key, entry, record.name, value)
            except TierError as e:
                warn(f"jitguard store: {e} (copying from Redis)", stacklevel=4)
                return

    def decode(self, value: bytes) -> StoredRecord:
        """The record in a stored value (``RecordError`` when it fails a check)."""
        return decode_record(value, self.signer)

    # ---- writing -------------------------------------------------------------------------
    def save(self, record: StoredRecord) -> list[str]:
        """Sign and write ``record`` to every tier; returns the tiers written (a failing
        tier is a warning)."""
        value = encode_record(record, self.signer)
        written = []
        for tier in (self.local, self.shared):
            if tier is None:
                continue
            if isinstance(tier, RedisTier) and tier.down:
                continue
            try:
                evicted = tier.put(record.key, record.entry, record.name, value)
            except TierError as e:
                warn(f"jitguard store: {e}; the entry stays in memory only", stacklevel=3)
                continue
            written.append(tier.name)
            if evicted and store_log.isEnabledFor(logging.INFO):
                store_log.info("%r: evicted %d least recently used entries (max_bytes=%d)",
                               tier, evicted, self.local.max_bytes)
        return written

    # ---- inspecting ----------------------------------------------------------------------
    def rows(self, name: Optional[str] = None) -> list[Row]:
        """The local tier's entries (of the function ``name``, ``module:qualname``), most
        recently used first."""
        return self.local.rows(name)

    def find(self, ref: str) -> tuple[str, str]:
        """(key, entry) of the one local entry that ``ref`` names: ``KEY:ENTRY`` as
        ``python -m jitguard cache ls`` prints it, or a unique prefix of it."""
        matches = [(r.key, r.entry) for r in self.rows() if f"{r.key}:{r.entry}".startswith(ref)]
        if len(matches) != 1:
            raise StoreError(
                f"{'no' if not matches else len(matches)} stored entries match {ref!r}"
                f" (python -m jitguard cache ls lists them)"
            )
        return matches[0]

    def stats(self) -> dict[str, Any]:
        """Sizes and counts of each tier."""
        rows = self.rows()
        out: dict[str, Any] = {
            "directory": str(self.directory),
            "database": str(self.local.path),
            "entries": len(rows),
            "functions": len({r.name for r in rows}),
            "keys": len({r.key for r in rows}),
            "bytes": sum(r.size for r in rows),
            "max_bytes": self.local.max_bytes,
            "key_id": self.signer.fingerprint(),
        }
        if self.shared is not None:
            try:
                entries, size = self.shared.count()
                out["redis"] = {"url": self.shared._safe_url(), "prefix": self.shared.prefix,
                                "entries": entries, "bytes": size}
            except TierError as e:
                out["redis"] = {"url": self.shared._safe_url(), "error": str(e)}
        return out

    def clear(self, *, shared: bool = False) -> int:
        """Delete every local entry (and, with ``shared``, every entry under the Redis
        prefix); returns how many were deleted."""
        n = self.local.delete()
        if shared and self.shared is not None:
            n += self.shared.delete()
        return n

    def close(self) -> None:
        self.local.close()
        if self.shared is not None:
            self.shared.close()


# ---- choosing a store --------------------------------------------------------------------

_shared: dict[tuple[str, Optional[str]], Store] = {}
_shared_lock = threading.Lock()
def _default_store(directory: Optional[Path]) -> Store:
    """One ``Store`` per directory and Redis URL in a process."""
    directory = directory or default_cache_dir()
    ident = (str(directory.expanduser().resolve()), env.url("JITGUARD_REDIS_URL"))
    with _shared_lock:
        store = _shared.get(ident)
        if store is None:
            store = _shared[ident] = Store(directory)
        return store


StoreLike = Union[bool, str, "os.PathLike[str]", Store, None]


def resolve_store(spec: Any, get: Optional[Callable[[str], Optional[str]]] = None) -> tuple[
        Optional[Store], bool]:
    """The store that ``specialize(..., store=spec)`` uses, and whether it was asked for
    explicitly (not by ``JITGUARD_STORE``). ``None``: ``JITGUARD_STORE`` decides (read by
    ``get``, default the environment: a switch, or a directory; see [Note: Environment
    variables]). ``False``: none, whatever the environment says. A directory whose parent
    does not exist is no store, with a warning (never a chain of new folders)."""
    if spec is None:
        setting = env.store(get=get)
        if setting is False:
            return None, False
        return _default_store(None if setting is True else setting), False
    if spec is False:
        return None, True
    if spec is True:
        return _default_store(None), True
    if isinstance(spec, Store):
        return spec, True
    if isinstance(spec, (str, os.PathLike)):
        why = env.usable_directory(Path(spec))
        if why is not None:
            warn(f"jitguard store: {os.fspath(spec)!r} {why}: no store is used (make the "
                 f"folder first, or pass another)", stacklevel=3)
            return None, True
        return _default_store(Path(spec)), True
    raise TypeError(f"store must be None, a bool, a directory or a jitguard.Store, got {spec!r}")
