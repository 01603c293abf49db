"""What the server answers, as typed values (docs/protocol.md §5), and the client's errors.

A *decided* answer is an :class:`Answer` (or :class:`BatchAnswer`), never an exception: a
refusal is a normal, typed outcome the caller must look at. Exceptions are for what was not
decided: the input could not be built (:class:`BuildError`), the server refused the request as a
whole (:class:`RefusedError`), or no attempt got a decision (:class:`ExhaustedError`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Outcome(str, enum.Enum):
    """The public v1 outcomes."""

    ACCEPT_DELAYED = "accept-delayed"
    ACCEPT_REORDERED = "accept-reordered"
    IGNORE_DUPLICATE = "ignore-duplicate"
    REFUSE_REPLAY = "refuse-replay"
    REFUSE_INCOMPATIBLE = "refuse-incompatible"
    REFUSE_TAMPERED = "refuse-tampered"

    @property
    def acknowledged(self) -> bool:
        """Whether the server durably holds the envelope: the producer may forget it."""
        return self in (Outcome.ACCEPT_DELAYED, Outcome.ACCEPT_REORDERED, Outcome.IGNORE_DUPLICATE)

    @property
    def http_status(self) -> int:
        """The status of a single-envelope answer with this outcome."""
        if self.acknowledged:
            return 200
        return 409 if self is Outcome.REFUSE_REPLAY else 422


@dataclass(frozen=True)
class Original:
    """For ``ignore-duplicate``: the acceptance the answer repeats."""

    outcome: Outcome
    correlation_id: str


@dataclass(frozen=True)
class Answer:
    """The server's decision on one envelope."""

    outcome: Outcome
    reason: str
    correlation_id: str
    #: The stream's contiguous cursor after the decision (§5.3).
    acknowledged_sequence: int
    http_status: int
    #: Attempts it took (1 when the first one was answered).
    attempts: int
    original: Original | None = None

    @property
    def acknowledged(self) -> bool:
        return self.outcome.acknowledged


@dataclass(frozen=True)
class ItemAnswer:
    """One envelope's decision inside a batch."""

    index: int
    outcome: Outcome
    reason: str
    event_id: str | None = None
    producer_sequence: int | None = None
    original: Original | None = None

    @property
    def acknowledged(self) -> bool:
        return self.outcome.acknowledged


@dataclass(frozen=True)
class BatchAnswer:
    """The server's decisions on a batch, committed in one transaction."""

    correlation_id: str
    #: One cursor for the whole batch, after it committed.
    acknowledged_sequence: int
    items: list[ItemAnswer] = field(default_factory=list)
    attempts: int = 1


class WharfError(Exception):
    """Base of every error this package raises for a send."""


class BuildError(WharfError):
    """The envelope could not be built or signed (a bound of docs/protocol.md §1, a bad key or
    seed, a full state file). Nothing was sent; fix the input."""


class RefusedError(WharfError):
    """The server refused the request as a whole and decided nothing: 401 (credential), 413
    (too large; split a batch), 400, another 4xx, or a batch body refused as one (422).
    Retrying the same request does not help until the cause is fixed. The envelope stays
    pending in the state file (except for a batch body refused as one, which is never valid)."""

    def __init__(
        self,
        status: int,
        code: str,
        reason: str,
        correlation_id: str,
        acknowledged_sequence: int | None = None,
    ) -> None:
        super().__init__(f"HTTP {status}: {code}: {reason} (correlation id {correlation_id})")
        self.status = status
        self.code = code
        self.reason = reason
        self.correlation_id = correlation_id
        self.acknowledged_sequence = acknowledged_sequence


class ExhaustedError(WharfError):
    """Every attempt ended without a decision (transport failures, 429, 502, 503, 504). The
    envelope may or may not have been committed; it stays pending, and sending the same one
    again later is safe."""

    def __init__(self, attempts: int, last: str, status: int | None, retry_after_s: int | None) -> None:
        super().__init__(f"no decision after {attempts} attempts: {last}")
        self.attempts = attempts
        self.last = last
        #: The last HTTP status, when the last attempt got one.
        self.status = status
        #: The last ``Retry-After`` (seconds), when the last answer carried one.
        self.retry_after_s = retry_after_s


def parse_original(raw: Any) -> Original | None:
    if not isinstance(raw, dict):
        return None
    return Original(Outcome(raw["outcome"]), str(raw["correlation_id"]))
