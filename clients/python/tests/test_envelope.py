"""Envelope bounds at their edges (docs/protocol.md §1), event ids, signing round trips."""

from __future__ import annotations

import base64
import copy

import pytest

from wharf_client import envelope as env

KEY = env.private_key(bytes(range(32)))
PUBLIC = env.public_key_bytes(KEY)


def draft(**changes: object) -> dict:
    e = env.build(
        event_type="sync_cursor",
        tenant_id="acme",
        project_id="p1",
        producer_sequence=1,
        payload={"producer_id": "p", "acknowledged_sequence": 0, "acknowledged_event_id": None, "version": 1},
        producer_version="tests/1",
        event_id="01JXA0000000000000000000A1",
        occurred_at="2025-06-01T12:00:00Z",
    )
    e.update(changes)
    return e


def signed(**changes: object) -> dict:
    return env.sign(draft(**changes), KEY, "k1")


OK = [
    ("as built", {}),
    ("identity of 128 bytes", {"tenant_id": "a" * 128}),
    ("identity punctuation", {"project_id": "p.1_x:y-z"}),
    ("event type of 64 bytes", {"event_type": "a" * 64}),
    ("sequence u64 max", {"producer_sequence": 2**64 - 1}),
    ("idempotency key of 256 bytes", {"idempotency_key": "é" * 128}),
    ("producer version of 64 bytes", {"producer_version": "v" * 64}),
    ("an offset and a fraction", {"occurred_at": "2025-06-01T11:59:59.123456789+02:00"}),
    ("a leap second", {"occurred_at": "2016-12-31T23:59:60Z"}),
    ("another schema version (refused by the server after the signature)", {"schema_version": 2}),
]

REFUSED = [
    ("identity of 129 bytes", {"tenant_id": "a" * 129}, "tenant_id"),
    ("identity starting with punctuation", {"tenant_id": "-acme"}, "tenant_id"),
    ("non-ASCII identity", {"project_id": "prøj"}, "project_id"),
    ("lowercase ULID", {"event_id": "01jxa0000000000000000000a1"}, "event_id"),
    ("ULID with I", {"event_id": "01JXA000000000000000000IA1"}, "event_id"),
    ("ULID starting with 8", {"event_id": "81JXA0000000000000000000A1"}, "event_id"),
    ("ULID of 25 characters", {"event_id": "01JXA0000000000000000000A"}, "event_id"),
    ("event type of 65 bytes", {"event_type": "a" * 65}, "event_type"),
    ("event type with uppercase", {"event_type": "Sync"}, "event_type"),
    ("sequence 0", {"producer_sequence": 0}, "producer_sequence"),
    ("sequence above u64", {"producer_sequence": 2**64}, "producer_sequence"),
    ("sequence as a string", {"producer_sequence": "1"}, "producer_sequence"),
    ("sequence as a boolean", {"producer_sequence": True}, "producer_sequence"),
    ("idempotency key of 257 bytes", {"idempotency_key": "é" * 128 + "x"}, "idempotency_key"),
    ("empty idempotency key", {"idempotency_key": ""}, "idempotency_key"),
    ("control character in the key", {"idempotency_key": "a\nb"}, "idempotency_key"),
    ("C1 control in the version", {"producer_version": "v\x85"}, "producer_version"),
    ("producer version of 65 bytes", {"producer_version": "v" * 65}, "producer_version"),
    ("occurred_at without a zone", {"occurred_at": "2025-06-01T12:00:00"}, "occurred_at"),
    ("occurred_at on 31 February", {"occurred_at": "2025-02-31T12:00:00Z"}, "occurred_at"),
    ("occurred_at with a space", {"occurred_at": "2025-06-01 12:00:00Z"}, "occurred_at"),
    ("occurred_at of 65 bytes", {"occurred_at": "2025-06-01T12:00:00." + "1" * 44 + "Z"}, "occurred_at"),
    ("payload not an object", {"payload": [1]}, "payload"),
    ("unknown member", {"extra": 1}, "extra"),
    ("schema version as text", {"schema_version": "1"}, "schema_version"),
]


