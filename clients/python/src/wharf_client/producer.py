"""A producer: build, sign, persist, send and retry envelopes of one stream.

Owns the producer's side of docs/protocol.md §5–§7: the HTTP exchange (standard library only),
which answers are retried and how long to wait, and the state file that keeps the next sequence,
the acknowledged sequence and every envelope built but not yet decided. Knows no server rule: an
outcome is what the server said, read as it is.

Retries send the **same bytes**: an envelope is built and signed once, written to the state file
before its first send, and sent from there — after a lost answer, and after a crash and a
restart (:meth:`Producer.resend_pending`). The server recognises a copy it already committed as
``ignore-duplicate``, so nothing is ever stored twice and a sequence is never reused.

One :class:`Producer` per stream and state file; it is safe to share between threads.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import random
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from . import envelope as env
from .canonical import CanonicalError
from .outcomes import (
    Answer,
    BatchAnswer,
    BuildError,
    ExhaustedError,
    ItemAnswer,
    Outcome,
    RefusedError,
    parse_original,
)

__version__ = "0.1.0"

#: Largest answer body read; a batch answer of 1,000 results is about 200 KiB.
RESPONSE_BYTES_MAX = 16 * 1024 * 1024
#: Largest state file read: ``pending_max`` envelopes near their size limit would be far more,
#: but a state file that large means envelopes are built much faster than they are sent.
STATE_FILE_BYTES_MAX = 256 * 1024 * 1024
#: Statuses that say nothing was decided and a later attempt may be: resend the same bytes.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: Statuses that carry a decision.
DECIDED_STATUSES = frozenset({200, 409, 422})
STATE_FORMAT = 1


@dataclass
class ProducerConfig:
    """How a producer reaches its stream and signs.

    Defaults: 8 attempts per send, waits from 0.2 s doubling to 10 s with ±20 % jitter, a
    ``Retry-After`` obeyed up to 60 s, a 30 s socket timeout, at most 1,000 pending envelopes.
    """

    base_url: str
    tenant: str
    project: str
    #: The bearer credential from ``wharf credential issue``.
    token: str
    #: The key id the server holds the public key under.
    key_id: str
    #: The 32-byte Ed25519 seed, or its standard base64 (``wharf key generate`` prints it).
    seed: bytes | str
    producer_version: str = f"wharf-client-python/{__version__}"
    attempts_max: int = 8
    backoff_base_s: float = 0.2
    backoff_cap_s: float = 10.0
    jitter_fraction: float = 0.2
    retry_after_max_s: float = 60.0
    request_timeout_s: float = 30.0
    pending_max: int = 1000

    def __repr__(self) -> str:
        # The token and the seed never reach a log through repr().
        return (
            f"ProducerConfig(base_url={self.base_url!r}, tenant={self.tenant!r}, "
            f"project={self.project!r}, token=<redacted>, key_id={self.key_id!r}, seed=<redacted>)"
        )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would resend the credential to wherever it points.
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


class _State:
    """The producer's memory, in a JSON file written atomically (or only in memory)."""

    def __init__(self, path: Path | None, tenant: str, project: str, next_sequence: int) -> None:
        self.path = path
        self.tenant = tenant
        self.project = project
        self.next_sequence = max(1, next_sequence)
        self.acknowledged_sequence = 0
        #: sequence -> the envelope's wire text, exactly as it is (re)sent.
        self.pending: dict[int, str] = {}
        if path is not None and path.exists():
            self._load(path)

    def _load(self, path: Path) -> None:
        if path.stat().st_size > STATE_FILE_BYTES_MAX:
            raise BuildError(f"{path} is larger than {STATE_FILE_BYTES_MAX} bytes")
        try:
            data = json.loads(path.read_text("utf-8"))
            if data.get("format") != STATE_FORMAT:
                raise ValueError(f"unknown format {data.get('format')!r}")
            if (data["tenant"], data["project"]) != (self.tenant, self.project):
                raise ValueError(f"it belongs to {data['tenant']}/{data['project']}")
            self.next_sequence = int(data["next_sequence"])
            self.acknowledged_sequence = int(data["acknowledged_sequence"])
            self.pending = {int(k): str(v) for k, v in data["pending"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise BuildError(f"state file {path} cannot be used: {e}") from e

    def save(self) -> None:
        if self.path is None:
            return
        data = {
            "format": STATE_FORMAT,
            "tenant": self.tenant,
            "project": self.project,
            "next_sequence": self.next_sequence,
            "acknowledged_sequence": self.acknowledged_sequence,
            "pending": {str(k): v for k, v in sorted(self.pending.items())},
        }
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        # Write, flush to disk, then rename over the old file: a crash leaves the old state or
        # the new one, never half of one.
        fd, tmp = tempfile.mkstemp(prefix=".wharf-state-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class Producer:
    """One stream's producer. See the module docs."""

    def __init__(
        self,
        config: ProducerConfig,
        *,
        state_path: str | os.PathLike[str] | None = None,
        next_sequence: int = 1,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        for what, value in (("tenant", config.tenant), ("project", config.project)):
            if not env._IDENTITY.fullmatch(value):
                raise BuildError(f"{what} {value!r} is not a wharf identity")
        try:
            self._key = env.private_key(config.seed)
        except ValueError as e:
            raise BuildError(str(e)) from e
        self.config = config
        self._sleep = sleep
        self._lock = threading.Lock()
        self._state = _State(
            Path(state_path) if state_path is not None else None,
            config.tenant,
            config.project,
            next_sequence,
        )
        base = config.base_url.rstrip("/")
        self.single_url = f"{base}/v1/tenants/{config.tenant}/projects/{config.project}/envelopes"
        self.batch_url = f"{self.single_url}:batch"
        self._opener = urllib.request.build_opener(_NoRedirect())

    # -- state ---------------------------------------------------------------------------

    @property
    def next_sequence(self) -> int:
        """The sequence the next :meth:`build` uses."""
        return self._state.next_sequence

    @property
    def acknowledged_sequence(self) -> int:
        """The highest contiguous cursor the server reported for this stream."""
        return self._state.acknowledged_sequence

    def pending(self) -> list[dict[str, Any]]:
        """Envelopes built but not yet decided, in sequence order."""
        with self._lock:
            return [json.loads(text) for _, text in sorted(self._state.pending.items())]

    def public_key(self) -> bytes:
        """The 32-byte public key of this producer's seed."""
        return env.public_key_bytes(self._key)

    # -- building ------------------------------------------------------------------------

    def build(
        self,
        event_type: str,
        payload: dict[str, Any],
        *,
        idempotency_key: str | None = None,
        occurred_at: str | None = None,
        event_id: str | None = None,
    ) -> dict[str, Any]:
        """Builds and signs the stream's next envelope, and records it (and the next sequence)
        in the state file before returning it. A bad envelope uses no sequence.

        The sequence is spent once this returns: the server's cursor waits at it until it is
        sent, so send what you build (:meth:`resend_pending` does after a restart)."""
        with self._lock:
            state = self._state
            if len(state.pending) >= self.config.pending_max:
                raise BuildError(
                    f"{len(state.pending)} envelopes are pending (pending_max "
                    f"{self.config.pending_max}); send them before building more"
                )
            draft = env.build(
                event_type=event_type,
                tenant_id=self.config.tenant,
                project_id=self.config.project,
                producer_sequence=state.next_sequence,
                payload=payload,
                producer_version=self.config.producer_version,
                idempotency_key=idempotency_key,
                event_id=event_id,
                occurred_at=occurred_at,
            )
            try:
                signed = env.sign(draft, self._key, self.config.key_id)
                text = env.wire_bytes(signed).decode("utf-8")
            except (env.EnvelopeError, CanonicalError) as e:
                raise BuildError(str(e)) from e
            state.pending[state.next_sequence] = text
            state.next_sequence += 1
            try:
                state.save()
            except BaseException:
                # Not persisted: not built. The sequence is handed out again.
                state.next_sequence -= 1
                del state.pending[state.next_sequence]
                raise
            return signed

    # -- sending -------------------------------------------------------------------------

    def send(self, envelope: dict[str, Any]) -> Answer:
        """Sends one envelope, resending the same bytes until the server decides it.

        Returns the decision (accepted, duplicate, or refused: look at ``outcome``); raises
        :class:`RefusedError` or :class:`ExhaustedError` when nothing was decided."""
        body = self._wire(envelope)
        status, raw, attempts = self._exchange(self.single_url, body)
        decided = self._json(raw, status, attempts)
        try:
            outcome = Outcome(decided["outcome"])
            answer = Answer(
                outcome=outcome,
                reason=str(decided["reason"]),
                correlation_id=str(decided["correlation_id"]),
                acknowledged_sequence=int(decided["acknowledged_sequence"]),
                http_status=status,
                attempts=attempts,
                original=parse_original(decided.get("original")),
            )
        except (KeyError, ValueError, TypeError) as e:
            raise ExhaustedError(attempts, f"HTTP {status} with an unreadable answer: {e}", status, None) from e
        self._decided([(envelope, body)], answer.acknowledged_sequence)
        return answer

    def send_batch(self, envelopes: Iterable[dict[str, Any]]) -> BatchAnswer:
        """Sends envelopes of this stream in one request (one transaction on the server),
        resending the same bytes until it is decided. Each item has its own outcome."""
        items = [(e, self._wire(e)) for e in envelopes]
        body = b'{"envelopes":[' + b",".join(b for _, b in items) + b"]}"
        status, raw, attempts = self._exchange(self.batch_url, body)
        decided = self._json(raw, status, attempts)
        if status != 200:
            # The body was refused as a whole (not a bounded list of envelopes): nothing decided.
            raise RefusedError(
                status,
                str(decided.get("outcome", "unknown")),
                str(decided.get("reason", "")),
                str(decided.get("correlation_id", "")),
                decided.get("acknowledged_sequence"),
            )
        try:
            answer = BatchAnswer(
                correlation_id=str(decided["correlation_id"]),
                acknowledged_sequence=int(decided["acknowledged_sequence"]),
                items=[
                    ItemAnswer(
                        index=int(r["index"]),
                        outcome=Outcome(r["outcome"]),
                        reason=str(r["reason"]),
                        event_id=r.get("event_id"),
                        producer_sequence=r.get("producer_sequence"),
                        original=parse_original(r.get("original")),
                    )
                    for r in decided["results"]
                ],
                attempts=attempts,
            )
        except (KeyError, ValueError, TypeError) as e:
            raise ExhaustedError(attempts, f"HTTP {status} with an unreadable answer: {e}", status, None) from e
        if len(answer.items) != len(items):
            raise ExhaustedError(attempts, "the batch answer does not have one result per envelope", status, None)
        self._decided(items, answer.acknowledged_sequence)
        return answer

    def resend_pending(self) -> list[Answer]:
        """Sends every pending envelope again, in sequence order, one request each (after a
        restart, or after an :class:`ExhaustedError`). Stops at the first error it raises."""
        return [self.send(e) for e in self.pending()]

    # -- internals -----------------------------------------------------------------------

    def _wire(self, envelope: dict[str, Any]) -> bytes:
        try:
            env.validate(envelope)
            return env.wire_bytes(envelope)
        except (env.EnvelopeError, CanonicalError) as e:
            raise BuildError(str(e)) from e

    def _decided(self, sent: list[tuple[dict[str, Any], bytes]], acknowledged_sequence: int) -> None:
        """Forgets decided envelopes (a refusal is never helped by the same bytes) and records
        the cursor, in one state-file write."""
        with self._lock:
            state = self._state
            for envelope, body in sent:
                seq = envelope.get("producer_sequence")
                if isinstance(seq, int) and state.pending.get(seq) == body.decode("utf-8"):
                    del state.pending[seq]
            state.acknowledged_sequence = max(state.acknowledged_sequence, acknowledged_sequence)
            state.save()

    def _json(self, raw: bytes, status: int, attempts: int) -> dict[str, Any]:
        try:
            value = json.loads(raw)
        except ValueError as e:
            raise ExhaustedError(attempts, f"HTTP {status} with an unreadable answer", status, None) from e
        if not isinstance(value, dict):
            raise ExhaustedError(attempts, f"HTTP {status} with an unreadable answer", status, None)
        return value

    def _post(self, url: str, body: bytes) -> tuple[int, Any, bytes]:
        request = urllib.request.Request(
            url,
            data=body,
            method="POST",
            headers={
                "Authorization": f"Bearer {self.config.token}",
                "Content-Type": "application/json",
                "User-Agent": self.config.producer_version,
            },
        )
        try:
            with self._opener.open(request, timeout=self.config.request_timeout_s) as response:
                return response.status, response.headers, response.read(RESPONSE_BYTES_MAX)
        except urllib.error.HTTPError as e:
            with e:
                return e.code, e.headers, e.read(RESPONSE_BYTES_MAX)

    def _exchange(self, url: str, body: bytes) -> tuple[int, bytes, int]:
        """POSTs ``body`` until a decided status (200, 409, 422) or a refusal no retry can
        change. Returns the status, the answer body and the attempts made."""
        attempts_max = max(1, self.config.attempts_max)
        last, last_status, last_retry_after = "", None, None
        for attempt in range(1, attempts_max + 1):
            retry_after: float | None = None
            try:
                status, headers, raw = self._post(url, body)
            except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
                # Connect failures, timeouts, resets: nothing says whether the server decided,
                # and resending the same bytes is safe either way.
                last, last_status, last_retry_after = f"transport: {e}", None, None
            else:
                if status in DECIDED_STATUSES:
                    return status, raw, attempt
                if status not in RETRY_STATUSES:
                    try:
                        error = json.loads(raw)
                    except ValueError:
                        error = {}
                    if not isinstance(error, dict):
                        error = {}
                    raise RefusedError(
                        status,
                        str(error.get("code", "unknown")),
                        str(error.get("reason", "")),
                        str(error.get("correlation_id", "")),
                    )
                last, last_status = f"HTTP {status}", status
                last_retry_after = _retry_after_s(headers.get("Retry-After"))
                if last_retry_after is not None:
                    retry_after = min(float(last_retry_after), self.config.retry_after_max_s)
            if attempt < attempts_max:
                self._sleep(self._wait_s(attempt, retry_after))
        raise ExhaustedError(attempts_max, last, last_status, last_retry_after)

    def _wait_s(self, attempt: int, retry_after_s: float | None) -> float:
        c = self.config
        backoff = min(c.backoff_cap_s, c.backoff_base_s * (2 ** (attempt - 1)))
        backoff *= 1 + random.uniform(-c.jitter_fraction, c.jitter_fraction)
        return backoff if retry_after_s is None else max(retry_after_s, backoff)


def _retry_after_s(value: str | None) -> int | None:
    """wharf sends whole seconds; an HTTP date (from a proxy) is not worth parsing here, the
    backoff covers it."""
    if value is None or not _DIGITS.fullmatch(value.strip()):
        return None
    return int(value.strip())


_DIGITS = re.compile(r"[0-9]{1,10}")
