/**
 * The `controlplane/v1` envelope: its bounds, event ids, signature and digests.
 *
 * Owns docs/protocol.md §1 and §3: what a well-formed envelope is (checked before signing, so
 * nothing is signed that the server would refuse for its shape), the signing bytes, Ed25519
 * signing and verification with Node's `crypto`, and the content digest. Knows nothing about
 * HTTP or state files. An envelope is a plain object, exactly as it goes on the wire.
 */

import {
  createHash,
  createPrivateKey,
  createPublicKey,
  randomBytes,
  sign as edSign,
  verify as edVerify,
  type KeyObject,
} from "node:crypto";

import { CanonicalError, canonicalize, type JsonValue } from "./canonical.js";

export const SCHEMA_VERSION = 1;
export const ALGORITHM = "Ed25519";
/** Largest envelope text the server reads (one request body). */
export const ENVELOPE_BYTES_MAX = 2 * 1024 * 1024;
/** Largest payload, measured as its RFC 8785 canonical JSON. */
export const PAYLOAD_BYTES_MAX = 1024 * 1024;
export const IDENTITY_BYTES_MAX = 128;
export const EVENT_TYPE_BYTES_MAX = 64;
export const IDEMPOTENCY_KEY_BYTES_MAX = 256;
export const PRODUCER_VERSION_BYTES_MAX = 64;
export const KEY_ID_BYTES_MAX = 128;
export const OCCURRED_AT_BYTES_MAX = 64;
export const SEQUENCE_MIN = 1;
/**
 * The server takes sequences up to 2^64 − 1; this client stops at 2^53 − 1 so that a sequence
 * is always an exact JavaScript number (nine quadrillion envelopes is not a practical limit).
 */
export const SEQUENCE_MAX = Number.MAX_SAFE_INTEGER;

export const FIELDS = [
  "schema_version",
  "event_type",
  "tenant_id",
  "project_id",
  "event_id",
  "producer_sequence",
  "occurred_at",
  "idempotency_key",
  "producer_version",
  "payload",
  "integrity",
] as const;
export const INTEGRITY_FIELDS = ["algorithm", "key_id", "signature"] as const;

export interface Integrity {
  algorithm: string;
  key_id: string;
  signature: string;
}

export interface Envelope {
  schema_version: number;
  event_type: string;
  tenant_id: string;
  project_id: string;
  event_id: string;
  producer_sequence: number;
  occurred_at: string;
  idempotency_key: string;
  producer_version: string;
  payload: { [key: string]: JsonValue };
  integrity: Integrity;
}

/** Which canonical form a signature verified over. */
export type SignatureForm = "rfc8785" | "legacy-go";

/**
 * An envelope breaks a bound of docs/protocol.md §1; `field` names the member. Nothing was
 * signed or sent; retrying the same input never helps.
 */
export class EnvelopeError extends Error {
  override name = "EnvelopeError";
  constructor(
    readonly field: string,
    readonly rule: string,
  ) {
    super(`${field}: ${rule}`);
  }
}

export const IDENTITY = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const EVENT_TYPE = /^[a-z][a-z0-9_]{0,63}$/;
const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;
const RFC3339 =
  /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(Z|[+-]([0-9]{2}):([0-9]{2}))$/;
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const SIGNATURE_B64 = /^[A-Za-z0-9+/]{86}==$/;
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** A ULID: 48 bits of Unix milliseconds and 80 random bits, 26 Crockford base32 characters. */
export function newEventId(nowMs: number = Date.now(), randomness: Uint8Array = randomBytes(10)): string {
  if (!Number.isSafeInteger(nowMs) || nowMs < 0 || nowMs >= 2 ** 48 || randomness.length !== 10) {
    throw new RangeError("a ULID takes 48 bits of milliseconds and 10 random bytes");
  }
  let n = (BigInt(nowMs) << 80n) | BigInt("0x" + Buffer.from(randomness).toString("hex"));
  let out = "";
  for (let i = 0; i < 26; i++) {
    out = CROCKFORD[Number(n & 31n)] + out;
    n >>= 5n;
  }
  return out;
}

/** The current UTC time with milliseconds, e.g. `2025-06-01T12:00:00.123Z`. */
export function nowRfc3339(): string {
  return new Date().toISOString();
}

function bytes(s: string): number {
  return Buffer.byteLength(s, "utf8");
}

function checkString(field: string, s: unknown, low: number, high: number): string {
  if (typeof s !== "string") throw new EnvelopeError(field, "must be a string");
  const n = bytes(s);
  if (n < low || n > high) throw new EnvelopeError(field, `is ${n} bytes; must be ${low}..${high}`);
  return s;
}

function checkPrintable(field: string, s: string): void {
  if (CONTROL.test(s)) throw new EnvelopeError(field, "must not hold control characters");
}

