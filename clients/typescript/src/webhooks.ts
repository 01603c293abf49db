/**
 * Verifying wharf's webhooks: Standard Webhooks, asymmetric `v1a` (Ed25519).
 *
 * Owns docs/protocol.md §8 for a receiver: the three headers, the signed content
 * `{webhook-id}.{webhook-timestamp}.{body}` over the raw body bytes, the timestamp tolerance,
 * several space-separated signatures, and the `whpk_…` public key form. Knows no web
 * framework: hand it the headers (a `Headers`, or a plain object as Node's `IncomingMessage`
 * has; names are matched case-insensitively) and the body exactly as received.
 *
 * ```ts
 * const verifier = new WebhookVerifier("whpk_…");   // from `wharf webhook-key show`
 * verifier.verify(request.headers, rawBody);        // throws WebhookVerificationError
 * ```
 *
 * There is no shared secret in `v1a`, so no secret to compare: the Ed25519 verification itself
 * is the check (OpenSSL compares the recomputed point in constant time). Every entry is
 * checked, matched or not, so the time spent does not say which one matched.
 */

import { verify as edVerify, type KeyObject } from "node:crypto";

import { publicKeyFromBytes } from "./envelope.js";

/** Default tolerance between the sender's timestamp and the receiver's clock. */
export const TOLERANCE_S_DEFAULT = 5 * 60;
/** Signature entries read from one header (wharf sends at most 4, one per key in a rotation). */
export const SIGNATURES_MAX = 16;
/** Public keys one verifier holds. */
export const KEYS_MAX = 16;
/** Longest `webhook-signature` header read. */
export const SIGNATURE_HEADER_BYTES_MAX = 8 * 1024;
/** Longest `webhook-id` accepted (wharf's are idempotency keys, at most 256 bytes). */
export const WEBHOOK_ID_BYTES_MAX = 1024;

export type WebhookRefusal = "missing-header" | "bad-timestamp" | "stale-timestamp" | "bad-signature";

/** A webhook did not verify. Answer such a request with 4xx and do not act on it. */
export class WebhookVerificationError extends Error {
  override name = "WebhookVerificationError";
  constructor(
    readonly code: WebhookRefusal,
    message: string,
  ) {
    super(message);
  }
}

export type HeaderSource =
  | Headers
  | Record<string, string | string[] | undefined>
  | Iterable<[string, string]>;

/** Reads a `whpk_<standard base64 of 32 bytes>` key (the prefix may be left out). */
export function parsePublicKey(text: string): KeyObject {
  let raw = text.trim();
  if (raw.startsWith("whpk_")) raw = raw.slice("whpk_".length);
  const bytes = Buffer.from(raw, "base64");
  if (!/^[A-Za-z0-9+/]{43}=$/.test(raw) || bytes.length !== 32 || bytes.toString("base64") !== raw) {
    throw new RangeError("a webhook public key is whpk_ and standard base64 of 32 bytes");
  }
  return publicKeyFromBytes(bytes);
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function" && typeof (headers as Headers).has === "function") {
    return (headers as Headers).get(name) ?? undefined;
  }
  const entries: Iterable<[string, unknown]> =
    Symbol.iterator in (headers as object)
      ? (headers as Iterable<[string, string]>)
      : Object.entries(headers as Record<string, unknown>);
  for (const [key, value] of entries) {
    if (key.toLowerCase() !== name) continue;
    if (Array.isArray(value)) return value.join(" ");
    return value === undefined ? undefined : String(value);
  }
  return undefined;
}

/** Checks webhooks signed by any of `publicKeys` (`whpk_…` strings). */
export class WebhookVerifier {
  readonly toleranceS: number;
  readonly #keys: KeyObject[];

  constructor(publicKeys: string | string[], options: { toleranceS?: number } = {}) {
    const texts = typeof publicKeys === "string" ? [publicKeys] : publicKeys;
    if (texts.length < 1 || texts.length > KEYS_MAX) throw new RangeError(`a verifier takes 1..${KEYS_MAX} public keys`);
    this.toleranceS = options.toleranceS ?? TOLERANCE_S_DEFAULT;
    if (!(this.toleranceS >= 0)) throw new RangeError("the tolerance must be at least 0 seconds");
    this.#keys = texts.map(parsePublicKey);
  }

  /**
   * Returns when the request is a valid, fresh webhook; throws {@link WebhookVerificationError}
   * otherwise. `body` is the raw request body (a string is taken as its UTF-8 bytes).
   */
  verify(headers: HeaderSource, body: Uint8Array | string, options: { nowS?: number } = {}): void {
    const id = header(headers, "webhook-id");
    const timestamp = header(headers, "webhook-timestamp");
    const signatures = header(headers, "webhook-signature");
    for (const [name, value] of [
      ["webhook-id", id],
      ["webhook-timestamp", timestamp],
      ["webhook-signature", signatures],
    ] as const) {
      if (!value) throw new WebhookVerificationError("missing-header", `${name} is missing`);
    }
    if (Buffer.byteLength(id!, "utf8") > WEBHOOK_ID_BYTES_MAX) {
      throw new WebhookVerificationError("missing-header", "webhook-id is too long");
    }
    if (!/^[0-9]{1,19}$/.test(timestamp!)) {
      throw new WebhookVerificationError("bad-timestamp", "webhook-timestamp is not a unix time in seconds");
    }
    const now = BigInt(options.nowS ?? Math.floor(Date.now() / 1000));
    const skew = now - BigInt(timestamp!);
    if ((skew < 0n ? -skew : skew) > BigInt(this.toleranceS)) {
      throw new WebhookVerificationError("stale-timestamp", `webhook-timestamp is more than ${this.toleranceS} s from now`);
    }
    const content = Buffer.concat([
      Buffer.from(`${id}.${timestamp}.`, "utf8"),
      typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body),
    ]);
    let verified = false;
    for (const entry of signatures!.slice(0, SIGNATURE_HEADER_BYTES_MAX).split(" ").slice(0, SIGNATURES_MAX)) {
      const comma = entry.indexOf(",");
      if (comma < 0 || entry.slice(0, comma) !== "v1a") continue;
      const b64 = entry.slice(comma + 1);
      if (!/^[A-Za-z0-9+/]{86}==$/.test(b64)) continue;
      const signature = Buffer.from(b64, "base64");
      if (signature.length !== 64) continue;
      for (const key of this.#keys) {
        if (edVerify(null, content, key, signature)) verified = true;
      }
    }
    if (!verified) throw new WebhookVerificationError("bad-signature", "no valid v1a signature");
  }
}
