/**
 * wharf's producer client and webhook verifier for Node 18+ (docs/protocol.md). Uses only
 * Node's built-in `crypto` (Ed25519) and `fetch`.
 *
 * ```ts
 * import { Producer, WebhookVerifier } from "wharf-client";
 * const producer = await Producer.open(
 *   { baseUrl: "http://127.0.0.1:8080", tenant: "acme", project: "p1", token, keyId: "k1", seed },
 *   { statePath: "wharf-state.json" },
 * );
 * await producer.resendPending();                 // what a crash left unsent
 * const envelope = await producer.build("sync_cursor", {
 *   producer_id: "laptop", acknowledged_sequence: 0, acknowledged_event_id: null, version: 1,
 * });
 * const answer = await producer.send(envelope);   // retries the same bytes
 * new WebhookVerifier("whpk_…").verify(request.headers, rawBody);
 * ```
 */

export { CanonicalError, canonicalize, canonicalText, DEPTH_MAX, type JsonValue } from "./canonical.js";
export {
  ALGORITHM,
  EnvelopeError,
  build,
  contentDigest,
  eventIdDigestHex,
  newEventId,
  privateKey,
  publicKeyBytes,
  publicKeyFromBytes,
  sign,
  signatureBytes,
  signingBytes,
  validate,
  verify,
  wireBytes,
  type Envelope,
  type Integrity,
  type SignatureForm,
} from "./envelope.js";
export {
  BuildError,
  ExhaustedError,
  OUTCOMES,
  RefusedError,
  WharfError,
  isAcknowledged,
  type Answer,
  type BatchAnswer,
  type ItemAnswer,
  type Original,
  type Outcome,
} from "./outcomes.js";
export { Producer, VERSION, type BuildOptions, type ProducerConfig, type ProducerOptions } from "./producer.js";
export {
  WebhookVerificationError,
  WebhookVerifier,
  parsePublicKey,
  type HeaderSource,
  type WebhookRefusal,
} from "./webhooks.js";
