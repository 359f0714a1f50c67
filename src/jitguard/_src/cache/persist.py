"""Persistent entries of one ``FunctionCache``: stored entries loaded into it, compiled ones
saved from it (``cache.loading`` joins the loaded ones to the cache).

May import: errors, guards, compiler.*, store.*, dispatch.entry.

# [Note: Persistent entries]
# With a store (``specialize(..., store=...)``, or ``JITGUARD_STORE``), a function's
# entries outlive the process. Invariants:
#   1. What is stored is only what a compiler can re-create: its ``compiler`` must offer
#      ``serialize(artifact) -> bytes`` and ``deserialize(data, fn) -> artifact`` (the
#      default compiler does: its artifact is ``fn``); otherwise nothing of the function
#      is stored, and it says so once, when ``specialize`` is called (a ``StoreWarning``
#      when the store was asked for by ``store=``, a ``jitguard.store`` log line when only
#      ``JITGUARD_STORE`` turned it on). ``store_environment() -> Mapping[str, str]``, when
#      the compiler has it, adds to the key ([Note: Store keys]).
#   2. An entry is saved after its compile, as its guard-set document ([Note: Guard set
#      schema]), its dynamic sources and the artifact's bytes, signed ([Note: Store
#      signing]). An entry with a guard that is not portable (an identity guard on an object
#      of this process) is not saved; the log names the guard.
#      ``serialize`` raising (a backend whose artifact cannot be stored) is a ``StoreWarning``
#      the first time for a function, and a log line for its later entries.
#   3. Stored entries are loaded on the function's first miss, not before (the modules the
#      guards name are imported by then): the local tier first and, if the call still
#      misses, the shared tier. Each tier is read once per process.
#   4. A loaded entry is re-bound through its sources: its guards are compiled again from
#      their records (modules, classes and functions found by qualified name in
#      ``sys.modules``; nothing is imported, eval'd or exec'd), and it joins the cache like a
#      compiled entry, so its guards are checked on every call, the first included. An
#      entry is *rejected* when one of its guards is not portable or cannot be re-bound
#      (the reason names the guard), when its artifact cannot be deserialized, or when its
#      value fails a check ([Note: Stored value format]: refused or corrupt); it is
#      *stale* when it was written by another format, or when only entries of another
#      version of the function or environment exist ([Note: Store keys]). Anything that
#      raises while a value is read or re-bound (a malformed guard set that is signed
#      right: ``GuardCompileError``, ``SourceError``, any other exception) rejects the
#      entry, naming the exception. Every refused entry is one ``StoreWarning`` naming it
#      (``KEY:ENTRY``) and why, then a compile; it is not read again in the process (not
#      after ``clear()``, not for another function object of the same code). A loaded entry
#      that rejects a call is explained like any entry ([Note: Recompile reasons]).
#   5. ``FunctionCache.store_events()``, ``explain`` and the ``jitguard.store`` log say, per
#      stored entry: loaded, rejected (why), stale (why), saved, not stored (why); and when
#      the call that loaded entries is accepted by none of them, "guard failed" per loaded
#      entry (the first 8), naming the guard that rejected the call (such an entry stays:
#      it may serve other calls; the recompile's reasons name the guard as well).
#   6. No fault of the store reaches the caller ([Note: Store faults]).
#
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

from ..compiler.check import CheckFunction
from ..compiler.schema import (
    compile_guard_records,
    export_guards,
    import_guards,
    source_from_json,
    source_names,
    source_to_json,
)
from ..dispatch.entry import CacheEntry
from ..errors import GuardSchemaError, StoreWarning
from ..guards import Source
from ..store.codec import RecordError, StoredRecord
from ..store.keys import entry_id, environment, function_identity, function_key
from ..store.tiers import Fetched, Store, resolve_store, store_log, warn

__all__ = ["Loaded", "Persistence", "StoreEvent", "open_persistence", "unbindable"]

_EVENTS = 256
_EXPLAINED = 8  # loaded entries whose rejection of the loading call is explained


class StoreEvent(NamedTuple):
    """What happened to one stored entry: ``outcome`` is "loaded", "rejected", "stale",
    "guard failed" (a loaded entry rejected the call that loaded it), "saved" or "not
    stored"; ``entry`` its id in the store (``KEY:ENTRY``), ``tier`` where
    it was read or written, ``compile_id`` the compile id it got or came from."""

    entry: str
    outcome: str
    reason: str
    tier: str
    compile_id: Optional[str]

    def __str__(self) -> str:
        cid = f" ({self.compile_id})" if self.compile_id else ""
        why = f": {self.reason}" if self.reason else ""
        return f"{self.outcome} {self.entry}{cid} [{self.tier}]{why}"


class Loaded(NamedTuple):
    """A stored entry ready to join the cache."""

    ref: str
    tier: str
    check: CheckFunction
    artifact: Callable[..., Any]
    dynamic: frozenset[Source]


class _Refused(Exception):
    """A stored entry that cannot join the cache: its outcome and why."""

    def __init__(self, outcome: str, reason: str) -> None:
        super().__init__(reason)
        self.outcome, self.reason = outcome, reason


# Entries refused in this process, by store database and ``KEY:ENTRY``: never read again
# here, not even after ``FunctionCache.clear()`` or by another function object of the same
# code ([Note: Persistent entries] 4).
_REFUSED: set[tuple[str, str]] = set()
_REFUSED_LOCK = threading.Lock()


def unbindable(error: Exception) -> str:
    """The reason an entry whose guards raised ``error`` while being re-bound is rejected."""
    return f"its guards cannot be re-bound: {type(error).__name__}: {str(error)[:300]}"


def _refuse(store: Store, ref: str) -> None:
    with _REFUSED_LOCK:
        _REFUSED.add((str(store.local.path), ref))


def _refused(store: Store, ref: str) -> bool:
    return (str(store.local.path), ref) in _REFUSED


def _identity(fn: Any, watched: Any) -> Optional[dict[str, str]]:
    """``fn``'s store identity; with ``watched``, another function whose code the entries
    come from ([Note: A replaced __code__]), that function's code, defaults and closure too."""
    identity = function_identity(fn)
    if identity is None or watched is None or watched is fn:
        return identity
    other = function_identity(watched)
    assert other is not None  # a watched function is a plain Python function
    both = hashlib.sha256(f"{identity['code']}:{other['code']}".encode()).hexdigest()
    return {"name": identity["name"], "code": both}


