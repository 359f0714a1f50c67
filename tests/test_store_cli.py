"""``python -m jitguard cache ls | show KEY | stats | clear``."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import jitguard
from jitguard._src.store.cli import main

SRC = str(Path(__file__).resolve().parents[1] / "src")


def specialize_(fn: Any, **options: Any) -> Any:
    """``jitguard.specialize`` without the GLOBAL_STATE guard: in-process tests must not
    depend on which integrations earlier tests loaded (torch's states are portable only with
    the torch integration's codecs)."""
    return jitguard.specialize(fn, global_state=False, **options)


def scale(x: Any, k: Any) -> Any:
    return x * k


def cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    status = main(list(argv), out=out)
    return status, out.getvalue()


@pytest.fixture
def stored(store_dir: Path) -> str:
    """Two stored entries of ``scale``; the ref (KEY:ENTRY) of the one for (2, 3)."""
    f = specialize_(scale, store=True)
    f(2, 3)
    f("a", 2)
    first = jitguard.cache_of(f).store_events()[0]
    assert first.outcome == "saved"
    return first.entry


def test_ls_lists_every_entry(stored: str) -> None:
    """ls prints one line per entry: KEY:ENTRY, size, last use, function."""
    status, out = cli("cache", "ls")
    lines = out.splitlines()
    assert status == 0
    assert lines[0].split() == ["KEY:ENTRY", "SIZE", "LAST", "USED", "FUNCTION"]
    assert len(lines) == 3
    assert any(line.startswith(stored) for line in lines)
    assert all(line.endswith("test_store_cli:scale") for line in lines[1:])
    status, out = cli("cache", "ls", "--json")
    assert {r["name"] for r in json.loads(out)} == {"test_store_cli:scale"}
    assert cli("cache", "ls", "--function", "nope:f")[1].startswith("no stored entries")


def test_show_prints_the_guard_set_and_the_artifact_size(stored: str) -> None:
    """show KEY: the function, environment, guards (one line each) and artifact size."""
    status, out = cli("cache", "show", stored)
    assert status == 0
    assert f"entry     {stored}" in out
    assert "function  test_store_cli:scale" in out
    assert "artifact  0 bytes" in out  # the default compiler's artifact is fn itself
    # 2 guards, and GLOBAL_STATE when torch's states are registered (they are portable)
    assert any(f"guards    {n} (schema_version 2)" in out for n in (2, 3))  # shared sources
    assert "  EQUALS_MATCH: L['k'] == 3" in out
    assert "  EQUALS_MATCH: L['x'] == 2" in out
    status, out = cli("cache", "show", stored[:40], "--json")
    assert status == 0
    data = json.loads(out)
    assert data["entry"] == stored.split(":")[1] and data["artifact_size"] == 0
    assert [g["code"] for g in data["guards"]["guards"]
            if g["kind"] != "GLOBAL_STATE"] == ["L['k'] == 3", "L['x'] == 2"]


def test_show_refuses_a_tampered_value(stored: str, store_dir: Path) -> None:
    """show verifies the signature first: a changed value is reported, not printed."""
    db = sqlite3.connect(store_dir / "store.sqlite3", isolation_level=None)
    key, entry = stored.split(":")
    (value,) = db.execute("SELECT value FROM entries WHERE key=? AND entry=?",
                          (key, entry)).fetchone()
    db.execute("UPDATE entries SET value=? WHERE key=? AND entry=?",
               (value[:-1] + bytes([value[-1] ^ 1]), key, entry))
    db.close()
    status, out = cli("cache", "show", stored)
    assert status == 1
    assert out == f"{stored}: refused: " + out.split(": refused: ")[1]
    assert "bad signature" in out


def test_show_an_unknown_or_ambiguous_key(stored: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A ref that matches nothing (or several) is an error naming how many matched."""
    assert cli("cache", "show", "zzz")[0] == 1
    assert "no stored entries match 'zzz'" in capsys.readouterr().err
    assert cli("cache", "show", stored.split(":")[0])[0] == 1
    assert "2 stored entries match" in capsys.readouterr().err


def test_stats_and_clear(stored: str, store_dir: Path) -> None:
    """stats counts entries, functions and bytes; clear deletes them all."""
    status, out = cli("cache", "stats")
    assert status == 0
    assert f"directory  {store_dir}" in out
    assert "entries    2 (1 functions, 1 keys)" in out
    data = json.loads(cli("cache", "stats", "--json")[1])
    assert data["entries"] == 2 and data["bytes"] > 0
    assert cli("cache", "clear") == (0, "deleted 2 entries from the local tier\n")
    assert json.loads(cli("cache", "stats", "--json")[1])["entries"] == 0


def test_stats_and_clear_with_redis(stored: str, store_dir: Path,
                                    redis_prefix: tuple[str, str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With JITGUARD_REDIS_URL, stats shows the shared tier and clear --shared empties it."""
    url, prefix = redis_prefix
    monkeypatch.setenv("JITGUARD_REDIS_URL", url)
    monkeypatch.setenv("JITGUARD_REDIS_PREFIX", prefix)
    store = jitguard.Store(store_dir)
    assert store.shared is not None
    store.shared.put("k" * 32, "e", "m:f", b"12345")
    out = cli("cache", "stats")[1]
    assert f"prefix {prefix}: 1 entries, 5 B" in out
    assert cli("cache", "clear", "--shared")[1] == (
        "deleted 3 entries from the local tier and Redis\n")
    assert store.shared.keys() == []


def test_python_m_jitguard(stored: str, store_dir: Path) -> None:
    """``python -m jitguard cache ls`` runs the same command line; a usage error is 2."""
    env = {**os.environ, "PYTHONPATH": SRC, "JITGUARD_CACHE_DIR": str(store_dir)}
    out = subprocess.run([sys.executable, "-m", "jitguard", "cache", "ls"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and stored in out.stdout
    bad = subprocess.run([sys.executable, "-m", "jitguard", "cache", "frobnicate"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
