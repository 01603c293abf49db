"""The v1a webhook verifier (docs/protocol.md §8): rows of request → accepted or the refusal."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from wharf_client import WebhookVerificationError, WebhookVerifier, parse_public_key

NOW = 1_700_000_000
BODY = b'{"order":42,"note":"caf\xc3\xa9 <&>"}'


def key(seed: int) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes([seed]) * 32)


def whpk(k: Ed25519PrivateKey) -> str:
    raw = k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return "whpk_" + base64.b64encode(raw).decode()


def signature(k: Ed25519PrivateKey, msg_id: str, ts: int, body: bytes) -> str:
    content = f"{msg_id}.{ts}.".encode() + body
    return "v1a," + base64.b64encode(k.sign(content)).decode()


def headers(msg_id: str = "order-42-paid", ts: int = NOW, sig: str | None = None, body: bytes = BODY) -> dict:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": sig if sig is not None else signature(key(1), msg_id, ts, body),
    }


VERIFIER = WebhookVerifier(whpk(key(1)))

ROWS = [
    # (what, headers, body, refusal code or None)
    ("a valid webhook", headers(), BODY, None),
    ("header names in any case", {k.upper(): v for k, v in headers().items()}, BODY, None),
    ("at the edge of the tolerance, in the past", headers(ts=NOW - 300), BODY, None),
    ("at the edge of the tolerance, in the future", headers(ts=NOW + 300), BODY, None),
    ("one second past it", headers(ts=NOW - 301), BODY, "stale-timestamp"),
    ("one second ahead of it", headers(ts=NOW + 301), BODY, "stale-timestamp"),
    ("a tampered body", headers(), BODY.replace(b"42", b"43"), "bad-signature"),
    ("a body re-serialised", headers(), b'{"order": 42, "note": "caf\xc3\xa9 <&>"}', "bad-signature"),
    ("another id", {**headers(), "webhook-id": "order-43-paid"}, BODY, "bad-signature"),
    ("another timestamp", {**headers(), "webhook-timestamp": str(NOW + 1)}, BODY, "bad-signature"),
    ("signed by another key", headers(sig=signature(key(2), "order-42-paid", NOW, BODY)), BODY, "bad-signature"),
    (
        "rotation: another key's signature, then ours",
        headers(sig=signature(key(2), "order-42-paid", NOW, BODY) + " " + signature(key(1), "order-42-paid", NOW, BODY)),
        BODY,
        None,
    ),
    ("a v1 (symmetric) entry is ignored", headers(sig="v1," + base64.b64encode(b"x" * 32).decode()), BODY, "bad-signature"),
    (
        "entries of other versions beside ours",
        headers(sig="v1,AAAA v2a,BBBB " + signature(key(1), "order-42-paid", NOW, BODY)),
        BODY,
        None,
    ),
    ("a signature of 63 bytes", headers(sig="v1a," + base64.b64encode(b"x" * 63).decode()), BODY, "bad-signature"),
    ("not base64", headers(sig="v1a,!!!!"), BODY, "bad-signature"),
    ("no id", {k: v for k, v in headers().items() if k != "webhook-id"}, BODY, "missing-header"),
    ("no timestamp", {k: v for k, v in headers().items() if k != "webhook-timestamp"}, BODY, "missing-header"),
    ("no signature", {k: v for k, v in headers().items() if k != "webhook-signature"}, BODY, "missing-header"),
    ("a negative timestamp", {**headers(), "webhook-timestamp": "-1"}, BODY, "bad-timestamp"),
    ("a timestamp in milliseconds' worth of digits", {**headers(), "webhook-timestamp": "1" * 20}, BODY, "bad-timestamp"),
    ("a timestamp with a fraction", {**headers(), "webhook-timestamp": f"{NOW}.5"}, BODY, "bad-timestamp"),
]


@pytest.mark.parametrize("what,hdrs,body,refusal", ROWS, ids=[r[0] for r in ROWS])
def test_verify(what: str, hdrs: dict, body: bytes, refusal: str | None) -> None:
    if refusal is None:
        VERIFIER.verify(hdrs, body, now_s=NOW)
    else:
        with pytest.raises(WebhookVerificationError) as refused:
            VERIFIER.verify(hdrs, body, now_s=NOW)
        assert refused.value.code == refusal, what


def test_a_verifier_with_both_keys_of_a_rotation_accepts_either() -> None:
    both = WebhookVerifier([whpk(key(1)), whpk(key(2))])
    for k in (key(1), key(2)):
        both.verify(headers(sig=signature(k, "m", NOW, BODY), msg_id="m"), BODY, now_s=NOW)
    with pytest.raises(WebhookVerificationError):
        both.verify(headers(sig=signature(key(3), "m", NOW, BODY), msg_id="m"), BODY, now_s=NOW)


def test_the_tolerance_is_configurable_and_the_clock_defaults_to_now() -> None:
    strict = WebhookVerifier(whpk(key(1)), tolerance_s=0)
    strict.verify(headers(), BODY, now_s=NOW)
    with pytest.raises(WebhookVerificationError):
        strict.verify(headers(), BODY, now_s=NOW + 1)
    # Without now_s the real clock is used: a 2023 timestamp is stale today.
    with pytest.raises(WebhookVerificationError) as refused:
        VERIFIER.verify(headers(), BODY)
    assert refused.value.code == "stale-timestamp"


def test_header_lists_and_pairs_are_read() -> None:
    VERIFIER.verify(list(headers().items()), BODY, now_s=NOW)


@pytest.mark.parametrize(
    "text",
    ["", "whpk_", "whpk_" + base64.b64encode(b"x" * 31).decode(), "whpk_!!!", "whsk_" + base64.b64encode(b"x" * 32).decode()],
)
def test_malformed_public_keys_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_public_key(text)


def test_the_prefix_is_optional_and_matches_the_rust_form() -> None:
    # RFC 8032 TEST 1's public key, as wharf's public_key_whpk writes it.
    text = "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
    raw = parse_public_key(text).public_bytes(Encoding.Raw, PublicFormat.Raw)
    assert raw.hex() == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    assert parse_public_key(text[len("whpk_"):]).public_bytes(Encoding.Raw, PublicFormat.Raw) == raw
