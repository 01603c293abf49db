"""Verifying wharf's webhooks: Standard Webhooks, asymmetric ``v1a`` (Ed25519).

Owns docs/protocol.md §8 for a receiver: the three headers, the signed content
``{webhook-id}.{webhook-timestamp}.{body}`` over the raw body bytes, the timestamp tolerance,
several space-separated signatures, and the ``whpk_…`` public key form. Knows nothing about any
web framework: hand it the headers (any mapping; names are matched case-insensitively) and the
body bytes exactly as received.

    verifier = WebhookVerifier("whpk_…")          # from `wharf webhook-key show`
    verifier.verify(request.headers, request.body)  # raises WebhookVerificationError

There is no shared secret in ``v1a``, so there is no secret to compare: the Ed25519
verification itself is the check (OpenSSL compares the recomputed point in constant time).
Every entry is checked, matched or not, so the time spent does not say which one matched.
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from typing import Any, Iterable, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

#: Default tolerance between the sender's timestamp and the receiver's clock.
TOLERANCE_S_DEFAULT = 5 * 60
#: Signature entries read from one header (wharf sends at most 4, one per key in a rotation).
SIGNATURES_MAX = 16
#: Public keys one verifier holds (the current one and those of a rotation).
KEYS_MAX = 16
#: Longest ``webhook-signature`` header read.
SIGNATURE_HEADER_BYTES_MAX = 8 * 1024
#: Longest ``webhook-id`` accepted (wharf's are idempotency keys, at most 256 bytes).
WEBHOOK_ID_BYTES_MAX = 1024

_TIMESTAMP = re.compile(r"[0-9]{1,19}")


class WebhookVerificationError(Exception):
    """A webhook did not verify. ``code`` is one of ``missing-header``, ``bad-timestamp``,
    ``stale-timestamp``, ``bad-signature``. Answer such a request with 4xx and do not act on
    it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_public_key(text: str) -> Ed25519PublicKey:
    """Reads a ``whpk_<standard base64 of 32 bytes>`` key (the prefix may be left out)."""
    raw = text.strip()
    if raw.startswith("whpk_"):
        raw = raw[len("whpk_"):]
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError("a webhook public key is whpk_ and standard base64 of 32 bytes") from e
    if len(key) != 32:
        raise ValueError("a webhook public key is whpk_ and standard base64 of 32 bytes")
    return Ed25519PublicKey.from_public_bytes(key)


def _header(headers: Mapping[str, Any] | Iterable[tuple[str, Any]], name: str) -> str | None:
    items = headers.items() if isinstance(headers, Mapping) else headers
    for key, value in items:
        if key.lower() == name:
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            if isinstance(value, (list, tuple)):
                value = " ".join(str(v) for v in value)
            return str(value)
    return None


class WebhookVerifier:
    """Checks webhooks signed by any of ``public_keys`` (``whpk_…`` strings)."""

    def __init__(self, public_keys: str | Iterable[str], *, tolerance_s: int = TOLERANCE_S_DEFAULT) -> None:
        texts = [public_keys] if isinstance(public_keys, str) else list(public_keys)
        if not 1 <= len(texts) <= KEYS_MAX:
            raise ValueError(f"a verifier takes 1..{KEYS_MAX} public keys")
        if tolerance_s < 0:
            raise ValueError("the tolerance must be at least 0 seconds")
        self._keys = [parse_public_key(t) for t in texts]
        self.tolerance_s = tolerance_s

    def verify(
        self,
        headers: Mapping[str, Any] | Iterable[tuple[str, Any]],
        body: bytes,
        *,
        now_s: int | None = None,
    ) -> None:
        """Returns when the request is a valid, fresh webhook; raises
        :class:`WebhookVerificationError` otherwise. ``body`` is the raw request body."""
        webhook_id = _header(headers, "webhook-id")
        timestamp = _header(headers, "webhook-timestamp")
        signatures = _header(headers, "webhook-signature")
        for name, value in (
            ("webhook-id", webhook_id),
            ("webhook-timestamp", timestamp),
            ("webhook-signature", signatures),
        ):
            if not value:
                raise WebhookVerificationError("missing-header", f"{name} is missing")
        assert webhook_id is not None and timestamp is not None and signatures is not None
        if len(webhook_id.encode("utf-8", "surrogatepass")) > WEBHOOK_ID_BYTES_MAX:
            raise WebhookVerificationError("missing-header", "webhook-id is too long")
        if not _TIMESTAMP.fullmatch(timestamp):
            raise WebhookVerificationError("bad-timestamp", "webhook-timestamp is not a unix time in seconds")
        now = int(time.time()) if now_s is None else now_s
        if abs(now - int(timestamp)) > self.tolerance_s:
            raise WebhookVerificationError(
                "stale-timestamp", f"webhook-timestamp is more than {self.tolerance_s} s from now"
            )
        if not isinstance(body, (bytes, bytearray, memoryview)):
            raise TypeError("body must be the raw request bytes")
        content = webhook_id.encode("utf-8") + b"." + timestamp.encode("ascii") + b"." + bytes(body)
        verified = False
        for entry in signatures[:SIGNATURE_HEADER_BYTES_MAX].split(" ")[:SIGNATURES_MAX]:
            version, _, b64 = entry.partition(",")
            if version != "v1a":
                continue
            try:
                signature = base64.b64decode(b64, validate=True)
            except (binascii.Error, ValueError):
                continue
            if len(signature) != 64:
                continue
            for key in self._keys:
                try:
                    key.verify(signature, content)
                    verified = True
                except InvalidSignature:
                    pass
        if not verified:
            raise WebhookVerificationError("bad-signature", "no valid v1a signature")
