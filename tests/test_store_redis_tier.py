"""The shared tier against the real Redis (127.0.0.1:6379 or JITGUARD_TEST_REDIS_URL), and
against a closed port and a server that never answers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from _helpers import closed_port
from jitguard import StoreError
from jitguard._src.store.redis_tier import RedisTier
from jitguard._src.store.sqlite import TierError


def test_put_get_delete(redis_prefix: tuple[str, str]) -> None:
    """Values are fields of one hash per key, with a TTL; delete by entry, key or prefix."""
    url, prefix = redis_prefix
    tier = RedisTier(url, prefix=prefix, ttl=60)
    tier.put("k1", "a", "m:f", b"one")
    tier.put("k1", "b", "m:f", b"\x00two")
    tier.put("k2", "a", "m:g", b"three")
    assert sorted(tier.get("k1")) == [("a", b"one"), ("b", b"\x00two")]
    assert tier.get("missing") == []
    assert tier.keys() == ["k1", "k2"]
    assert tier.count() == (3, len(b"one\x00twothree"))
    client = redis.Redis.from_url(url)
    assert 0 < client.ttl(f"{prefix}:k1") <= 60
    assert tier.delete("k1", "a") == 1
    assert tier.delete("k1") == 1
    assert tier.delete() == 1
    assert tier.keys() == []


def test_closed_port_is_a_tier_error_then_the_tier_rests() -> None:
    """A refused connection is a TierError naming the server; the tier is then off for
    ``down_for`` seconds (no second connection attempt)."""
    tier = RedisTier(f"redis://127.0.0.1:{closed_port()}/0", timeout=0.2, down_for=60)
    with pytest.raises(TierError, match=r"cannot read on Redis at redis://127\.0\.0\.1:\d+/0"):
        tier.get("k")
    assert tier.down
    with pytest.raises(TierError, match="off after a recent failure"):
        tier.put("k", "e", "m:f", b"v")


def test_a_server_that_never_answers_times_out(silent_port: int) -> None:
    """A server that accepts and never answers costs one short timeout, not a hang (the
    bound is generous: it only tells a timeout from a hang)."""
    tier = RedisTier(f"redis://127.0.0.1:{silent_port}/0", timeout=0.2)
    started = time.monotonic()
    with pytest.raises(TierError, match="Timeout"):
        tier.get("k")
    assert time.monotonic() - started < 5
    assert tier.down


def test_the_tier_comes_back_after_resting(redis_prefix: tuple[str, str]) -> None:
    """After ``down_for`` the tier is tried again."""
    url, prefix = redis_prefix
    tier = RedisTier(url, prefix=prefix, down_for=0.05)
    tier._down_until = time.monotonic() + 0.05
    assert tier.down
    time.sleep(0.1)
    assert not tier.down
    tier.put("k", "e", "m:f", b"v")
    assert tier.get("k") == [("e", b"v")]


def test_bad_url_is_a_store_error() -> None:
    """A URL redis-py cannot parse is a StoreError at construction."""
    with pytest.raises(StoreError, match="bad Redis URL"):
        RedisTier("http://nowhere")


def test_the_url_password_is_not_shown() -> None:
    """repr and messages hide a password in the URL."""
    tier = RedisTier("redis://user:secret@127.0.0.1:1/0", timeout=0.1)
    assert "secret" not in repr(tier)
    with pytest.raises(TierError) as e:
        tier.get("k")
    assert "secret" not in str(e.value)


def test_missing_redis_skips_or_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests' Redis check skips when no server answers, and fails instead under
    JITGUARD_REQUIRE_REDIS=1 (what .ci/run sets)."""
    from _helpers import redis_or_skip

    monkeypatch.setenv("JITGUARD_TEST_REDIS_URL", f"redis://127.0.0.1:{closed_port()}/0")
    monkeypatch.delenv("JITGUARD_REQUIRE_REDIS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no Redis at"):
        redis_or_skip()
    monkeypatch.setenv("JITGUARD_REQUIRE_REDIS", "1")
    with pytest.raises(pytest.fail.Exception, match="JITGUARD_REQUIRE_REDIS=1 but no Redis"):
        redis_or_skip()
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "export JITGUARD_REQUIRE_REDIS=1" in ci
