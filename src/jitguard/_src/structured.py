"""Structured traces in the format tlparse reads: ``JITGUARD_TRACE=DIR`` or ``set_trace``.

May import: env (the standard library otherwise).

# [Note: Structured trace]
# A trace is a text file of records, one per line: a glog-style prefix
# (``V1203 06:44:45.350000 <pid> <path>:<line>] ``), then one JSON object whose first key is
# the event name (its value: the event's metadata), then the compile id as integer fields
# (``compiled_autograd_id`` when set, ``frame_id``, ``frame_compile_id``, ``attempt``). A
# record with a payload carries ``has_payload``, the md5 of the payload text, and the
# payload follows on lines that each start with a tab. A payload list is written one JSON
# item per line, a dict as indented JSON, a string as it is. File names in stacks are
# interned: ``{"str": [path, n]}`` is written once, then frames say ``"filename": n``. This
# is the format of torch's ``TORCH_TRACE``, which tlparse renders.
# Records go to *sinks*. ``JITGUARD_TRACE=DIR`` (read when jitguard is imported) or
# ``set_trace(DIR)`` adds a file sink: ``DIR/dedicated_log_jitguard_trace_<random>.log``,
# opened on the first record (first a ``jitguard_version`` artifact), reopened after a
# fork. Under torch's ``TORCH_TRACE`` the torch integration adds a sink that writes into
# torch's own stream, interning through torch's table (see [Note: jitguard in torch's
# logging]). With no sink, ``active()`` is False and callers build nothing. A sink that
# fails to write says so once and is removed: a trace never breaks a call. What the cache
# writes per compile: [Note: Compile events].
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, Optional, Protocol

from . import env

__all__ = [
    "ENV_VAR",
    "FileSink",
    "Sink",
    "active",
    "add_sink",
    "emit",
    "format_payload",
    "frames",
    "remove_sink",
    "render",
    "set_trace",
    "sinks",
    "trace_file",
]

ENV_VAR = "JITGUARD_TRACE"
FILE_PREFIX = "dedicated_log_jitguard_trace_"
log = logging.getLogger("jitguard.trace")

Intern = Callable[[str], int]
MetadataFn = Callable[[Intern], dict[str, Any]]


class Sink(Protocol):
    """Where records go: ``intern`` gives a file name's index in this sink's table (writing
    the ``str`` record the first time), ``write`` writes one record with its payload text."""

    def intern(self, text: str) -> int: ...

    def write(self, record: dict[str, Any], payload: Optional[str], where: str) -> None: ...


def format_payload(payload: Any) -> Optional[str]:
    """The payload as the text that follows a record (None: no payload)."""
    if payload is None or isinstance(payload, str):
        return payload
    if isinstance(payload, (list, tuple)):
        return "[\n" + ",\n".join(json.dumps(item, default=repr) for item in payload) + "\n]"
    return json.dumps(payload, indent=0, default=repr)


def _glog_prefix(where: str) -> str:
    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now))
    return f"V{stamp}.{int((now % 1) * 1_000_000):06d} {os.getpid()} {where}]"


def render(record: dict[str, Any], payload: Optional[str], where: str) -> str:
    """One record as trace text (no trailing newline)."""
    text = f"{_glog_prefix(where)} {json.dumps(record, default=repr)}"
    if payload is not None:
        text += "".join(f"\n\t{line}" for line in payload.split("\n"))
    return text


class FileSink:
    """Records into ``<directory>/dedicated_log_jitguard_trace_<random>.log``, opened on the
    first record."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path: Optional[str] = None
        self._stream: Any = None
        self._pid: Optional[int] = None
        self._strings: dict[str, int] = {}
        self._lock = threading.RLock()

    def _open(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=FILE_PREFIX, suffix=".log", dir=self.directory)
        self._stream = os.fdopen(fd, "w", encoding="utf-8")
        self._pid = os.getpid()
        self._strings = {}
        self.path = path
        log.info("jitguard structured trace: %s (render it with: tlparse %s)", path, path)
        version = _version()
        self._write_line(
            render(
                {"artifact": {"name": "jitguard_version", "encoding": "json"},
                 "has_payload": _md5(version)},
                version,
                "jitguard/_src/structured.py:0",
            )
        )

    def _ensure_open(self) -> None:
        if self._stream is not None and self._pid != os.getpid():
            # A forked child: leave the parent's buffered text alone, start a file of its own.
            self._stream = None
        if self._stream is None:
            self._open()

    def _write_line(self, text: str) -> None:
        self._stream.write(text + "\n")
        self._stream.flush()

    def intern(self, text: str) -> int:
        with self._lock:
            self._ensure_open()
            index = self._strings.get(text)
            if index is None:
                index = self._strings[text] = len(self._strings)
                self._write_line(render({"str": [text, index]}, None, "jitguard/_src/structured.py:0"))
            return index

    def write(self, record: dict[str, Any], payload: Optional[str], where: str) -> None:
        with self._lock:
            self._ensure_open()
            self._write_line(render(record, payload, where))

    def close(self) -> None:
        with self._lock:
            if self._stream is not None and self._pid == os.getpid():
                self._stream.close()
            self._stream = None

    def __repr__(self) -> str:
        return f"<FileSink {self.path or self.directory}>"


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def _version() -> str:
    try:
        from importlib.metadata import version

        jg = version("jitguard")
    except Exception:
        jg = "unknown"
    return format_payload(
        {"jitguard_version": jg, "python": sys.version.split()[0], "pid": os.getpid()}
    ) or ""