function isRfc3339(s: string): boolean {
  const m = RFC3339.exec(s);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number, number, number, number, number, number,
  ];
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 60) return false;
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (day > daysInMonth) return false;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return false;
  return true;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Checks every bound of docs/protocol.md §1 (`signed: false` accepts an empty signature, as
 * while signing). Throws {@link EnvelopeError} or {@link CanonicalError}.
 */
export function validate(envelope: unknown, options: { signed?: boolean } = {}): asserts envelope is Envelope {
  if (!isRecord(envelope)) throw new EnvelopeError("envelope", "must be an object");
  for (const name of Object.keys(envelope)) {
    if (!(FIELDS as readonly string[]).includes(name)) throw new EnvelopeError(name.slice(0, 64), "unknown member");
  }
  for (const name of FIELDS) {
    if (!(name in envelope)) throw new EnvelopeError(name, "missing");
  }
  const e = envelope;
  if (!Number.isSafeInteger(e.schema_version)) throw new EnvelopeError("schema_version", "must be an integer");
  for (const field of ["tenant_id", "project_id"] as const) {
    const s = checkString(field, e[field], 1, IDENTITY_BYTES_MAX);
    if (!IDENTITY.test(s)) throw new EnvelopeError(field, "must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$");
  }
  if (typeof e.event_id !== "string" || !ULID.test(e.event_id)) {
    throw new EnvelopeError("event_id", "must be a ULID: 26 uppercase Crockford base32, the first 0-7");
  }
  const eventType = checkString("event_type", e.event_type, 1, EVENT_TYPE_BYTES_MAX);
  if (!EVENT_TYPE.test(eventType)) throw new EnvelopeError("event_type", "must match ^[a-z][a-z0-9_]{0,63}$");
  const seq = e.producer_sequence;
  if (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < SEQUENCE_MIN || seq > SEQUENCE_MAX) {
    throw new EnvelopeError("producer_sequence", `must be an integer in ${SEQUENCE_MIN}..${SEQUENCE_MAX}`);
  }
  checkPrintable("idempotency_key", checkString("idempotency_key", e.idempotency_key, 1, IDEMPOTENCY_KEY_BYTES_MAX));
  checkPrintable(
    "producer_version",
    checkString("producer_version", e.producer_version, 1, PRODUCER_VERSION_BYTES_MAX),
  );
  const occurredAt = checkString("occurred_at", e.occurred_at, 1, OCCURRED_AT_BYTES_MAX);
  if (!isRfc3339(occurredAt)) {
    throw new EnvelopeError("occurred_at", "must be an RFC 3339 date-time (uppercase T, Z or ±hh:mm)");
  }
  const integrity = e.integrity;
  if (!isRecord(integrity)) throw new EnvelopeError("integrity", "must be an object");
  for (const name of Object.keys(integrity)) {
    if (!(INTEGRITY_FIELDS as readonly string[]).includes(name)) {
      throw new EnvelopeError(`integrity.${name.slice(0, 64)}`, "unknown member");
    }
  }
  for (const name of INTEGRITY_FIELDS) {
    if (!(name in integrity)) throw new EnvelopeError(`integrity.${name}`, "missing");
  }
  if (integrity.algorithm !== ALGORITHM) throw new EnvelopeError("integrity.algorithm", 'must be "Ed25519"');
  checkPrintable("integrity.key_id", checkString("integrity.key_id", integrity.key_id, 1, KEY_ID_BYTES_MAX));
  if (typeof integrity.signature !== "string") throw new EnvelopeError("integrity.signature", "must be a string");
  if ((options.signed ?? true) || integrity.signature !== "") signatureBytes(e as unknown as Envelope);
  if (!isRecord(e.payload)) throw new EnvelopeError("payload", "must be an object");
  const size = canonicalize(e.payload).length;
  if (size > PAYLOAD_BYTES_MAX) {
    throw new EnvelopeError("payload", `is ${size} canonical bytes; at most ${PAYLOAD_BYTES_MAX}`);
  }
}

/** The 64 signature bytes: standard padded base64, canonical (as the server decodes it). */
export function signatureBytes(envelope: Envelope): Buffer {
  const text = envelope.integrity.signature;
  const raw = SIGNATURE_B64.test(text) ? Buffer.from(text, "base64") : undefined;
  // Re-encoding refuses non-zero trailing bits: one signature, one accepted text.
  if (raw === undefined || raw.length !== 64 || raw.toString("base64") !== text) {
    throw new EnvelopeError("integrity.signature", "must be standard base64 of 64 bytes");
  }
  return raw;
}

