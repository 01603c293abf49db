"""The ``controlplane/v1`` envelope: its bounds, its event ids, its signature and its digests.

Owns docs/protocol.md §1 and §3: what a well-formed envelope is (checked before signing, so
nothing is signed that the server would refuse for its shape), the signing bytes, Ed25519
signing and verification, and the content digest. Knows nothing about HTTP or state files.

An envelope is a plain ``dict`` of JSON values, exactly as it goes on the wire.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import os
import re
import time
import unicodedata
from datetime import datetime, timezone
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from .canonical import CanonicalError, canonicalize

SCHEMA_VERSION = 1
ALGORITHM = "Ed25519"
#: Largest envelope text the server reads (one request body).
ENVELOPE_BYTES_MAX = 2 * 1024 * 1024
#: Largest payload, measured as its RFC 8785 canonical JSON.
PAYLOAD_BYTES_MAX = 1024 * 1024
IDENTITY_BYTES_MAX = 128
EVENT_TYPE_BYTES_MAX = 64
IDEMPOTENCY_KEY_BYTES_MAX = 256
PRODUCER_VERSION_BYTES_MAX = 64
KEY_ID_BYTES_MAX = 128
OCCURRED_AT_BYTES_MAX = 64
SEQUENCE_MIN = 1
SEQUENCE_MAX = 2**64 - 1

FIELDS = (
    "schema_version", "event_type", "tenant_id", "project_id", "event_id", "producer_sequence",
    "occurred_at", "idempotency_key", "producer_version", "payload", "integrity",
)
INTEGRITY_FIELDS = ("algorithm", "key_id", "signature")

_IDENTITY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_EVENT_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_ULID = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
# RFC 3339 date-time: an uppercase T and Z (or a numeric offset), as docs/protocol.md §1 asks.
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(Z|[+-]([0-9]{2}):([0-9]{2}))"
)
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class EnvelopeError(ValueError):
    """An envelope breaks a bound of docs/protocol.md §1; ``field`` names the member. Nothing
    was signed or sent; retrying the same input never helps."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


def new_event_id(now_ms: int | None = None, randomness: bytes | None = None) -> str:
    """A ULID: 48 bits of Unix milliseconds and 80 random bits, 26 Crockford base32 characters."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    rand = os.urandom(10) if randomness is None else randomness
    if not 0 <= ms < 2**48 or len(rand) != 10:
        raise ValueError("a ULID takes 48 bits of milliseconds and 10 random bytes")
    n = (ms << 80) | int.from_bytes(rand, "big")
    return "".join(_CROCKFORD[(n >> (5 * i)) & 31] for i in range(25, -1, -1))


def now_rfc3339() -> str:
    """The current UTC time with milliseconds, e.g. ``2025-06-01T12:00:00.123Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _bytes_len(field: str, s: Any, low: int, high: int) -> None:
    if not isinstance(s, str):
        raise EnvelopeError(field, "must be a string")
    n = len(s.encode("utf-8", "surrogatepass"))
    if not low <= n <= high:
        raise EnvelopeError(field, f"is {n} bytes; must be {low}..{high}")


def _printable(field: str, s: str) -> None:
    if any(unicodedata.category(c) == "Cc" for c in s):
        raise EnvelopeError(field, "must not hold control characters")


def _is_rfc3339(s: str) -> bool:
    m = _RFC3339.fullmatch(s)
    if not m:
        return False
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    try:
        # A leap second (60) is valid RFC 3339; datetime cannot hold it, so check it as 59.
        datetime(year, month, day, hour, minute, min(second, 59))
    except ValueError:
        return False
    if hour > 23 or minute > 59 or second > 60:
        return False
    if m.group(9) is not None and (int(m.group(9)) > 23 or int(m.group(10)) > 59):
        return False
    return True


