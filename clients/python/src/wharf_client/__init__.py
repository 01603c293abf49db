"""wharf's producer client and webhook verifier for Python (docs/protocol.md).

Producer::

    from wharf_client import Producer, ProducerConfig
    producer = Producer(ProducerConfig(base_url="http://127.0.0.1:8080", tenant="acme",
                                       project="p1", token=TOKEN, key_id="k1", seed=SEED),
                        state_path="wharf-state.json")
    producer.resend_pending()                       # what a crash left unsent
    envelope = producer.build("sync_cursor", {"producer_id": "laptop", "acknowledged_sequence": 0,
                                              "acknowledged_event_id": None, "version": 1})
    answer = producer.send(envelope)                # retries the same bytes
    print(answer.outcome.value, answer.reason, answer.acknowledged_sequence)

Webhook receiver::

    from wharf_client import WebhookVerifier
    WebhookVerifier("whpk_…").verify(headers, raw_body)   # raises WebhookVerificationError

Depends only on ``cryptography``; HTTP is the standard library's.
"""

from .canonical import CanonicalError, canonicalize, parse_closed
from .envelope import (
    EnvelopeError,
    content_digest,
    event_id_digest_hex,
    new_event_id,
    sign,
    signing_bytes,
    validate,
    verify,
    wire_bytes,
)
from .outcomes import (
    Answer,
    BatchAnswer,
    BuildError,
    ExhaustedError,
    ItemAnswer,
    Original,
    Outcome,
    RefusedError,
    WharfError,
)
from .producer import Producer, ProducerConfig, __version__
from .webhooks import WebhookVerificationError, WebhookVerifier, parse_public_key

__all__ = [
    "Answer", "BatchAnswer", "BuildError", "CanonicalError", "EnvelopeError", "ExhaustedError",
    "ItemAnswer", "Original", "Outcome", "Producer", "ProducerConfig", "RefusedError",
    "WebhookVerificationError", "WebhookVerifier", "WharfError", "__version__", "canonicalize",
    "content_digest", "event_id_digest_hex", "new_event_id", "parse_closed", "parse_public_key",
    "sign", "signing_bytes", "validate", "verify", "wire_bytes",
]
