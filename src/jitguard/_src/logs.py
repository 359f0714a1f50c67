"""One switch for jitguard's loggers: ``JITGUARD_LOGS`` and ``set_logs``.

May import: env (the standard library otherwise).

# [Note: Log switches]
# jitguard logs on a few named loggers (``LOGS``: ``recompiles``, ``recompiles_verbose``,
# ``guards``, ``dispatch``, ``compile``, ``codegen``, ``trace``, ``torch``, ``store``, each
# ``jitguard.<name>``). ``JITGUARD_LOGS`` (read
# once, when jitguard is imported) and ``set_logs(...)`` take the same text, the way
# ``TORCH_LOGS`` does: names separated by commas, ``+name`` for DEBUG, ``-name`` for ERROR
# only, a bare name for INFO, ``all`` for every name. A name that is turned on gets that
# level, one jitguard handler (stderr at the time of the message, a glog-style prefix) and
# stops propagating, so a line is not printed twice under a root handler; every other
# jitguard logger is left as the application's logging configured it. Each ``set_logs``
# call replaces the whole setting (``set_logs()`` turns everything off again).
# Nothing is formatted unless a logger is on: callers test ``isEnabledFor`` before building
# a message (a recompile's reasons are computed only when a log or a trace wants them), or
# pass %-style arguments. Under torch, ``TORCH_LOGS="recompiles,jitguard"`` works too: see
# [Note: jitguard in torch's logging].
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from typing import Optional, Union

from . import env

__all__ = [
    "ENV_VAR",
    "LOGS",
    "enable",
    "enabled",
    "get_logger",
    "parse_logs",
    "set_logs",
    "turned_on",
]

ENV_VAR = "JITGUARD_LOGS"

# short name -> what it logs. Each is the logger ``jitguard.<name>``.
LOGS: dict[str, str] = {
    "recompiles": "why a function compiled again: each entry's first failing guard and "
    "(+N more) (INFO), every failing guard (DEBUG: +recompiles); entries dropped because an "
    "object they guarded died",
    "recompiles_verbose": "why a function compiled again: every failing guard of every entry, "
    "each with its user stack (INFO), in place of the recompiles message",
    "guards": "the guards of every new entry, one line each (INFO)",
    "dispatch": "misses and what served them (INFO); hits found off the fast path (DEBUG)",
    "compile": "every compile: its id, time, guard count and check cost (INFO)",
    "codegen": "the text of every generated check, chunk and dispatcher (DEBUG: +codegen)",
    "trace": "where the structured trace is written (INFO)",
    "torch": "the torch integration (INFO)",
    "store": "the persistent store: entries loaded, rejected (by which guard) or stale, "
    "entries saved, tier faults (INFO)",
}

_LEVELS = {"+": logging.DEBUG, "-": logging.ERROR, "": logging.INFO}
_ITEM = re.compile(r"^([+-]?)([A-Za-z_][\w.]*)$")
_lock = threading.RLock()
# logger name -> (level, propagate) before jitguard turned it on, to restore on reset.
_saved: dict[str, tuple[int, bool]] = {}
_handlers: dict[str, logging.Handler] = {}


def get_logger(name: str) -> logging.Logger:
    """The logger of one of ``LOGS`` (``jitguard.<name>``)."""
    if name not in LOGS:
        raise ValueError(f"unknown jitguard log {name!r}; the logs are {sorted(LOGS)}")
    return logging.getLogger(f"jitguard.{name}")


def enabled(name: str, level: int = logging.INFO) -> bool:
    """Whether the log ``name`` would emit a message at ``level`` (however it was turned on:
    ``JITGUARD_LOGS``, ``set_logs``, torch's logging or the application's own)."""
    return logging.getLogger(f"jitguard.{name}").isEnabledFor(level)


class _GlogFormatter(logging.Formatter):
    """``I1203 06:44:45.350000 14726 jitguard.recompiles] message``, every line prefixed."""

    _ABBR = {"DEBUG": "V", "INFO": "I", "WARNING": "W", "ERROR": "E", "CRITICAL": "C"}

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text = text.rstrip("\n") + "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            text = text.rstrip("\n") + "\n" + self.formatStack(record.stack_info)
        when = time.strftime("%m%d %H:%M:%S", time.localtime(record.created))
        micros = int((record.created % 1) * 1_000_000)
        level = self._ABBR.get(record.levelname, record.levelname[:1])
        prefix = f"{level}{when}.{micros:06d} {record.process} {record.name}]"
        return "\n".join(f"{prefix} {line}" for line in text.split("\n"))


class _StderrHandler(logging.Handler):
    """Writes to ``sys.stderr`` as it is when the message is emitted (so a redirect made
    after ``set_logs``, such as a test's capture, is honoured)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def parse_logs(text: str) -> dict[str, int]:
    """``"recompiles,+guards"`` -> ``{"recompiles": INFO, "guards": DEBUG}``. Raises
    ``ValueError`` naming the part that is not a log, and the logs there are."""
    out: dict[str, int] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        match = _ITEM.match(item)
        name = match.group(2) if match else item
        if name.startswith("jitguard."):
            name = name[len("jitguard."):]
        if match is None or (name not in LOGS and name != "all"):
            raise ValueError(
                f"{ENV_VAR}/set_logs: {item!r} is not a jitguard log; write names separated by "
                f"commas, '+name' for DEBUG, '-name' for ERROR only, 'all' for every log; the "
                f"logs are: {', '.join(sorted(LOGS))}"
            )
        level = _LEVELS[match.group(1)]
        for each in LOGS if name == "all" else (name,):
            out[each] = level
    return out


def set_logs(spec: Optional[str] = None, /, **levels: Union[bool, int]) -> None:
    """Turn jitguard's logs on, as ``JITGUARD_LOGS`` does: ``set_logs("recompiles,+guards")``
    or ``set_logs(recompiles=True, guards=logging.DEBUG)`` (True is INFO, False is off).
    Replaces the previous setting; ``set_logs()`` turns every log off again. See
    [Note: Log switches]."""
    wanted = parse_logs(spec) if spec is not None else {}
    for name, level in levels.items():
        if name not in LOGS and name != "all":
            raise ValueError(f"set_logs: unknown jitguard log {name!r}; the logs are {sorted(LOGS)}")
        if isinstance(level, bool):
            chosen: Optional[int] = logging.INFO if level else None
        elif isinstance(level, int):
            chosen = level
        else:
            raise TypeError(f"set_logs: {name}= takes True/False or a logging level, got {level!r}")
        for each in LOGS if name == "all" else (name,):
            if chosen is None:
                wanted.pop(each, None)
            else:
                wanted[each] = chosen
    _apply(wanted)


def _apply(wanted: dict[str, int]) -> None:
    with _lock:
        for qname in list(_saved):
            logger = logging.getLogger(qname)
            handler = _handlers.pop(qname, None)
            if handler is not None:
                logger.removeHandler(handler)
            level, propagate = _saved.pop(qname)
            logger.setLevel(level)
            logger.propagate = propagate
        for name, level in wanted.items():
            enable(name, level)


def enable(name: str, level: int = logging.INFO,
           formatter: Optional[logging.Formatter] = None) -> None:
    """Turn one log on (keeping the others as they are), with jitguard's handler and
    ``formatter`` (default: jitguard's glog-style one). ``set_logs`` undoes it."""
    with _lock:
        logger = get_logger(name)
        if logger.name not in _saved:
            _saved[logger.name] = (logger.level, logger.propagate)
        old = _handlers.pop(logger.name, None)
        if old is not None:
            logger.removeHandler(old)
        handler = _StderrHandler(logging.DEBUG)
        handler.setFormatter(formatter or _GlogFormatter())
        _handlers[logger.name] = handler
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False


def turned_on() -> dict[str, int]:
    """The logs jitguard's own switch has turned on now, with their levels."""
    with _lock:
        return {q[len("jitguard."):]: logging.getLogger(q).level for q in _saved}


def _from_environment() -> None:
    text = env.raw(ENV_VAR)
    if not text:
        return
    try:
        wanted = parse_logs(text)
    except ValueError as e:
        # A typo in an environment variable must not make ``import jitguard`` fail: one
        # EnvironmentVariableWarning, as for every JITGUARD_* variable.
        env.refuse(ENV_VAR, text, f"is not a log setting ({e})", "no logs")
        return
    _apply(wanted)


_from_environment()