def validate(envelope: dict[str, Any], *, signed: bool = True) -> None:
    """Checks every bound of docs/protocol.md §1 (``signed=False`` accepts an empty signature,
    as while signing). Raises :class:`EnvelopeError` or :class:`CanonicalError`."""
    if not isinstance(envelope, dict):
        raise EnvelopeError("envelope", "must be an object")
    for name in envelope:
        if name not in FIELDS:
            raise EnvelopeError(str(name)[:64], "unknown member")
    for name in FIELDS:
        if name not in envelope:
            raise EnvelopeError(name, "missing")
    e = envelope
    sv = e["schema_version"]
    if not isinstance(sv, int) or isinstance(sv, bool):
        raise EnvelopeError("schema_version", "must be an integer")
    for field in ("tenant_id", "project_id"):
        _bytes_len(field, e[field], 1, IDENTITY_BYTES_MAX)
        if not _IDENTITY.fullmatch(e[field]):
            raise EnvelopeError(field, "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
    if not isinstance(e["event_id"], str) or not _ULID.fullmatch(e["event_id"]):
        raise EnvelopeError("event_id", "must be a ULID: 26 uppercase Crockford base32, the first 0-7")
    _bytes_len("event_type", e["event_type"], 1, EVENT_TYPE_BYTES_MAX)
    if not _EVENT_TYPE.fullmatch(e["event_type"]):
        raise EnvelopeError("event_type", "must match ^[a-z][a-z0-9_]{0,63}$")
    seq = e["producer_sequence"]
    if not isinstance(seq, int) or isinstance(seq, bool) or not SEQUENCE_MIN <= seq <= SEQUENCE_MAX:
        raise EnvelopeError("producer_sequence", f"must be an integer in {SEQUENCE_MIN}..{SEQUENCE_MAX}")
    _bytes_len("idempotency_key", e["idempotency_key"], 1, IDEMPOTENCY_KEY_BYTES_MAX)
    _printable("idempotency_key", e["idempotency_key"])
    _bytes_len("producer_version", e["producer_version"], 1, PRODUCER_VERSION_BYTES_MAX)
    _printable("producer_version", e["producer_version"])
    _bytes_len("occurred_at", e["occurred_at"], 1, OCCURRED_AT_BYTES_MAX)
    if not _is_rfc3339(e["occurred_at"]):
        raise EnvelopeError("occurred_at", "must be an RFC 3339 date-time (uppercase T, Z or ±hh:mm)")
    integrity = e["integrity"]
    if not isinstance(integrity, dict):
        raise EnvelopeError("integrity", "must be an object")
    for name in integrity:
        if name not in INTEGRITY_FIELDS:
            raise EnvelopeError(f"integrity.{str(name)[:64]}", "unknown member")
    for name in INTEGRITY_FIELDS:
        if name not in integrity:
            raise EnvelopeError(f"integrity.{name}", "missing")
    if integrity["algorithm"] != ALGORITHM:
        raise EnvelopeError("integrity.algorithm", 'must be "Ed25519"')
    _bytes_len("integrity.key_id", integrity["key_id"], 1, KEY_ID_BYTES_MAX)
    _printable("integrity.key_id", integrity["key_id"])
    if not isinstance(integrity["signature"], str):
        raise EnvelopeError("integrity.signature", "must be a string")
    if signed or integrity["signature"] != "":
        signature_bytes(envelope)
    if not isinstance(e["payload"], dict):
        raise EnvelopeError("payload", "must be an object")
    size = len(canonicalize(e["payload"]))
    if size > PAYLOAD_BYTES_MAX:
        raise EnvelopeError("payload", f"is {size} canonical bytes; at most {PAYLOAD_BYTES_MAX}")


def signature_bytes(envelope: dict[str, Any]) -> bytes:
    """The 64 signature bytes: standard padded base64, canonical (as the server decodes it)."""
    text = envelope["integrity"]["signature"]
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError, TypeError) as e:
        raise EnvelopeError("integrity.signature", "must be standard base64 of 64 bytes") from e
    # Refuse non-canonical text (non-zero trailing bits): one signature, one accepted text.
    if len(raw) != 64 or base64.b64encode(raw).decode("ascii") != text:
        raise EnvelopeError("integrity.signature", "must be standard base64 of 64 bytes")
    return raw


def signing_bytes(envelope: dict[str, Any], *, legacy_go: bool = False) -> bytes:
    """The bytes a signature covers: the canonical JSON of the whole envelope with
    ``integrity.signature`` set to ``""``."""
    unsigned = dict(envelope)
    unsigned["integrity"] = {**envelope["integrity"], "signature": ""}
    return canonicalize(unsigned, legacy_go=legacy_go)


