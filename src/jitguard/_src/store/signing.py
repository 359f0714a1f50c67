"""The HMAC-SHA256 key that signs every stored value, and signing itself.

May import: env, errors, store.* (the standard library otherwise).

# [Note: Store signing]
# Every stored value is signed with HMAC-SHA256 over all of it (store.codec), and nothing
# of a value is decoded, let alone handed to a compiler's ``deserialize`` (which may
# unpickle), before its signature is verified with ``hmac.compare_digest``. The key is
# ``JITGUARD_CACHE_KEY`` (its UTF-8 bytes; at least 16 of them) when set: machines that
# share a Redis tier must share it. Otherwise it is the per-user key file ``key`` in the
# store's directory: 32 random bytes, written to a temporary file created with mode 0600
# and then hard-linked into place, so the file appears whole or not at all, and two
# processes racing to create it end up with the same key (the loser reads the winner's).
# A key file that others may read or write (any bit of 0o077), or that another user owns,
# is refused with ``StoreError``: a key others know signs nothing (a ``Store`` then warns
# and runs in memory, [Note: Opening a store]). A store directory that jitguard makes is
# made with mode 0700.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path
from typing import Optional, Union

from .. import env
from ..errors import StoreError

Buffer = Union[bytes, memoryview]

__all__ = ["KEY_BYTES", "MAC_BYTES", "Signer", "load_key"]

KEY_BYTES = 32
MAC_BYTES = 32
_KEY_ENV = "JITGUARD_CACHE_KEY"


def _check_key_file(path: Path) -> None:
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"the store key {path} is not a regular file")
    if st.st_mode & 0o077:
        raise StoreError(
            f"the store key {path} has mode {stat.S_IMODE(st.st_mode):04o}: others may read "
            f"it, so it cannot authenticate anything (chmod 600 {path}, or delete it to make "
            f"a new one; every stored value then needs recompiling)"
        )
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise StoreError(f"the store key {path} belongs to another user (uid {st.st_uid})")


def _create_key_file(path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # atomic; fails when another process made it first
        except FileExistsError:
            pass
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass


def load_key(directory: Path) -> bytes:
    """``JITGUARD_CACHE_KEY``, else the key file in ``directory`` (made when missing). See
    [Note: Store signing]."""
    text = env.text(_KEY_ENV, min_bytes=16)
    if text is not None:
        return text.encode("utf-8")
    path = directory / "key"
    try:
        if not path.exists():
            _create_key_file(path)
        _check_key_file(path)
        key = path.read_bytes()
    except OSError as e:
        raise StoreError(f"cannot read or create the store key {path}: {e}") from e
    if len(key) != KEY_BYTES:
        raise StoreError(
            f"the store key {path} holds {len(key)} bytes, not {KEY_BYTES} (delete it to make "
            f"a new one)"
        )
    return key


class Signer:
    """HMAC-SHA256 with one key."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or not key:
            raise StoreError("a store key must be non-empty bytes")
        self._key = key

    def sign(self, *parts: Buffer) -> bytes:
        """The MAC of the concatenation of ``parts`` (``MAC_BYTES`` long; bytes or memory
        views, never joined: a stored value is megabytes)."""
        mac = hmac.new(self._key, digestmod=hashlib.sha256)
        for part in parts:
            mac.update(part)
        return mac.digest()

    def verify(self, data: Buffer, mac: bytes) -> bool:
        """Whether ``mac`` is this key's MAC of ``data`` (constant time)."""
        return self.verify_parts(mac, data)

    def verify_parts(self, mac: bytes, *parts: Buffer) -> bool:
        """Whether ``mac`` is this key's MAC of the concatenation of ``parts`` (constant
        time)."""
        return hmac.compare_digest(self.sign(*parts), mac)

    def fingerprint(self) -> str:
        """A short name of the key that tells keys apart and reveals nothing of it."""
        return hashlib.sha256(b"jitguard key id" + self._key).hexdigest()[:12]

    @classmethod
    def for_directory(cls, directory: Optional[Path]) -> Signer:
        from .keys import default_cache_dir

        return cls(load_key(directory or default_cache_dir()))
