"""The signed value format: round trip, and every way a value can be bad."""

from __future__ import annotations

import struct

import pytest

from jitguard._src.store.codec import (
    MAGIC,
    RecordError,
    StoredRecord,
    decode_record,
    encode_record,
)
from jitguard._src.store.keys import STORE_FORMAT
from jitguard._src.store.signing import MAC_BYTES, Signer

SIGNER = Signer(b"s" * 32)


def _record(artifact: bytes = b"\x00artifact bytes\xff") -> StoredRecord:
    return StoredRecord(
        key="k" * 32, entry="e" * 16, name="mod:f", env={"python": "cpython-3.11.0"},
        identity={"code": "c"}, guards={"schema_version": 1, "guards": []},
        dynamic=[], artifact=artifact, created=1.5,
    )


def test_round_trip() -> None:
    """A record encodes and decodes to itself."""
    record = _record()
    value = encode_record(record, SIGNER)
    assert value.startswith(MAGIC + bytes([STORE_FORMAT]))
    assert decode_record(value, SIGNER) == record


def test_every_bit_flip_is_caught() -> None:
    """Flipping any one bit anywhere in a value makes decoding fail (never a wrong record)."""
    value = encode_record(_record(b"abc"), SIGNER)
    for i in range(len(value)):
        for bit in (0, 7):
            bad = bytearray(value)
            bad[i] ^= 1 << bit
            with pytest.raises(RecordError) as e:
                decode_record(bytes(bad), SIGNER)
            assert e.value.outcome in ("refused", "corrupt", "stale")


def test_every_truncation_is_caught() -> None:
    """A value cut short at any length is refused or corrupt."""
    value = encode_record(_record(b"abcdef"), SIGNER)
    for n in range(len(value)):
        with pytest.raises(RecordError) as e:
            decode_record(value[:n], SIGNER)
        assert e.value.outcome in ("refused", "corrupt")


def test_another_key_is_refused() -> None:
    """A value signed with another key is refused, and the message says so."""
    value = encode_record(_record(), Signer(b"o" * 32))
    with pytest.raises(RecordError, match=r"bad signature.*another key") as e:
        decode_record(value, SIGNER)
    assert e.value.outcome == "refused"


def test_forged_value_is_refused() -> None:
    """A well-formed value with a made-up MAC is refused."""
    good = encode_record(_record(), SIGNER)
    forged = good[: len(MAGIC) + 1] + b"\x00" * MAC_BYTES + good[len(MAGIC) + 1 + MAC_BYTES:]
    with pytest.raises(RecordError) as e:
        decode_record(forged, SIGNER)
    assert e.value.outcome == "refused"


def _resign(value: bytes, fmt: int) -> bytes:
    body = value[len(MAGIC) + 1 + MAC_BYTES:]
    head = MAGIC + bytes([fmt])
    return head + SIGNER.sign(head + body) + body


def test_a_newer_format_is_stale() -> None:
    """A properly signed value of another format is stale (version skew), not read."""
    value = _resign(encode_record(_record(), SIGNER), STORE_FORMAT + 1)
    with pytest.raises(RecordError, match=f"format {STORE_FORMAT + 1}") as e:
        decode_record(value, SIGNER)
    assert e.value.outcome == "stale"


def test_a_signed_but_malformed_header_is_corrupt() -> None:
    """A signed value whose header is not the record's JSON is corrupt, not a crash."""
    for header in (b"not json", b"[1, 2]", b'{"key": "k"}', b"\xff\xfe"):
        body = struct.pack(">I", len(header)) + header
        head = MAGIC + bytes([STORE_FORMAT])
        value = head + SIGNER.sign(head + body) + body
        with pytest.raises(RecordError) as e:
            decode_record(value, SIGNER)
        assert e.value.outcome == "corrupt"
    body = struct.pack(">I", 1000) + b"{}"
    head = MAGIC + bytes([STORE_FORMAT])
    with pytest.raises(RecordError, match="runs past the end"):
        decode_record(head + SIGNER.sign(head + body) + body, SIGNER)
