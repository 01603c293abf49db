"""The Python client against a real ``wharf serve`` (clients/ci.sh starts it and sets the
``INTEROP_*`` variables). Every expectation here is a statement of docs/protocol.md.

Each test issues its own credential, so each has its own stream and its own identity-limiter
bucket (the server runs with a burst of ``INTEROP_IDENTITY_BURST`` envelopes).
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from wharf_client import (
    ExhaustedError,
    Outcome,
    Producer,
    ProducerConfig,
    RefusedError,
    WebhookVerificationError,
    WebhookVerifier,
)
from wharf_client import envelope as env


def need(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run the interop suite through clients/ci.sh")
    return value


URL = need("INTEROP_URL")
OPERATOR = need("INTEROP_OPERATOR_TOKEN")
WHARF = need("INTEROP_WHARF")
TENANT = need("INTEROP_TENANT")
PROJECT = need("INTEROP_PROJECT")
KEY_ID = need("INTEROP_KEY_ID")
SEED = need("INTEROP_SEED")
WEBHOOK_KEY = need("INTEROP_WEBHOOK_KEY")
BURST = int(need("INTEROP_IDENTITY_BURST"))
#: Every wait in this suite ends by this many seconds.
WAIT_S_MAX = 60.0

CURSOR = {"producer_id": "py", "acknowledged_sequence": 0, "acknowledged_event_id": None, "version": 1}


def issue(account: str) -> str:
    out = subprocess.run(
        [WHARF, "credential", "issue", "--tenant", TENANT, "--account", account],
        check=True, capture_output=True, text=True, timeout=WAIT_S_MAX,
    )
    return out.stdout.strip()


def producer(tmp_path: Path, name: str, **config: Any) -> Producer:
    account = f"py-{name}-{uuid.uuid4().hex[:8]}"
    cfg = ProducerConfig(base_url=URL, tenant=TENANT, project=PROJECT, token=issue(account), key_id=KEY_ID, seed=SEED)
    for k, v in config.items():
        setattr(cfg, k, v)
    return Producer(cfg, state_path=tmp_path / f"{name}.json")


def raw_post(path: str, body: bytes, token: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    request = urllib.request.Request(
        URL + path, data=body, method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=WAIT_S_MAX) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, json.loads(r.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, json.loads(e.read())


def resign(e: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``e`` changed and signed again with the stream's key: a valid signature over new content."""
    return env.sign({**e, **changes}, env.private_key(SEED), KEY_ID)


def test_accept_duplicate_gap_then_fill(tmp_path: Path) -> None:
    p = producer(tmp_path, "sequence")
    e1, e2, e3 = (p.build("sync_cursor", CURSOR) for _ in range(3))

    first = p.send(e1)
    assert (first.outcome, first.reason, first.acknowledged_sequence, first.http_status) == (Outcome.ACCEPT_DELAYED, "in-order", 1, 200)

    again = p.send(e1)
    assert (again.outcome, again.reason, again.acknowledged_sequence) == (Outcome.IGNORE_DUPLICATE, "duplicate", 1)
    assert again.original is not None
    assert (again.original.outcome, again.original.correlation_id) == (Outcome.ACCEPT_DELAYED, first.correlation_id)

    gap = p.send(e3)
    assert (gap.outcome, gap.reason, gap.acknowledged_sequence) == (Outcome.ACCEPT_DELAYED, "gap", 1)

    fill = p.send(e2)
    assert (fill.outcome, fill.reason, fill.acknowledged_sequence) == (Outcome.ACCEPT_DELAYED, "in-order", 3)
    assert p.pending() == [] and p.acknowledged_sequence == 3

    # A duplicate re-signed by the same key is still a duplicate: the content digest leaves
    # integrity out.
    copy = p.send(resign(e3))
    assert (copy.outcome, copy.acknowledged_sequence) == (Outcome.IGNORE_DUPLICATE, 3)


def test_a_batch_is_decided_in_order_with_one_cursor(tmp_path: Path) -> None:
    p = producer(tmp_path, "batch")
    e1, e2, e3, e4 = (p.build("sync_cursor", CURSOR) for _ in range(4))
    answer = p.send_batch([e2, e1, e1, e4])
    assert answer.acknowledged_sequence == 2
    assert [(i.index, i.outcome, i.reason, i.producer_sequence) for i in answer.items] == [
        (0, Outcome.ACCEPT_DELAYED, "gap", 2),
        (1, Outcome.ACCEPT_DELAYED, "in-order", 1),
        (2, Outcome.IGNORE_DUPLICATE, "duplicate", 1),
        (3, Outcome.ACCEPT_DELAYED, "gap", 4),
    ]
    # The copy inside the batch repeats the acceptance made by this very request.
    assert answer.items[2].original is not None and answer.items[2].original.correlation_id == answer.correlation_id
    assert [i.event_id for i in answer.items] == [e2["event_id"], e1["event_id"], e1["event_id"], e4["event_id"]]

    fill = p.send_batch([e3])
    assert fill.acknowledged_sequence == 4
    assert [(i.outcome, i.reason) for i in fill.items] == [(Outcome.ACCEPT_DELAYED, "in-order")]

    # Not a list of envelopes: refused as a whole, with the stream's cursor.
    status, _, body = raw_post(p.batch_url[len(URL):], b'{"envelopes": []}', p.config.token)
    assert (status, body["outcome"], body["reason"], body["acknowledged_sequence"]) == (422, "refuse-tampered", "payload", 4)
    with pytest.raises(RefusedError) as refused:
        p.send_batch([])
    assert (refused.value.status, refused.value.reason, refused.value.acknowledged_sequence) == (422, "payload", 4)


