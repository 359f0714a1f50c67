"""One stored value: a ``StoredRecord`` and its signed byte form.

May import: errors, store.* (the standard library otherwise).

# [Note: Stored value format]
# A value is ``b"JGST"``, one format byte, the 32-byte HMAC-SHA256 ([Note: Store signing])
# of everything else (magic, format byte and body), then the body: a 4-byte big-endian
# length, that many bytes of UTF-8 JSON (the record's header: key, entry id, function name,
# environment, identity, guard-set document, dynamic sources, artifact size and SHA-256),
# then the artifact's bytes. Decoding checks, in order: the magic and the minimum length
# (else "corrupt"), the signature (else "refused": tampered, truncated, bit-flipped or
# signed with another key: nothing past this point is read), the format byte (a newer one
# is "stale": version skew), the header's JSON, the artifact's length and hash. No pickle,
# no eval: the header is JSON, and the artifact's bytes go to the compiler's
# ``deserialize`` only after all of that passed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from typing import Any

from .keys import STORE_FORMAT
from .signing import MAC_BYTES, Signer

__all__ = ["MAGIC", "RecordError", "StoredRecord", "decode_record", "encode_record"]

MAGIC = b"JGST"
_PREFIX = len(MAGIC) + 1 + MAC_BYTES
_LEN = struct.Struct(">I")


class RecordError(Exception):
    """A value that cannot be used. ``outcome``: "refused" (bad signature), "corrupt" or
    "stale" (written by another version, or for another key or environment)."""

    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.message = message


@dataclasses.dataclass(frozen=True)
class StoredRecord:
    """What one stored entry holds (see [Note: Stored value format])."""

    key: str
    entry: str
    name: str
    env: dict[str, str]
    identity: dict[str, Any]
    guards: dict[str, Any]
    dynamic: list[Any]
    artifact: bytes
    created: float

    def header(self) -> dict[str, Any]:
        return {
            "key": self.key, "entry": self.entry, "name": self.name, "env": self.env,
            "identity": self.identity, "guards": self.guards, "dynamic": self.dynamic,
            "created": self.created, "artifact_size": len(self.artifact),
            "artifact_sha256": hashlib.sha256(self.artifact).hexdigest(),
        }


def encode_record(record: StoredRecord, signer: Signer) -> bytes:
    """The signed bytes of ``record``."""
    header = json.dumps(record.header(), sort_keys=True, allow_nan=False).encode("utf-8")
    signed = MAGIC + bytes([STORE_FORMAT]) + _LEN.pack(len(header)) + header + record.artifact
    return MAGIC + bytes([STORE_FORMAT]) + signer.sign(signed) + signed[len(MAGIC) + 1:]


def verify(value: bytes, signer: Signer) -> memoryview:
    """The body of ``value`` once its signature is checked (``RecordError`` otherwise): a
    view into ``value``, not a copy (a value is megabytes)."""
    if len(value) < _PREFIX + _LEN.size or value[: len(MAGIC)] != MAGIC:
        raise RecordError("corrupt", f"not a jitguard stored value ({len(value)} bytes)")
    fmt = value[len(MAGIC)]
    mac = value[len(MAGIC) + 1 : _PREFIX]
    view = memoryview(value)
    body = view[_PREFIX:]
    if not signer.verify_parts(mac, view[: len(MAGIC) + 1], body):
        raise RecordError(
            "refused",
            "bad signature: the value was changed, truncated, or signed with another key "
            "(JITGUARD_CACHE_KEY differs between the writer and this process?)",
        )
    if fmt != STORE_FORMAT:
        raise RecordError(
            "stale", f"stored value format {fmt}, this jitguard reads format {STORE_FORMAT}"
        )
    return body


def decode_record(value: bytes, signer: Signer) -> StoredRecord:
    """The record in ``value``: see [Note: Stored value format] for the checks."""
    body = verify(value, signer)
    (size,) = _LEN.unpack_from(body)
    if _LEN.size + size > len(body):
        raise RecordError("corrupt", "the header runs past the end of the value")
    try:
        h = json.loads(str(body[_LEN.size : _LEN.size + size], "utf-8"))
        artifact = bytes(body[_LEN.size + size :])
        if len(artifact) != h["artifact_size"]:
            raise RecordError("corrupt", "the artifact has the wrong length")
        if hashlib.sha256(artifact).hexdigest() != h["artifact_sha256"]:
            raise RecordError("corrupt", "the artifact's hash does not match")
        return StoredRecord(
            key=str(h["key"]), entry=str(h["entry"]), name=str(h["name"]),
            env=dict(h["env"]), identity=dict(h["identity"]), guards=dict(h["guards"]),
            dynamic=list(h["dynamic"]), artifact=artifact, created=float(h["created"]),
        )
    except RecordError:
        raise
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise RecordError("corrupt", f"unreadable header: {e}") from None
