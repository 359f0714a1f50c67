"""``python -m jitguard cache ls | show KEY | stats | clear``: the store from the shell.

May import: errors, compiler.*, store.* (the standard library otherwise).

``--dir DIR`` picks the store (default: ``JITGUARD_CACHE_DIR`` or the user cache directory);
``JITGUARD_REDIS_URL`` adds the shared tier to ``stats`` and, with ``clear --shared``, to
``clear``. ``show`` verifies the value's signature before reading anything of it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any, Optional, TextIO

from ..errors import JitGuardError
from .codec import RecordError
from .tiers import Store

__all__ = ["main"]


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _ls(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    rows = store.rows(args.function)
    if args.json:
        out.write(json.dumps([r._asdict() for r in rows], indent=2) + "\n")
        return 0
    if not rows:
        out.write(f"no stored entries in {store.local.path}\n")
        return 0
    out.write(f"{'KEY:ENTRY':<49}  {'SIZE':>10}  {'LAST USED':<19}  FUNCTION\n")
    for r in rows:
        out.write(f"{r.key}:{r.entry:<16}  {_size(r.size):>10}  {_when(r.used)}  {r.name}\n")
    return 0


def _show(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    key, entry = store.find(args.key)
    value = store.local.get_one(key, entry)
    if value is None:
        raise JitGuardError(f"{key}:{entry} was deleted meanwhile")
    try:
        record = store.decode(value)
    except RecordError as e:
        out.write(f"{key}:{entry}: {e.outcome}: {e.message}\n")
        return 1
    guards = record.guards.get("guards", [])
    if args.json:
        data: dict[str, Any] = record.header()
        out.write(json.dumps(data, indent=2, default=str) + "\n")
        return 0
    out.write(f"entry     {key}:{entry}\n")
    out.write(f"function  {record.name}\n")
    out.write(f"created   {_when(record.created)}\n")
    out.write(f"artifact  {len(record.artifact)} bytes\n")
    out.write("env       " + ", ".join(f"{k}={v}" for k, v in record.env.items()) + "\n")
    if record.dynamic:
        names = ", ".join(str(d.get("name", "?")) for d in record.dynamic)
        out.write(f"dynamic   {names}\n")
    out.write(f"guards    {len(guards)} (schema_version {record.guards.get('schema_version')})\n")
    for g in guards:
        mark = "" if g.get("portable", True) else f"   [not portable: {g.get('reason')}]"
        out.write(f"  {g.get('kind')}: {g.get('code')}{mark}\n")
    return 0


def _stats(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    stats = store.stats()
    if args.json:
        out.write(json.dumps(stats, indent=2) + "\n")
        return 0
    out.write(f"directory  {stats['directory']}\n")
    out.write(f"entries    {stats['entries']} ({stats['functions']} functions, "
              f"{stats['keys']} keys)\n")
    out.write(f"size       {_size(stats['bytes'])} of at most {_size(stats['max_bytes'])}\n")
    out.write(f"key id     {stats['key_id']}\n")
    redis = stats.get("redis")
    if redis is not None:
        if "error" in redis:
            out.write(f"redis      {redis['url']}: {redis['error']}\n")
        else:
            out.write(f"redis      {redis['url']} prefix {redis['prefix']}: {redis['entries']} "
                      f"entries, {_size(redis['bytes'])}\n")
    return 0


def _clear(store: Store, args: argparse.Namespace, out: TextIO) -> int:
    n = store.clear(shared=args.shared)
    where = "the local tier" + (" and Redis" if args.shared and store.shared else "")
    out.write(f"deleted {n} entries from {where}\n")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jitguard", description="jitguard tools")
    top = parser.add_subparsers(dest="tool", required=True)
    cache = top.add_parser("cache", help="the persistent store of specialized functions")
    cache.add_argument("--dir", default=None, help="the store's directory (default: "
                       "JITGUARD_CACHE_DIR or the user cache directory)")
    sub = cache.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("ls", help="list the stored entries, most recently used first")
    ls.add_argument("--function", default=None, help="only entries of module:qualname")
    ls.add_argument("--json", action="store_true")
    show = sub.add_parser("show", help="one entry: its guard set and artifact size")
    show.add_argument("key", help="KEY:ENTRY as ls prints it, or a unique prefix")
    show.add_argument("--json", action="store_true")
    stats = sub.add_parser("stats", help="sizes and counts of each tier")
    stats.add_argument("--json", action="store_true")
    clear = sub.add_parser("clear", help="delete every stored entry")
    clear.add_argument("--shared", action="store_true", help="Redis too (JITGUARD_REDIS_URL)")
    return parser


_COMMANDS = {"ls": _ls, "show": _show, "stats": _stats, "clear": _clear}


def main(argv: Optional[Sequence[str]] = None, out: TextIO = sys.stdout) -> int:
    """Run the command line; returns the exit status (2 for a usage error)."""
    args = _parser().parse_args(argv)
    try:
        store = Store(args.dir, strict=True)
        try:
            return _COMMANDS[args.command](store, args, out)
        finally:
            store.close()
    except JitGuardError as e:
        sys.stderr.write(f"jitguard cache: {e}\n")
        return 1