_lock = threading.RLock()
_sinks: list[Any] = []
_file_sink: Optional[FileSink] = None


def active() -> bool:
    """Whether any sink takes records (callers build nothing otherwise)."""
    return bool(_sinks)


def sinks() -> tuple[Any, ...]:
    return tuple(_sinks)


def add_sink(sink: Any) -> None:
    """Send records to ``sink`` too (a ``Sink``); adding one twice is a no-op."""
    with _lock:
        if sink not in _sinks:
            _sinks.append(sink)


def remove_sink(sink: Any) -> None:
    with _lock:
        if sink in _sinks:
            _sinks.remove(sink)


def set_trace(directory: Optional[str]) -> Optional[str]:
    """Write jitguard's structured trace into ``directory`` (a new file there, opened on the
    first compile), or stop writing it (``None``). Returns the directory. Like
    ``JITGUARD_TRACE=DIR``; render the file with ``tlparse <file>`` (or ``tlparse DIR
    --latest``). See [Note: Structured trace]."""
    global _file_sink
    with _lock:
        if _file_sink is not None:
            remove_sink(_file_sink)
            _file_sink.close()
            _file_sink = None
        if directory is None:
            return None
        directory = os.fspath(directory)
        _file_sink = FileSink(directory)
        add_sink(_file_sink)
        return directory


def trace_file() -> Optional[str]:
    """The file the ``JITGUARD_TRACE``/``set_trace`` sink writes (None before its first
    record, or with no such sink)."""
    return _file_sink.path if _file_sink is not None else None


def frames(stack: Iterable[Any], intern: Intern) -> list[dict[str, Any]]:
    """``FrameSummary``-like frames (``filename``, ``lineno``, ``name``, ``line``) as trace
    frames, file names interned."""
    out = []
    for frame in stack:
        item: dict[str, Any] = {
            "line": frame.lineno,
            "name": frame.name,
            "filename": intern(frame.filename),
        }
        loc = getattr(frame, "line", None)
        if loc:
            item["loc"] = loc
        out.append(item)
    return out


def emit(
    name: str,
    metadata: MetadataFn,
    *,
    compile_id: Any = None,
    attempt: int = 0,
    payload: Any = None,
    where: str = "jitguard/_src/structured.py:0",
    torch_writes: bool = False,
) -> None:
    """Write one record to every sink. ``metadata(intern)`` builds the event's metadata (it
    may intern file names); ``compile_id`` (anything with ``frame_id``,
    ``frame_compile_id``, ``compiled_autograd_id``) and ``attempt`` place it; ``payload``
    (text, a list, a dict, or a function of ``intern`` returning one) follows it.
    ``torch_writes``: torch writes this record into its own stream itself, so a sink that
    writes there (``torch_stream = True``) is skipped."""
    if not _sinks:
        return
    per_sink = callable(payload)
    text = None if per_sink else format_payload(payload)
    for sink in list(_sinks):
        if torch_writes and getattr(sink, "torch_stream", False):
            continue
        try:
            if per_sink:
                text = format_payload(payload(sink.intern))
            record: dict[str, Any] = {name: metadata(sink.intern)}
            if compile_id is not None:
                ca = getattr(compile_id, "compiled_autograd_id", None)
                if ca is not None:
                    record["compiled_autograd_id"] = ca
                for field in ("frame_id", "frame_compile_id"):
                    value = getattr(compile_id, field, None)
                    if value is not None:
                        record[field] = value
                record["attempt"] = attempt
            if text is not None:
                record["has_payload"] = _md5(text)
            sink.write(record, text, where)
        except Exception as e:  # a trace must never break the call it describes
            remove_sink(sink)
            warnings.warn(
                f"jitguard: stopped writing the structured trace to {sink!r}: "
                f"{type(e).__name__}: {e}",
                RuntimeWarning,
                stacklevel=2,
            )


def _from_environment() -> None:
    directory = env.directory(ENV_VAR)
    if directory is not None:
        set_trace(str(directory))


_from_environment()