/** The bytes a signature covers: the canonical JSON of the whole envelope, `integrity.signature` set to `""`. */
export function signingBytes(envelope: Envelope, options: { legacyGo?: boolean } = {}): Buffer {
  return canonicalize({ ...envelope, integrity: { ...envelope.integrity, signature: "" } }, options);
}

/** SHA-256 of the RFC 8785 canonical JSON of the envelope without `integrity`. */
export function contentDigest(envelope: Envelope): Buffer {
  const { integrity: _omitted, ...content } = envelope;
  return createHash("sha256").update(canonicalize(content)).digest();
}

/** SHA-256 hex of an event id (what the server's audit records). */
export function eventIdDigestHex(eventId: string): string {
  return createHash("sha256").update(eventId, "utf8").digest("hex");
}

/** An Ed25519 private key from its 32-byte seed, or the seed's standard base64 (as `wharf key generate` prints it). */
export function privateKey(seed: Uint8Array | string): KeyObject {
  let raw: Buffer;
  if (typeof seed === "string") {
    const text = seed.trim();
    raw = Buffer.from(text, "base64");
    if (!/^[A-Za-z0-9+/]{43}=$/.test(text) || raw.toString("base64") !== text) {
      throw new RangeError("the seed must be standard base64 of 32 bytes");
    }
  } else {
    raw = Buffer.from(seed);
  }
  if (raw.length !== 32) throw new RangeError("the seed must be 32 bytes");
  return createPrivateKey({ key: Buffer.concat([PKCS8_ED25519_PREFIX, raw]), format: "der", type: "pkcs8" });
}

/** A public key from its 32 raw bytes. */
export function publicKeyFromBytes(raw: Uint8Array): KeyObject {
  if (raw.length !== 32) throw new RangeError("an Ed25519 public key is 32 bytes");
  return createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, raw]), format: "der", type: "spki" });
}

/** The 32 raw bytes of a key's public half (`wharf key add --public-key` takes their base64). */
export function publicKeyBytes(key: KeyObject): Buffer {
  const der = createPublicKey(key).export({ format: "der", type: "spki" });
  return der.subarray(SPKI_ED25519_PREFIX.length);
}

function clone<T>(v: T): T {
  return structuredClone(v);
}

/**
 * A copy of `envelope` signed with `key` under `keyId` over the RFC 8785 bytes. Validated
 * first, so the result is an envelope the server can decode.
 */
export function sign(envelope: Envelope, key: KeyObject, keyId: string): Envelope {
  const signed = clone(envelope);
  signed.integrity = { algorithm: ALGORITHM, key_id: keyId, signature: "" };
  validate(signed, { signed: false });
  signed.integrity.signature = edSign(null, signingBytes(signed), key).toString("base64");
  return signed;
}

/**
 * Checks `envelope`'s signature under `publicKey` (32 raw bytes or a key object) as the server
 * does: the RFC 8785 bytes, then the legacy Go bytes when they differ. Returns the form that
 * matched; throws {@link EnvelopeError} (field `integrity.signature`) otherwise.
 */
export function verify(envelope: Envelope, publicKey: Uint8Array | KeyObject): SignatureForm {
  const signature = signatureBytes(envelope);
  const key = publicKey instanceof Uint8Array ? publicKeyFromBytes(publicKey) : publicKey;
  const rfc = signingBytes(envelope);
  if (edVerify(null, rfc, key, signature)) return "rfc8785";
  const legacy = signingBytes(envelope, { legacyGo: true });
  if (!legacy.equals(rfc) && edVerify(null, legacy, key, signature)) return "legacy-go";
  throw new EnvelopeError("integrity.signature", "does not verify under this key");
}

export interface BuildInput {
  eventType: string;
  tenantId: string;
  projectId: string;
  producerSequence: number;
  payload: { [key: string]: JsonValue };
  producerVersion: string;
  idempotencyKey?: string;
  eventId?: string;
  occurredAt?: string;
}

/**
 * An unsigned envelope (`integrity` left for {@link sign}): a fresh ULID event id, the current
 * time, and the event id as idempotency key unless others are given.
 */
export function build(input: BuildInput): Envelope {
  const eventId = input.eventId ?? newEventId();
  return {
    schema_version: SCHEMA_VERSION,
    event_type: input.eventType,
    tenant_id: input.tenantId,
    project_id: input.projectId,
    event_id: eventId,
    producer_sequence: input.producerSequence,
    occurred_at: input.occurredAt ?? nowRfc3339(),
    idempotency_key: input.idempotencyKey ?? eventId,
    producer_version: input.producerVersion,
    payload: input.payload,
    integrity: { algorithm: ALGORITHM, key_id: "", signature: "" },
  };
}

/** The envelope as sent: its RFC 8785 canonical JSON, signature included. */
export function wireBytes(envelope: Envelope): Buffer {
  return canonicalize(envelope);
}

export { CanonicalError };
