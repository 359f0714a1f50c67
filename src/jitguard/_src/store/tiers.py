"""``Store``: the two tiers together (local SQLite, shared Redis), signing, and faults.

May import: env, errors, logs, store.* (the standard library otherwise).

# [Note: Store faults]
# Nothing a store does raises into a call of a specialized function. A tier that fails to
# read or write (disk full, database locked past its timeout, unwritable directory, Redis
# down, refusing or too slow) is a ``StoreWarning`` and a log line on ``jitguard.store``;
# the call compiles as if nothing were stored, and the compile is kept in memory as
# usual. A value that fails its checks ([Note: Stored value format]) is one too, and is
# skipped. A database SQLite calls corrupt is moved aside ([Note: A corrupt database]).
# Opening a store never raises either, unless asked to ([Note: Opening a store]).
#
# [Note: Opening a store]
# ``Store(...)`` (made by ``specialize(..., store=...)`` or by ``JITGUARD_STORE``) opens
# everything at once: it makes its directory when missing (mode 0700; the parents of the
# default user cache directory too, but not those of a directory given by ``store=``,
# ``JITGUARD_STORE`` or ``JITGUARD_CACHE_DIR``: a missing parent is more likely a typo),
# refuses a directory another user owns or any user may write (mode o+w: they could
# replace the database or the key), reads or makes the key ([Note: Store signing]), and
# opens the database (a symlink there is refused). When one of these fails (no space, a
# read-only directory or filesystem, a missing parent, a key file others can read, a
# refused directory, a Redis URL without redis-py), the store warns once (``StoreWarning``:
# what failed and what to do) and is not *usable*: ``problem`` says why, nothing is read or
# written, and the functions that use it keep their entries in memory. A Redis tier that
# cannot be made costs only that tier. ``Store(..., strict=True)`` raises ``StoreError``
# instead, for a program that wants the error (``python -m jitguard cache`` is strict).
# The default store of a directory is made once per process, so it warns once.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
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
from .signing import Signer, load_key
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
    redis_prefix=None, redis_timeout=None, strict=False)``: the local tier is
    ``directory/store.sqlite3`` (default: ``JITGUARD_CACHE_DIR`` or the user cache
    directory) holding at most ``max_bytes`` (default ``JITGUARD_CACHE_MAX_BYTES``, else
    1 GiB; least recently used entries go first). The shared tier is Redis at
    ``redis_url`` (default ``JITGUARD_REDIS_URL``; None: no shared tier), read on a local
    miss and written on every compile, its keys under ``redis_prefix`` (default
    ``JITGUARD_REDIS_PREFIX``, else "jitguard"); ``redis_timeout``: seconds (default
    ``JITGUARD_REDIS_TIMEOUT``, else 0.5). ``key`` signs every value (default
    ``JITGUARD_CACHE_KEY``, else the per-user key file ``directory/key``). A store that
    cannot be opened warns and is not ``usable`` (``problem`` says why), or with
    ``strict=True`` raises ``StoreError`` ([Note: Opening a store]). Pass it as
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
        strict: bool = False,
    ) -> None:
        explicit = bool(directory) or env.directory("JITGUARD_CACHE_DIR") is not None
        self.directory = Path(directory).expanduser() if directory else default_cache_dir()
        if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes < 1):
            raise ValueError(f"max_bytes must be None or an int >= 1, got {max_bytes!r}")
        self.strict = strict
        #: Why the store cannot be used (None: it can); see [Note: Opening a store].
        self.problem: Optional[str] = None
        self.local = SqliteTier(self.directory / DB_NAME,
                                max_bytes=max_bytes if max_bytes else _max_bytes_env())
        self.shared: Optional[RedisTier] = None
        self.signer = _NO_SIGNER
        url = env.url("JITGUARD_REDIS_URL") if redis_url is _ENV else redis_url
        try:
            if url:
                self.shared = RedisTier(
                    url, prefix=redis_prefix or env.text("JITGUARD_REDIS_PREFIX")
                    or "jitguard", timeout=redis_timeout)
        except StoreError as e:
            self._refuse(f"{e}; the store runs without its shared tier", whole=False)
        try:
            _open_directory(self.directory, make_parents=not explicit)
            self.signer = Signer(key) if key is not None else Signer(load_key(self.directory))
            self.local.open()
        except (StoreError, TierError) as e:
            self._refuse(f"{e}{_hint(e)}; the cache runs in memory only", whole=True)

    def _refuse(self, message: str, *, whole: bool) -> None:
        """A store (or its shared tier) that cannot be opened: ``StoreError`` when strict,
        else one warning, and the store is unusable ([Note: Opening a store])."""
        if self.strict:
            raise StoreError(message)
        if whole:
            self.problem = message
            if self.shared is not None:
                self.shared.close()
            self.shared = None
        warn(f"jitguard store: {message} (Store(..., strict=True) raises instead)",
             stacklevel=4)

    @property
    def usable(self) -> bool:
        """Whether the store opened (else nothing is read or written: the cache runs in
        memory, and ``problem`` says why)."""
        return self.problem is None

    def __repr__(self) -> str:
        shared = f", shared={self.shared!r}" if self.shared is not None else ""
        return f"<Store {self.directory}{shared}>"

    # ---- reading -------------------------------------------------------------------------
    def fetch(self, key: str, tier: str = "sqlite") -> list[Fetched]:
        """The values stored under ``key`` in one tier ("sqlite" or "redis"); a tier that
        fails gives none (a warning says why). Values read from Redis are copied into the
        local tier (read-through)."""
        source: Any = self.local if tier == "sqlite" else self.shared
        if source is None or self.problem is not None:
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
        if self.problem is not None:
            return []
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
        self._require()
        return self.local.rows(name)

    def _require(self) -> None:
        if self.problem is not None:
            raise StoreError(f"the store in {self.directory} is not usable: {self.problem}")

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
        self._require()
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
        self._require()
        n = self.local.delete()
        if shared and self.shared is not None:
            n += self.shared.delete()
        return n

    def close(self) -> None:
        self.local.close()
        if self.shared is not None:
            self.shared.close()


# ---- opening a store --------------------------------------------------------------------

_NO_SIGNER = Signer(b"no key: the store is not usable")  # never signs or verifies a value
_ELSEWHERE = "or choose another directory with store= or JITGUARD_CACHE_DIR"


def _open_directory(directory: Path, *, make_parents: bool) -> None:
    """Make the store's directory (mode 0700) when missing, and refuse one that is not safe
    to use ([Note: Opening a store])."""
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        if not make_parents and not directory.parent.is_dir():
            raise StoreError(
                f"cannot make the store directory {directory}: its parent {directory.parent} "
                f"does not exist (create it, {_ELSEWHERE})") from None
        try:
            directory.mkdir(mode=0o700, parents=make_parents, exist_ok=True)
            st = os.stat(directory)
        except OSError as e:
            raise StoreError(f"cannot make the store directory {directory}: {e}") from e
    except OSError as e:
        raise StoreError(f"cannot use the store directory {directory}: {e}") from e
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError(f"the store directory {directory} is not a directory ({_ELSEWHERE})")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise StoreError(
            f"refusing the store directory {directory}: it belongs to another user (uid "
            f"{st.st_uid}), who could replace what it holds (use a directory of your own: "
            f"store= or JITGUARD_CACHE_DIR)")
    if st.st_mode & 0o002:
        raise StoreError(
            f"refusing the store directory {directory}: it has mode "
            f"{stat.S_IMODE(st.st_mode):04o}, so any user may replace what it holds "
            f"(chmod 700 {directory}, {_ELSEWHERE})")


def _hint(error: BaseException) -> str:
    """What to do about an error opening a store, from its causes (or nothing)."""
    text = ""
    cause: Optional[BaseException] = error
    while cause is not None:
        text += f" {cause}"
        if isinstance(cause, OSError) and cause.errno is not None:
            text += f" errno:{cause.errno}"
        cause = cause.__cause__
    if "disk is full" in text or f"errno:{errno.ENOSPC}" in text or "No space" in text:
        return f" (free space on that disk, {_ELSEWHERE})"
    if any(t in text for t in ("readonly", "read-only", "Read-only", "Permission denied",
                               "unable to open", f"errno:{errno.EROFS}")):
        return f" (make the directory writable, {_ELSEWHERE})"
    return ""


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
    variables]). ``False``: none, whatever the environment says."""
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
        return _default_store(Path(spec)), True
    raise TypeError(f"store must be None, a bool, a directory or a jitguard.Store, got {spec!r}")