def test_tampered_and_other_refusals_store_nothing(tmp_path: Path) -> None:
    p = producer(tmp_path, "tampered")
    e1 = p.build("sync_cursor", CURSOR)

    # Changed after signing: the signature no longer covers it. Nothing exists on the stream yet.
    tampered = {**e1, "payload": {**CURSOR, "version": 2}}
    answer = p.send(tampered)
    assert (answer.outcome, answer.reason, answer.acknowledged_sequence, answer.http_status) == (Outcome.REFUSE_TAMPERED, "signature", 0, 422)

    # The refusal stored nothing: the real envelope with that sequence is accepted in order.
    accepted = p.send(e1)
    assert (accepted.outcome, accepted.reason, accepted.acknowledged_sequence) == (Outcome.ACCEPT_DELAYED, "in-order", 1)

    rows = [
        # (what, envelope, outcome, reason)
        ("the same sequence with other content", resign(e1, event_id=env.new_event_id(), idempotency_key="other"), Outcome.REFUSE_TAMPERED, "identity-conflict"),
        ("the same idempotency key with other content", resign(e1, event_id=env.new_event_id(), producer_sequence=2), Outcome.REFUSE_TAMPERED, "identity-conflict"),
        ("signed by another key", env.sign({**e1, "producer_sequence": 2, "event_id": env.new_event_id(), "idempotency_key": "k2"}, env.private_key(bytes(32)), KEY_ID), Outcome.REFUSE_TAMPERED, "signature"),
        ("an unknown key id", resign(e1, producer_sequence=2, event_id=env.new_event_id(), idempotency_key="k3") | {"integrity": {**e1["integrity"], "key_id": "no-such-key"}}, Outcome.REFUSE_TAMPERED, "signature"),
        ("another tenant in the envelope", resign(e1, tenant_id="someone-else", producer_sequence=2, event_id=env.new_event_id(), idempotency_key="k4"), Outcome.REFUSE_TAMPERED, "route"),
        ("a payload outside its schema", resign(e1, payload={**CURSOR, "extra": 1}, producer_sequence=2, event_id=env.new_event_id(), idempotency_key="k5"), Outcome.REFUSE_TAMPERED, "payload"),
        ("an unknown event type", resign(e1, event_type="no_such_type", producer_sequence=2, event_id=env.new_event_id(), idempotency_key="k6"), Outcome.REFUSE_INCOMPATIBLE, "event-type"),
        ("schema version 2", resign(e1, schema_version=2, producer_sequence=2, event_id=env.new_event_id(), idempotency_key="k7"), Outcome.REFUSE_INCOMPATIBLE, "schema"),
    ]
    for what, envelope, outcome, reason in rows:
        answer = p.send(envelope)
        assert (answer.outcome, answer.reason, answer.acknowledged_sequence, answer.http_status, answer.attempts) == (outcome, reason, 1, 422, 1), what

    # None of them took sequence 2.
    e2 = p.build("sync_cursor", CURSOR)
    assert (p.send(e2).outcome, p.acknowledged_sequence) == (Outcome.ACCEPT_DELAYED, 2)


def test_401_keeps_the_envelope_for_a_fixed_credential(tmp_path: Path) -> None:
    cfg = ProducerConfig(base_url=URL, tenant=TENANT, project=PROJECT, token="wharf_" + "A" * 43, key_id=KEY_ID, seed=SEED)
    state = tmp_path / "state.json"
    p = Producer(cfg, state_path=state)
    e = p.build("sync_cursor", CURSOR)
    with pytest.raises(RefusedError) as refused:
        p.send(e)
    assert (refused.value.status, refused.value.code, refused.value.reason) == (401, "unauthenticated", "unauthenticated")
    assert refused.value.acknowledged_sequence is None
    status, headers, body = raw_post(p.single_url[len(URL):], env.wire_bytes(e), "nonsense")
    assert status == 401 and headers.get("www-authenticate") == "Bearer" and "acknowledged_sequence" not in body
    assert p.pending() == [e]

    # With a real credential, the same state file sends the same envelope.
    cfg.token = issue(f"py-401-{uuid.uuid4().hex[:8]}")
    fixed = Producer(cfg, state_path=state)
    [answer] = fixed.resend_pending()
    assert (answer.outcome, answer.acknowledged_sequence) == (Outcome.ACCEPT_DELAYED, 1)