def open_persistence(fn: Any, compiler: Any, spec: Any, where: str,
                     watched: Any = None) -> Optional[Persistence]:
    """The persistence of a function, or None (no store, or one that cannot be used; said
    once, see [Note: Persistent entries] 1). ``watched``: the function whose code the
    entries come from, when it is not ``fn`` itself."""
    store, explicit = resolve_store(spec)
    if store is None or not store.usable:  # a store that cannot be opened warned already
        return None
    why = None
    if not (callable(getattr(compiler, "serialize", None))
            and callable(getattr(compiler, "deserialize", None))):
        name = getattr(compiler, "__qualname__", type(compiler).__qualname__)
        why = (f"its compiler {name} has no serialize(artifact) -> bytes and "
               f"deserialize(data, fn) -> artifact")
    identity = _identity(fn, watched)
    if why is None and identity is None:
        why = "it is not a Python function (no code object to identify it by)"
    if why is not None:
        message = f"jitguard store: nothing of {where} is stored: {why}"
        if explicit:
            warn(message, stacklevel=5)
        else:
            store_log.info("%s", message)
        return None
    assert identity is not None
    persistence = Persistence(fn, compiler, store, identity, where)
    persistence.watched = watched
    return persistence


class Persistence:
    """Loading and saving the entries of one function ([Note: Persistent entries])."""

    def __init__(self, fn: Any, compiler: Any, store: Store, identity: dict[str, str],
                 where: str) -> None:
        self.fn = fn
        self.compiler = compiler
        self.store = store
        self.identity = identity
        self.watched: Any = None  # the function whose code the entries come from, if not fn
        self.where = where
        self.params: tuple[str, ...] = ()
        self._key: Optional[str] = None
        self._env: dict[str, str] = {}
        self._pending = ["sqlite"] + (["redis"] if store.shared is not None else [])
        self._seen: set[str] = set()  # entry ids loaded or refused in this process
        self._events: deque[StoreEvent] = deque(maxlen=_EVENTS)
        self._serialize_warned = False  # a failing serialize warns once per function
        self._lock = threading.Lock()
        self.f_globals = getattr(inspect.unwrap(fn), "__globals__", None)

    @property
    def key(self) -> Optional[str]:
        """The function's store key (None when the compiler's environment cannot be had)."""
        if self._key is None:
            extra: Any = {}
            get_env = getattr(self.compiler, "store_environment", None)
            if get_env is not None:
                try:
                    extra = dict(get_env())
                except Exception as e:
                    warn(f"jitguard store: {self.where}: store_environment() raised "
                         f"{type(e).__name__}: {e}; nothing is stored", stacklevel=6)
                    self._pending = []
                    return None
            self._env = environment(extra)
            self._key, _ = function_key(self.identity, self.compiler, self._env)
        return self._key

    @property
    def pending(self) -> bool:
        """Whether a tier is still to be read."""
        return bool(self._pending)

    def rekey(self) -> None:
        """``fn.__code__`` was replaced ([Note: A replaced __code__]): the function's
        identity, and so its store key, are the new code's; the old code's entries stay
        under the old key, never loaded for the new code."""
        identity = _identity(self.fn, self.watched)
        assert identity is not None  # a watched function is a plain Python function
        self.identity, self._key = identity, None

    def reset(self) -> None:
        """After ``FunctionCache.clear()``: read the tiers again on the next miss."""
        self._pending = ["sqlite"] + (["redis"] if self.store.shared is not None else [])
        self._seen.clear()

    def events(self) -> tuple[StoreEvent, ...]:
        return tuple(self._events)

    def _event(self, ref: str, outcome: str, reason: str, tier: str,
               compile_id: Optional[str] = None, *, warning: bool = False) -> None:
        event = StoreEvent(ref, outcome, reason, tier, compile_id)
        self._events.append(event)
        if warning:
            message = f"jitguard store: {self.where}: {event}; compiling instead"
            store_log.info("%s", message)
            warnings.warn(message, StoreWarning, stacklevel=6)
        elif store_log.isEnabledFor(logging.INFO):
            store_log.info("%s: %s", self.where, event)

    # ---- loading ---------------------------------------------------------------------
    def load_next(self) -> list[Loaded]:
        """Read the next tier: the entries that can join the cache (``cache.loading``
        joins them)."""
        key = self.key
        if key is None or not self._pending:
            return []
        tier = self._pending.pop(0)
        fetched = self.store.fetch(key, tier)
        out = []
        for item in fetched:
            if item.entry in self._seen or _refused(self.store, f"{key}:{item.entry}"):
                continue
            self._seen.add(item.entry)
            loaded = self._load_one(key, item)
            if loaded is not None:
                out.append(loaded)
        if not fetched and tier == "sqlite":
            self._report_stale(key)
        return out

    def _load_one(self, key: str, item: Fetched) -> Optional[Loaded]:
        """``item`` re-bound, or None (refused: an event, a warning, and the entry is
        never tried again in this process, [Note: Persistent entries] 4)."""
        ref = f"{key}:{item.entry}"
        try:
            loaded = self._rebind(key, ref, item)
        except _Refused as e:
            loaded, outcome, reason = None, e.outcome, e.reason
        except Exception as e:  # a malformed value that is signed right: never raised
            loaded, outcome = None, "rejected"
            reason = f"reading it raised {type(e).__name__}: {str(e)[:300]}"
        if loaded is None:
            _refuse(self.store, ref)
            self._event(ref, outcome, reason, item.tier, warning=True)
        return loaded

    def _rebind(self, key: str, ref: str, item: Fetched) -> Loaded:
        try:
            record = self.store.decode(item.value)
        except RecordError as e:
            raise _Refused("stale" if e.outcome == "stale" else "rejected",
                           f"{e.outcome}: {e.message}") from None
        if record.key != key or record.entry != item.entry:
            raise _Refused("rejected", f"the value is filed under {record.key}:"
                           f"{record.entry}, not where it was found")
        if record.env != self._env:
            diff = sorted(k for k in set(record.env) | set(self._env)
                          if record.env.get(k) != self._env.get(k))
            raise _Refused("stale", f"written for another environment ({', '.join(diff)})")
        try:
            records = import_guards(record.guards)
            if record.guards.get("arg_names") != list(self.params):
                raise GuardSchemaError(
                    f"its guards take {record.guards.get('arg_names')}, the function takes "
                    f"{list(self.params)}"
                )
            check = compile_guard_records(
                records, arg_names=self.params, f_globals=self.f_globals,
                name=f"{self.where.split(' in ')[0]} stored {item.entry}", deferred=True,
            )
        except GuardSchemaError as e:
            raise _Refused("stale" if "newer jitguard" in str(e) else "rejected",
                           str(e)) from None
        except Exception as e:  # GuardCompileError, SourceError, ...: a malformed guard
            raise _Refused("rejected", unbindable(e)) from None
        try:
            artifact = self.compiler.deserialize(record.artifact, self.fn)
        except Exception as e:
            raise _Refused("rejected", f"deserialize raised {type(e).__name__}: {e}") from None
        if not callable(artifact):
            raise _Refused("rejected", f"deserialize returned {artifact!r}, not a callable")
        dynamic: set[Source] = set()
        for data in record.dynamic:
            try:
                dynamic.add(source_from_json(data))
            except Exception:
                pass  # what was dynamic is information only; the guards decide
        return Loaded(ref, item.tier, check, artifact, frozenset(dynamic))

    def reject(self, item: Loaded, reason: str) -> None:
        """``item`` cannot join the cache after all: refused like a value that failed to
        re-bind ([Note: Persistent entries] 4)."""
        _refuse(self.store, item.ref)
        self._event(item.ref, "rejected", reason, item.tier, warning=True)

    def loaded(self, item: Loaded, entry: CacheEntry) -> None:
        """``item`` joined the cache as ``entry``."""
        self._event(item.ref, "loaded", f"{len(entry.check.leaves)} guards", item.tier,
                    str(entry.compile_id))

    def missed(self, entries: list[CacheEntry], values: tuple[Any, ...]) -> None:
        """The call that loaded ``entries`` is accepted by none of them: say, per entry (the
        first ``_EXPLAINED``), the guard that rejected it ([Note: Persistent entries] 5)."""
        for entry in entries[:_EXPLAINED]:
            try:
                failures = entry.check.explain(*values, first_only=True)
                reason = str(failures[0]) if failures else "its check failed"
            except Exception as e:
                reason = f"its check raised {type(e).__name__}: {e}"
            ref = next((e.entry for e in self._events if e.outcome == "loaded"
                        and e.compile_id == str(entry.compile_id)), "?")
            self._event(ref, "guard failed", f"{reason} (the entry is kept: it may serve "
                        f"other calls)", "-", str(entry.compile_id))
        if len(entries) > _EXPLAINED:
            self._event("...", "guard failed", f"{len(entries) - _EXPLAINED} more loaded "
                        f"entries rejected the call (not explained)", "-")

    def _report_stale(self, key: str) -> None:
        """Nothing under ``key``: say which stored entries of this function are stale."""
        try:
            rows = [r for r in self.store.rows(self.identity["name"]) if r.key != key]
        except Exception:
            return
        for row in rows[:8]:
            reason = "stored for another version of the function or environment"
            try:
                value = self.store.local.get_one(row.key, row.entry)
                if value is not None:
                    reason = self._why_stale(self.store.decode(value))
            except Exception:
                pass
            self._event(f"{row.key}:{row.entry}", "stale", reason, "sqlite")

    def _why_stale(self, record: StoredRecord) -> str:
        parts = []
        if record.identity.get("code") != self.identity["code"]:
            parts.append("the function's code, defaults or closure changed")
        compiler = function_key(self.identity, self.compiler, self._env)[1]["compiler"]
        if record.identity.get("compiler") not in (None, compiler):
            parts.append(f"compiler {record.identity.get('compiler')} -> {compiler}")
        for k in sorted(set(record.env) | set(self._env)):
            if record.env.get(k) != self._env.get(k):
                parts.append(f"{k} {record.env.get(k)} -> {self._env.get(k)}")
        return "; ".join(parts) or "stored under another key"

    # ---- saving ----------------------------------------------------------------------
    def save(self, entry: CacheEntry) -> None:
        """Store a compiled entry ([Note: Persistent entries] 2); faults are warnings."""
        key = self.key
        if key is None:
            return
        cid = str(entry.compile_id)
        try:
            doc = export_guards(entry.check, arg_names=self.params, shared_sources=True)
            eid = entry_id(doc)
        except (GuardSchemaError, ValueError) as e:  # a source with no JSON form, say
            self._event(f"{key}:-", "not stored", f"its guard set has no JSON form: {str(e)[:300]}", "-",
                        cid)
            return
        ref = f"{key}:{eid}"
        for g in doc["guards"]:
            if not g["portable"]:
                names = ", ".join(n for n in source_names(doc, g) if n)
                on = f" on {names}" if names else ""
                self._event(ref, "not stored", f"the {g['kind']} guard{on} is not "
                            f"portable: {g.get('reason')}", "-", cid)
                return
        try:
            data = self.compiler.serialize(entry.artifact)
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise TypeError(f"serialize returned {type(data).__name__}, not bytes")
            data = bytes(data)
        except Exception as e:
            message = (f"jitguard store: {self.where}: entry {cid} not stored: serialize "
                       f"raised {type(e).__name__}: {e}")
            self._events.append(StoreEvent(ref, "not stored", message, "-", cid))
            if self._serialize_warned:  # said once: later entries go to the log alone
                store_log.info("%s", message)
            else:
                self._serialize_warned = True
                warn(message + " (later entries of this function that cannot be serialized "
                     "are logged on jitguard.store, not warned)", stacklevel=6)
            return
        dynamic = []
        for source in sorted(entry.dynamic, key=lambda s: s.name()):
            try:
                dynamic.append(source_to_json(source))
            except GuardSchemaError:
                pass
        compiler = function_key(self.identity, self.compiler, self._env)[1]["compiler"]
        record = StoredRecord(
            key=key, entry=eid, name=self.identity["name"], env=self._env,
            identity={"code": self.identity["code"], "compiler": compiler},
            guards=doc, dynamic=dynamic, artifact=data, created=time.time(),
        )
        self._seen.add(eid)
        tiers = self.store.save(record)
        if tiers:
            self._event(ref, "saved", f"{len(data)} artifact bytes", "+".join(tiers), cid)
