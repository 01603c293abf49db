"""The published test vectors (crates/wharf-core/testdata/vectors.json), read as another
implementation would: only the file, checked byte for byte (docs/protocol.md §9)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from wharf_client import canonical, envelope as env

VECTORS = Path(
    os.environ.get("WHARF_VECTORS")
    or Path(__file__).resolve().parents[3] / "crates" / "wharf-core" / "testdata" / "vectors.json"
)
DOC = json.loads(VECTORS.read_text("utf-8"))
SEED = bytes.fromhex(DOC["key"]["seed_hex"])
PUBLIC = bytes.fromhex(DOC["key"]["public_key_hex"])
NAMES = [v["name"] for v in DOC["vectors"]]


def vector(name: str) -> dict:
    return next(v for v in DOC["vectors"] if v["name"] == name)


def test_the_file_holds_the_vectors_this_suite_expects() -> None:
    assert NAMES == ["plain-ascii", "html-and-unicode", "escapes-and-controls", "large-integers"]
    assert env.public_key_bytes(env.private_key(SEED)) == PUBLIC


@pytest.mark.parametrize("name", NAMES)
def test_signing_bytes_in_both_forms(name: str) -> None:
    v = vector(name)
    assert env.signing_bytes(v["envelope"]) == v["signing_bytes_rfc8785"].encode("utf-8")
    assert env.signing_bytes(v["envelope"], legacy_go=True) == v["signing_bytes_legacy_go"].encode("utf-8")


@pytest.mark.parametrize("name", NAMES)
def test_signing_the_vector_envelope_gives_its_signatures(name: str) -> None:
    v = vector(name)
    key = env.private_key(SEED)
    signed = env.sign(v["envelope"], key, DOC["key"]["key_id"])
    assert signed == v["envelope"]
    assert signed["integrity"]["signature"] == v["signature_rfc8785"]
    legacy = base64.b64encode(key.sign(v["signing_bytes_legacy_go"].encode("utf-8"))).decode()
    assert legacy == v["signature_legacy_go"]


@pytest.mark.parametrize("name", NAMES)
def test_both_signatures_verify_and_report_their_form(name: str) -> None:
    v = vector(name)
    assert env.verify(v["envelope"], PUBLIC) == "rfc8785"
    legacy = {**v["envelope"], "integrity": {**v["envelope"]["integrity"], "signature": v["signature_legacy_go"]}}
    differs = v["signing_bytes_rfc8785"] != v["signing_bytes_legacy_go"]
    assert env.verify(legacy, PUBLIC) == ("legacy-go" if differs else "rfc8785")


@pytest.mark.parametrize("name", NAMES)
def test_digests(name: str) -> None:
    v = vector(name)
    assert env.content_digest(v["envelope"]).hex() == v["content_digest_hex"]
    assert env.event_id_digest_hex(v["envelope"]["event_id"]) == v["event_id_sha256_hex"]


def test_the_legacy_form_differs_exactly_where_the_spec_says() -> None:
    v = vector("html-and-unicode")
    rfc, legacy = v["signing_bytes_rfc8785"], v["signing_bytes_legacy_go"]
    assert rfc != legacy
    for raw, escaped in [("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")]:
        assert raw in rfc and raw not in legacy
        assert escaped in legacy and escaped not in rfc
    # Characters outside the BMP are UTF-8 in both forms, never escapes.
    assert "\U0001f600" in rfc and "\U0001f600" in legacy


@pytest.mark.parametrize("name", NAMES)
def test_a_tampered_vector_does_not_verify(name: str) -> None:
    v = vector(name)
    tampered = json.loads(json.dumps(v["envelope"]))
    tampered["producer_sequence"] += 1
    with pytest.raises(env.EnvelopeError):
        env.verify(tampered, PUBLIC)
    other = env.public_key_bytes(env.private_key(bytes(32)))
    with pytest.raises(env.EnvelopeError):
        env.verify(v["envelope"], other)


def test_the_vectors_file_parses_as_closed_json() -> None:
    value = canonical.parse_closed(VECTORS.read_bytes())
    assert value == DOC


@pytest.mark.parametrize("name", NAMES)
def test_the_wire_form_is_the_canonical_text(name: str) -> None:
    v = vector(name)
    env.validate(v["envelope"])
    expected = v["signing_bytes_rfc8785"].replace('"signature":""', f'"signature":"{v["signature_rfc8785"]}"')
    assert env.wire_bytes(v["envelope"]).decode("utf-8") == expected
