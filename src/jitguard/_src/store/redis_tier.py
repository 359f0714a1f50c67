"""The shared tier: a Redis server (redis-py, imported only when a URL is given).

May import: env, errors, store.* (the standard library otherwise; ``redis`` lazily).

# [Note: The shared tier]
# One Redis hash per function key, ``<prefix>:<key>``, field = entry id, value = the signed
# value; ``HSET`` is atomic, so concurrent writers never tear a value, and the hash gets a
# time to live (``JITGUARD_REDIS_TTL`` seconds, default 7 days) on every write. Connect and
# socket timeouts are short (``JITGUARD_REDIS_TIMEOUT``, default 0.5 s) and redis-py's
# retries are off: a down or slow server costs one timeout, then the tier stays off for
# ``down_for`` seconds (30) before it is tried again, so a dead server never slows every
# miss. Every failure surfaces as ``TierError`` (the store turns it into a warning).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Optional

from .. import env
from ..errors import StoreError
from .sqlite import TierError

__all__ = ["RedisTier"]

_DEFAULT_TTL = 7 * 24 * 3600


def _float_env(name: str, default: float) -> float:
    return env.seconds(name, default)


def _no_client_info() -> dict[str, Any]:
    """Options that turn off CLIENT SETINFO: one round trip less, and redis-py then skips
    reading its own version from the package metadata (~10 ms on a first connection).
    redis-py 8 takes a ``driver_info``; 5 to 7 take ``lib_name``/``lib_version``."""
    try:
        from redis.driver_info import DriverInfo
    except ImportError:
        return {"lib_name": None, "lib_version": None}
    return {"driver_info": DriverInfo(name=None, lib_version=None)}


class RedisTier:
    """The shared tier ([Note: The shared tier])."""

    name = "redis"

    def __init__(
        self, url: str, *, prefix: str = "jitguard", timeout: Optional[float] = None,
        ttl: Optional[float] = None, down_for: float = 30.0,
    ) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise StoreError(
                f"a Redis tier was asked for ({url}) but redis-py is not installed: "
                f"pip install redis (or unset JITGUARD_REDIS_URL)"
            ) from None
        self.url = url
        self.prefix = prefix
        self.timeout = _float_env("JITGUARD_REDIS_TIMEOUT", 0.5) if timeout is None else timeout
        self.ttl = int(_float_env("JITGUARD_REDIS_TTL", _DEFAULT_TTL) if ttl is None else ttl)
        self.down_for = down_for
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        try:
            self._client: Any = redis.Redis.from_url(
                url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout,
                retry=Retry(NoBackoff(), 0), retry_on_timeout=False,
                health_check_interval=0,
                **_no_client_info(),
            )
        except ValueError as e:
            raise StoreError(f"bad Redis URL {url!r}: {e}") from None
        self._down_until = 0.0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<RedisTier {self._safe_url()} prefix={self.prefix!r}>"

    def _safe_url(self) -> str:
        head, at, tail = self.url.rpartition("@")
        return f"{head.split('//')[0]}//***@{tail}" if at else self.url

    def _name(self, key: str) -> str:
        return f"{self.prefix}:{key}"

    @property
    def down(self) -> bool:
        """Whether a recent failure keeps the tier off for now."""
        return time.monotonic() < self._down_until

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        if self.down:
            raise TierError(f"Redis at {self._safe_url()} is off after a recent failure")
        try:
            return fn(*args)
        except self._errors as e:
            with self._lock:
                self._down_until = time.monotonic() + self.down_for
            raise TierError(
                f"{what} on Redis at {self._safe_url()}: {type(e).__name__}: {e} (not tried "
                f"again for {self.down_for:g} s)"
            ) from e

    def get(self, key: str) -> list[tuple[str, bytes]]:
        found = self._call("cannot read", self._client.hgetall, self._name(key))
        return [(k.decode("utf-8", "replace"), bytes(v)) for k, v in found.items()]

    def put(self, key: str, entry: str, name: str, value: bytes) -> int:
        def write() -> None:
            pipe = self._client.pipeline(transaction=True)
            pipe.hset(self._name(key), entry, value)
            if self.ttl > 0:
                pipe.expire(self._name(key), self.ttl)
            pipe.execute()

        self._call("cannot write", write)
        return 0

    def keys(self) -> list[str]:
        """The function keys stored under this prefix."""
        names = self._call("cannot list", lambda: list(
            self._client.scan_iter(match=f"{self.prefix}:*", count=500)))
        plen = len(self.prefix) + 1
        return sorted(n.decode("utf-8", "replace")[plen:] for n in names)

    def count(self) -> tuple[int, int]:
        """(entries, bytes) stored under this prefix."""
        entries = size = 0
        for key in self.keys():
            for _, value in self.get(key):
                entries += 1
                size += len(value)
        return entries, size

    def delete(self, key: Optional[str] = None, entry: Optional[str] = None) -> int:
        if key is not None and entry is not None:
            return int(self._call("cannot delete", self._client.hdel, self._name(key), entry))
        keys = [key] if key is not None else self.keys()
        if not keys:
            return 0
        return int(self._call("cannot delete", self._client.delete,
                              *[self._name(k) for k in keys]))

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:
            pass