@pytest.mark.parametrize("what,changes", OK, ids=[r[0] for r in OK])
def test_envelopes_within_every_bound_sign_and_verify(what: str, changes: dict) -> None:
    e = signed(**changes)
    env.validate(e)
    assert env.verify(e, PUBLIC) == "rfc8785", what


@pytest.mark.parametrize("what,changes,field", REFUSED, ids=[r[0] for r in REFUSED])
def test_envelopes_past_a_bound_are_never_signed(what: str, changes: dict, field: str) -> None:
    with pytest.raises(env.EnvelopeError) as refused:
        signed(**changes)
    assert refused.value.field == field, what


def test_the_payload_bound_is_its_canonical_size() -> None:
    # {"a":"…"} is 8 bytes around the string.
    fits = {"a": "x" * (env.PAYLOAD_BYTES_MAX - 8)}
    signed(payload=fits)
    with pytest.raises(env.EnvelopeError) as refused:
        signed(payload={"a": "x" * (env.PAYLOAD_BYTES_MAX - 7)})
    assert refused.value.field == "payload"
    with pytest.raises(env.CanonicalError):
        signed(payload={"a": 1.5})


def test_key_id_bounds() -> None:
    env.sign(draft(), KEY, "k" * 128)
    for bad in ["", "k" * 129, "k\t1"]:
        with pytest.raises(env.EnvelopeError) as refused:
            env.sign(draft(), KEY, bad)
        assert refused.value.field == "integrity.key_id"


def test_signature_encoding_must_be_canonical_base64_of_64_bytes() -> None:
    e = signed()
    good = e["integrity"]["signature"]
    raw = base64.b64decode(good)
    # The last character of 64 bytes' base64 holds 2 bits and 4 zero bits; setting one of
    # those decodes to the same bytes in lenient decoders, and must be refused.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    index = alphabet.index(good[-3])
    assert index % 16 == 0
    sloppy = good[:-3] + alphabet[index + 1] + "=="
    assert base64.b64decode(sloppy) == raw
    for bad in [good.rstrip("="), sloppy, base64.b64encode(raw[:63]).decode(), "!" * 88]:
        tampered = copy.deepcopy(e)
        tampered["integrity"]["signature"] = bad
        with pytest.raises(env.EnvelopeError) as refused:
            env.validate(tampered)
        assert refused.value.field == "integrity.signature", bad


def test_any_change_breaks_the_signature_but_not_a_re_signature_digest() -> None:
    e = signed()
    for field, value in [("producer_sequence", 2), ("occurred_at", "2025-06-01T12:00:01Z"), ("payload", {**e["payload"], "version": 2})]:
        tampered = {**e, field: value}
        with pytest.raises(env.EnvelopeError):
            env.verify(tampered, PUBLIC)
        assert env.content_digest(tampered) != env.content_digest(e)
    other_key = env.private_key(bytes([9]) * 32)
    re_signed = env.sign(e, other_key, "k2")
    assert re_signed["integrity"]["signature"] != e["integrity"]["signature"]
    assert env.content_digest(re_signed) == env.content_digest(e)


def test_event_ids_are_ulids_ordered_by_time() -> None:
    first = env.new_event_id(now_ms=1_700_000_000_000, randomness=bytes(10))
    later = env.new_event_id(now_ms=1_700_000_000_001, randomness=bytes(10))
    assert first == "01HF7YAT00" + "0" * 16
    assert first < later
    fresh = {env.new_event_id() for _ in range(100)}
    assert len(fresh) == 100
    for event_id in fresh:
        env.validate(signed(event_id=event_id))
    assert env.new_event_id(now_ms=2**48 - 1, randomness=b"\xff" * 10) == "7" + "Z" * 25


def test_build_uses_the_event_id_as_idempotency_key_and_the_current_time() -> None:
    e = env.build(
        event_type="sync_cursor", tenant_id="acme", project_id="p1", producer_sequence=3,
        payload={}, producer_version="v",
    )
    assert e["idempotency_key"] == e["event_id"]
    assert e["occurred_at"].endswith("Z") and len(e["occurred_at"]) == 24
    env.validate(env.sign(e, KEY, "k1"))
