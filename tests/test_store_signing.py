"""The store's signing key: JITGUARD_CACHE_KEY or a 0600 key file made atomically."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from jitguard import EnvironmentVariableWarning, StoreError
from jitguard._src.store.signing import KEY_BYTES, Signer, load_key


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JITGUARD_CACHE_KEY", raising=False)


def test_key_file_is_made_with_mode_0600(tmp_path: Path) -> None:
    """The first use makes ``key``: 32 random bytes, mode 0600; later uses read it."""
    key = load_key(tmp_path / "d")
    path = tmp_path / "d" / "key"
    assert len(key) == KEY_BYTES
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o700  # a directory it made
    assert load_key(tmp_path / "d") == key
    assert load_key(tmp_path / "other") != key
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["key"]  # no temporary left


def _race(directory: str, queue: multiprocessing.Queue[bytes]) -> None:
    queue.put(load_key(Path(directory)))


def test_racing_processes_agree_on_one_key(tmp_path: Path) -> None:
    """Four processes that make the key file at once all end with the same key."""
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[bytes] = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(tmp_path), queue)) for _ in range(4)]
    for p in procs:
        p.start()
    keys = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert len(set(keys)) == 1
    assert keys[0] == (tmp_path / "key").read_bytes()


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    """Mode 0644: StoreError naming the mode and the fix."""
    load_key(tmp_path)
    os.chmod(tmp_path / "key", 0o644)
    with pytest.raises(StoreError, match=r"has mode 0644: others may read it.*chmod 600"):
        load_key(tmp_path)


def test_a_key_file_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    """A key file that is not 32 bytes is refused (delete it to make a new one)."""
    path = tmp_path / "key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"short")
    os.close(fd)
    with pytest.raises(StoreError, match="holds 5 bytes, not 32"):
        load_key(tmp_path)


def test_env_key_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JITGUARD_CACHE_KEY is the key (no file is made); under 16 bytes it is refused with a
    warning, and the key file is the key."""
    monkeypatch.setenv("JITGUARD_CACHE_KEY", "a shared secret for the fleet")
    assert load_key(tmp_path) == b"a shared secret for the fleet"
    assert not (tmp_path / "key").exists()
    monkeypatch.setenv("JITGUARD_CACHE_KEY", "short")
    with pytest.warns(EnvironmentVariableWarning, match="shorter than 16 bytes"):
        key = load_key(tmp_path)
    assert key == (tmp_path / "key").read_bytes() and len(key) == KEY_BYTES


def test_signer_verifies_only_its_own_macs() -> None:
    """A MAC verifies for the same key and data only."""
    a, b = Signer(b"k" * 32), Signer(b"j" * 32)
    mac = a.sign(b"data")
    assert a.verify(b"data", mac)
    assert not a.verify(b"datA", mac)
    assert not b.verify(b"data", mac)
    assert a.fingerprint() != b.fingerprint()
    with pytest.raises(StoreError):
        Signer(b"")