def content_digest(envelope: dict[str, Any]) -> bytes:
    """SHA-256 of the RFC 8785 canonical JSON of the envelope without ``integrity``: what the
    server compares to tell a duplicate from a conflict."""
    content = {k: v for k, v in envelope.items() if k != "integrity"}
    return hashlib.sha256(canonicalize(content)).digest()


def event_id_digest_hex(event_id: str) -> str:
    """SHA-256 hex of an event id (what the server's audit records)."""
    return hashlib.sha256(event_id.encode("utf-8")).hexdigest()


def private_key(seed: bytes | str) -> Ed25519PrivateKey:
    """An Ed25519 key from its 32-byte seed, or the seed's standard base64 (as
    ``wharf key generate`` prints it)."""
    if isinstance(seed, str):
        try:
            seed = base64.b64decode(seed.strip(), validate=True)
        except (binascii.Error, ValueError) as e:
            raise ValueError("the seed must be standard base64 of 32 bytes") from e
    if len(seed) != 32:
        raise ValueError("the seed must be 32 bytes")
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_key_bytes(key: Ed25519PrivateKey) -> bytes:
    """The 32-byte public key (``wharf key add --public-key`` takes its standard base64)."""
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def sign(envelope: dict[str, Any], key: Ed25519PrivateKey, key_id: str) -> dict[str, Any]:
    """A copy of ``envelope`` signed with ``key`` under ``key_id`` over the RFC 8785 bytes.
    Validated first, so the result is an envelope the server can decode."""
    signed = copy.deepcopy(envelope)
    signed["integrity"] = {"algorithm": ALGORITHM, "key_id": key_id, "signature": ""}
    validate(signed, signed=False)
    signature = key.sign(signing_bytes(signed))
    signed["integrity"]["signature"] = base64.b64encode(signature).decode("ascii")
    return signed


def verify(envelope: dict[str, Any], public_key: bytes) -> str:
    """Checks ``envelope``'s signature under the 32-byte ``public_key`` as the server does:
    the RFC 8785 bytes, then the legacy Go bytes when they differ. Returns ``"rfc8785"`` or
    ``"legacy-go"``; raises :class:`EnvelopeError` (field ``integrity.signature``) otherwise."""
    signature = signature_bytes(envelope)
    key = Ed25519PublicKey.from_public_bytes(public_key)
    rfc = signing_bytes(envelope)
    forms = [("rfc8785", rfc)]
    legacy = signing_bytes(envelope, legacy_go=True)
    if legacy != rfc:
        forms.append(("legacy-go", legacy))
    for name, data in forms:
        try:
            key.verify(signature, data)
            return name
        except InvalidSignature:
            continue
    raise EnvelopeError("integrity.signature", "does not verify under this key")


def build(
    *,
    event_type: str,
    tenant_id: str,
    project_id: str,
    producer_sequence: int,
    payload: dict[str, Any],
    producer_version: str,
    idempotency_key: str | None = None,
    event_id: str | None = None,
    occurred_at: str | None = None,
) -> dict[str, Any]:
    """An unsigned envelope (``integrity`` left for :func:`sign`): a fresh ULID event id, the
    current time, and the event id as idempotency key unless others are given."""
    event_id = event_id or new_event_id()
    return {
        "schema_version": SCHEMA_VERSION,
        "event_type": event_type,
        "tenant_id": tenant_id,
        "project_id": project_id,
        "event_id": event_id,
        "producer_sequence": producer_sequence,
        "occurred_at": occurred_at or now_rfc3339(),
        "idempotency_key": event_id if idempotency_key is None else idempotency_key,
        "producer_version": producer_version,
        "payload": payload,
        "integrity": {"algorithm": ALGORITHM, "key_id": "", "signature": ""},
    }


def wire_bytes(envelope: dict[str, Any]) -> bytes:
    """The envelope as sent: its RFC 8785 canonical JSON, signature included."""
    return canonicalize(envelope)


__all__ = [
    "ALGORITHM", "CanonicalError", "EnvelopeError", "SCHEMA_VERSION", "build", "content_digest",
    "event_id_digest_hex", "new_event_id", "now_rfc3339", "private_key", "public_key_bytes",
    "sign", "signature_bytes", "signing_bytes", "validate", "verify", "wire_bytes",
]
