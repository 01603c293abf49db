"""The producer's retry rules and state file (docs/protocol.md §5–§7), over real HTTP to a
scripted server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripted import Reply, ScriptedServer, decided, error

from wharf_client import (
    BuildError,
    ExhaustedError,
    Outcome,
    Producer,
    ProducerConfig,
    RefusedError,
    verify,
)

SEED = bytes(range(32))
PAYLOAD = {"producer_id": "p", "acknowledged_sequence": 0, "acknowledged_event_id": None, "version": 1}


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def producer(url: str, state: Path | None = None, **overrides: object) -> tuple[Producer, Sleeps]:
    config = ProducerConfig(base_url=url, tenant="acme", project="p1", token="wharf_t", key_id="k1", seed=SEED)
    for k, v in overrides.items():
        setattr(config, k, v)
    sleeps = Sleeps()
    return Producer(config, state_path=state, sleep=sleeps), sleeps


def test_an_accepted_envelope_is_sent_once_signed_and_forgotten(tmp_path: Path) -> None:
    with ScriptedServer([decided("accept-delayed", "in-order", 1)]) as server:
        p, sleeps = producer(server.url, tmp_path / "state.json")
        e = p.build("sync_cursor", PAYLOAD)
        assert [x["producer_sequence"] for x in p.pending()] == [1]
        answer = p.send(e)
    assert (answer.outcome, answer.reason, answer.acknowledged_sequence, answer.attempts) == (Outcome.ACCEPT_DELAYED, "in-order", 1, 1)
    assert answer.acknowledged and answer.http_status == 200
    [request] = server.received
    assert request.path == "/v1/tenants/acme/projects/p1/envelopes"
    assert request.headers["Authorization"] == "Bearer wharf_t"
    assert verify(json.loads(request.body), p.public_key()) == "rfc8785"
    assert p.pending() == [] and p.acknowledged_sequence == 1 and p.next_sequence == 2
    assert sleeps == []


@pytest.mark.parametrize("status", [502, 503, 504])
def test_answers_without_a_decision_are_retried_with_the_same_bytes(status: int) -> None:
    replies = [error(status, "unavailable", "database"), Reply(0, drop=True), decided("ignore-duplicate", "duplicate", 1, original={"outcome": "accept-delayed", "correlation_id": "c-0"})]
    with ScriptedServer(replies) as server:
        p, sleeps = producer(server.url)
        answer = p.send(p.build("sync_cursor", PAYLOAD))
    assert answer.attempts == 3
    assert answer.outcome is Outcome.IGNORE_DUPLICATE
    assert answer.original is not None and answer.original.outcome is Outcome.ACCEPT_DELAYED
    assert len({r.body for r in server.received}) == 1, "a retry changed the bytes"
    # Exponential backoff from 0.2 s, ±20 %.
    assert len(sleeps) == 2 and 0.16 <= sleeps[0] <= 0.24 and 0.32 <= sleeps[1] <= 0.48


def test_429_waits_for_retry_after_capped() -> None:
    replies = [
        error(429, "rate-limited", "identity-limited", Retry_After="3"),
        error(429, "rate-limited", "identity-limited", Retry_After="3600"),
        decided("accept-delayed", "in-order", 1),
    ]
    with ScriptedServer(replies) as server:
        p, sleeps = producer(server.url, retry_after_max_s=60.0)
        answer = p.send(p.build("sync_cursor", PAYLOAD))
    assert answer.attempts == 3
    assert sleeps == [3.0, 60.0]


def test_exhaustion_reports_the_last_status_and_keeps_the_envelope(tmp_path: Path) -> None:
    replies = [error(429, "rate-limited", "peer-limited", Retry_After="2")] * 3
    with ScriptedServer(replies) as server:
        p, sleeps = producer(server.url, tmp_path / "s.json", attempts_max=3)
        e = p.build("sync_cursor", PAYLOAD)
        with pytest.raises(ExhaustedError) as failed:
            p.send(e)
    assert (failed.value.attempts, failed.value.status, failed.value.retry_after_s) == (3, 429, 2)
    assert len(server.received) == 3 and len(sleeps) == 2
    assert p.pending() == [e]


def test_an_unreachable_server_exhausts_attempts() -> None:
    with ScriptedServer([]) as server:
        url = server.url
    p, sleeps = producer(url, attempts_max=2)
    with pytest.raises(ExhaustedError) as failed:
        p.send(p.build("sync_cursor", PAYLOAD))
    assert failed.value.status is None and failed.value.last.startswith("transport")
    assert len(sleeps) == 1


@pytest.mark.parametrize(
    "reply,code",
    [
        (error(401, "unauthenticated", "unauthenticated", WWW_Authenticate="Bearer"), "unauthenticated"),
        (error(413, "payload-too-large", "body-too-large"), "payload-too-large"),
        (error(400, "bad-request", "body-unreadable"), "bad-request"),
        (Reply(307, b"", {"Location": "http://127.0.0.1:9/elsewhere"}), "unknown"),
    ],
)
def test_refusals_of_the_whole_request_are_not_retried_and_keep_the_envelope(reply: Reply, code: str) -> None:
    with ScriptedServer([reply, decided("accept-delayed", "in-order", 1)]) as server:
        p, sleeps = producer(server.url)
        e = p.build("sync_cursor", PAYLOAD)
        with pytest.raises(RefusedError) as refused:
            p.send(e)
    assert refused.value.status == reply.status and refused.value.code == code
    assert len(server.received) == 1 and sleeps == []
    assert p.pending() == [e]


@pytest.mark.parametrize(
    "reply,outcome",
    [
        (decided("refuse-replay", "replay", 5, status=409), Outcome.REFUSE_REPLAY),
        (decided("refuse-tampered", "identity-conflict", 5, status=422), Outcome.REFUSE_TAMPERED),
        (decided("refuse-incompatible", "event-type", 5, status=422), Outcome.REFUSE_INCOMPATIBLE),
    ],
)
def test_decided_refusals_are_answers_and_are_never_retried(reply: Reply, outcome: Outcome) -> None:
    with ScriptedServer([reply]) as server:
        p, sleeps = producer(server.url)
        answer = p.send(p.build("sync_cursor", PAYLOAD))
    assert answer.outcome is outcome and not answer.acknowledged
    assert answer.http_status == reply.status and answer.acknowledged_sequence == 5
    assert len(server.received) == 1 and sleeps == []
    assert p.pending() == []


def test_an_unreadable_decided_answer_keeps_the_envelope() -> None:
    with ScriptedServer([Reply(200, b"<html>proxy</html>")]) as server:
        p, _ = producer(server.url)
        e = p.build("sync_cursor", PAYLOAD)
        with pytest.raises(ExhaustedError):
            p.send(e)
    assert p.pending() == [e]


def test_a_batch_answers_per_envelope_and_one_cursor(tmp_path: Path) -> None:
    results = {
        "correlation_id": "c-b",
        "acknowledged_sequence": 3,
        "results": [
            {"index": 0, "outcome": "accept-delayed", "reason": "gap", "event_id": "x", "producer_sequence": 3},
            {"index": 1, "outcome": "accept-delayed", "reason": "in-order", "event_id": "y", "producer_sequence": 2},
            {"index": 2, "outcome": "refuse-tampered", "reason": "payload"},
        ],
    }
    with ScriptedServer([error(503, "unavailable", "database"), Reply(200, results)]) as server:
        p, _ = producer(server.url, tmp_path / "s.json")
        one, two, three = (p.build("sync_cursor", PAYLOAD) for _ in range(3))
        answer = p.send_batch([three, two, one])
    assert server.received[0].path.endswith("/envelopes:batch")
    assert server.received[0].body == server.received[1].body
    sent = json.loads(server.received[1].body)
    assert [e["producer_sequence"] for e in sent["envelopes"]] == [3, 2, 1]
    assert answer.acknowledged_sequence == 3 and answer.attempts == 2
    assert [(i.index, i.outcome, i.reason) for i in answer.items] == [
        (0, Outcome.ACCEPT_DELAYED, "gap"),
        (1, Outcome.ACCEPT_DELAYED, "in-order"),
        (2, Outcome.REFUSE_TAMPERED, "payload"),
    ]
    assert answer.items[2].event_id is None
    assert p.pending() == [] and p.acknowledged_sequence == 3


def test_a_batch_refused_as_a_whole_is_an_error() -> None:
    with ScriptedServer([decided("refuse-tampered", "payload", 0, status=422)]) as server:
        p, _ = producer(server.url)
        e = p.build("sync_cursor", PAYLOAD)
        with pytest.raises(RefusedError) as refused:
            p.send_batch([e])
    assert (refused.value.status, refused.value.code, refused.value.reason) == (422, "refuse-tampered", "payload")
    assert refused.value.acknowledged_sequence == 0
    assert p.pending() == [e]


def test_the_state_file_survives_a_restart_and_resends_the_same_bytes(tmp_path: Path) -> None:
    state = tmp_path / "sub" / "state.json"
    p, _ = producer("http://127.0.0.1:9", state)
    first = p.build("sync_cursor", PAYLOAD)
    second = p.build("sync_cursor", PAYLOAD, idempotency_key="second")
    assert state.exists()
    # A new process: same file, nothing in memory.
    with ScriptedServer([decided("accept-delayed", "in-order", 1), decided("accept-delayed", "in-order", 2)]) as server:
        again, _ = producer(server.url, state)
        assert again.next_sequence == 3
        assert again.pending() == [first, second]
        answers = again.resend_pending()
        third = again.build("sync_cursor", PAYLOAD)
    assert [a.acknowledged_sequence for a in answers] == [1, 2]
    assert [json.loads(r.body) for r in server.received] == [first, second]
    assert third["producer_sequence"] == 3
    reloaded, _ = producer("http://127.0.0.1:9", state)
    assert reloaded.acknowledged_sequence == 2 and reloaded.pending() == [third]
    assert not [f for f in state.parent.iterdir() if f.name.startswith(".wharf-state-")]


def test_a_state_file_of_another_stream_or_format_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    p, _ = producer("http://127.0.0.1:9", state)
    p.build("sync_cursor", PAYLOAD)
    config = ProducerConfig(base_url="http://x", tenant="acme", project="other", token="t", key_id="k1", seed=SEED)
    with pytest.raises(BuildError):
        Producer(config, state_path=state)
    state.write_text("{not json")
    with pytest.raises(BuildError):
        producer("http://127.0.0.1:9", state)


def test_a_bad_envelope_uses_no_sequence_and_pending_is_bounded(tmp_path: Path) -> None:
    p, _ = producer("http://127.0.0.1:9", tmp_path / "s.json", pending_max=2)
    with pytest.raises(BuildError):
        p.build("Not-A-Type", PAYLOAD)
    with pytest.raises(BuildError):
        p.build("sync_cursor", {"ratio": 0.5})
    assert p.next_sequence == 1
    p.build("sync_cursor", PAYLOAD)
    p.build("sync_cursor", PAYLOAD)
    with pytest.raises(BuildError):
        p.build("sync_cursor", PAYLOAD)
    assert p.next_sequence == 3


def test_setup_refuses_bad_identities_and_seeds_and_hides_secrets() -> None:
    for tenant in ["", "a/b", "acme/../x"]:
        with pytest.raises(BuildError):
            Producer(ProducerConfig(base_url="http://x", tenant=tenant, project="p", token="t", key_id="k", seed=SEED))
    for seed in [b"short", "not base64!"]:
        with pytest.raises(BuildError):
            Producer(ProducerConfig(base_url="http://x", tenant="a", project="p", token="t", key_id="k", seed=seed))
    text = repr(ProducerConfig(base_url="http://x", tenant="a", project="p", token="wharf_secret", key_id="k", seed="c2VjcmV0"))
    assert "wharf_secret" not in text and "c2VjcmV0" not in text