def test_429_carries_retry_after_and_a_retry_after_it_passes(tmp_path: Path) -> None:
    p = producer(tmp_path, "limited", attempts_max=1)
    drain = [p.build("sync_cursor", CURSOR) for _ in range(BURST)]
    assert p.send_batch(drain).acknowledged_sequence == BURST  # the whole burst at once
    e = p.build("sync_cursor", CURSOR)
    with pytest.raises(ExhaustedError) as limited:
        p.send(e)
    assert limited.value.status == 429 and limited.value.retry_after_s is not None and limited.value.retry_after_s >= 1
    status, headers, body = raw_post(p.single_url[len(URL):], env.wire_bytes(e), p.config.token)
    assert (status, body["code"], body["reason"]) == (429, "rate-limited", "identity-limited")
    assert int(headers["retry-after"]) >= 1 and "acknowledged_sequence" not in body
    assert p.pending() == [e]

    patient = Producer(
        ProducerConfig(base_url=URL, tenant=TENANT, project=PROJECT, token=p.config.token, key_id=KEY_ID, seed=SEED, attempts_max=5),
        state_path=tmp_path / "limited.json",
    )
    started = time.monotonic()
    [answer] = patient.resend_pending()
    assert (answer.outcome, answer.reason, answer.acknowledged_sequence) == (Outcome.ACCEPT_DELAYED, "in-order", BURST + 1)
    assert answer.attempts >= 2 and time.monotonic() - started >= 1.0, "it went through without waiting"


class Receiver:
    """A webhook receiver on loopback that verifies with the clients' verifier: 204 when the
    request verifies, 400 otherwise. Records every request."""

    def __init__(self, verifier: WebhookVerifier) -> None:
        self.requests: list[tuple[dict[str, str], bytes, int]] = []
        self.arrived = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    verifier.verify(self.headers.items(), body)
                    status = 204
                except WebhookVerificationError:
                    status = 400
                outer.requests.append(({k.lower(): v for k, v in self.headers.items()}, body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                outer.arrived.set()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks/wharf"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def operator(method: str, path: str, body: Any = None, token: str | None = OPERATOR) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(URL + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=WAIT_S_MAX) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def test_real_webhooks_verify_and_tampering_does_not() -> None:
    status, keys = operator("GET", "/v1/webhook-keys")
    assert status == 200
    [published] = keys["keys"]
    assert published == {"algorithm": "Ed25519", "public_key": WEBHOOK_KEY}, "the endpoint and `webhook-key show` disagree"
    assert operator("GET", "/v1/webhook-keys", token=None)[0] == 401

    receiver = Receiver(WebhookVerifier(published["public_key"]))
    try:
        key = f"py-hook-{uuid.uuid4().hex}"
        sent_body = {"order": 42, "note": "café <&> \u2028 😀", "lines": [1, 2, 3]}
        status, action = operator("POST", "/v1/actions", {
            "kind": "webhook", "tenant_id": TENANT, "project_id": PROJECT, "lane_key": "webhook:py",
            "idempotency_key": key, "payload": {"url": receiver.url, "body": sent_body},
        })
        assert status == 201, action
        assert receiver.arrived.wait(WAIT_S_MAX), "no webhook arrived"
        deadline = time.monotonic() + WAIT_S_MAX
        while (state := operator("GET", f"/v1/actions/{action['id']}")[1]["state"]) != "DONE":
            assert time.monotonic() < deadline, f"the action is still {state}"
            time.sleep(0.1)
    finally:
        receiver.close()

    headers, body, answered = receiver.requests[0]
    assert answered == 204, "the receiver's verifier refused a real webhook"
    assert headers["webhook-id"] == key and json.loads(body) == sent_body
    verifier = WebhookVerifier(WEBHOOK_KEY)
    ts = int(headers["webhook-timestamp"])
    verifier.verify(headers, body, now_s=ts)

    with pytest.raises(WebhookVerificationError) as refused:
        verifier.verify(headers, body.replace(b"42", b"43"), now_s=ts)
    assert refused.value.code == "bad-signature"
    with pytest.raises(WebhookVerificationError) as refused:
        verifier.verify(headers, body, now_s=ts + 301)
    assert refused.value.code == "stale-timestamp"
    verifier.verify(headers, body, now_s=ts + 300)
    other = "whpk_" + base64.b64encode(env.public_key_bytes(env.private_key(bytes(32)))).decode()
    with pytest.raises(WebhookVerificationError) as refused:
        WebhookVerifier(other).verify(headers, body, now_s=ts)
    assert refused.value.code == "bad-signature"
