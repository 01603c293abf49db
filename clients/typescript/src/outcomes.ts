/**
 * What the server answers, as typed values (docs/protocol.md §5), and the client's errors.
 *
 * A decided answer is an {@link Answer} (or {@link BatchAnswer}), never a thrown error: a
 * refusal is a normal, typed outcome the caller must look at. Errors are for what was not
 * decided: the input could not be built ({@link BuildError}), the server refused the request as
 * a whole ({@link RefusedError}), or no attempt got a decision ({@link ExhaustedError}).
 */

export const OUTCOMES = [
  "accept-delayed",
  "accept-reordered",
  "ignore-duplicate",
  "refuse-replay",
  "refuse-incompatible",
  "refuse-tampered",
] as const;

/** The public v1 outcomes. */
export type Outcome = (typeof OUTCOMES)[number];

/** Whether the server durably holds the envelope: the producer may forget it. */
export function isAcknowledged(outcome: Outcome): boolean {
  return outcome === "accept-delayed" || outcome === "accept-reordered" || outcome === "ignore-duplicate";
}

export function parseOutcome(text: unknown): Outcome {
  if (typeof text === "string" && (OUTCOMES as readonly string[]).includes(text)) return text as Outcome;
  throw new TypeError(`unknown outcome ${JSON.stringify(text)}`);
}

/** For `ignore-duplicate`: the acceptance the answer repeats. */
export interface Original {
  outcome: Outcome;
  correlationId: string;
}

/** The server's decision on one envelope. */
export interface Answer {
  outcome: Outcome;
  reason: string;
  correlationId: string;
  /** The stream's contiguous cursor after the decision (§5.3). */
  acknowledgedSequence: number;
  httpStatus: number;
  /** Attempts it took (1 when the first was answered). */
  attempts: number;
  acknowledged: boolean;
  original?: Original;
}

/** One envelope's decision inside a batch. */
export interface ItemAnswer {
  index: number;
  outcome: Outcome;
  reason: string;
  acknowledged: boolean;
  eventId?: string;
  producerSequence?: number;
  original?: Original;
}

/** The server's decisions on a batch, committed in one transaction. */
export interface BatchAnswer {
  correlationId: string;
  /** One cursor for the whole batch, after it committed. */
  acknowledgedSequence: number;
  items: ItemAnswer[];
  attempts: number;
}

/** Base of every error this package throws for a send. */
export class WharfError extends Error {
  override name = "WharfError";
}

/** The envelope could not be built or signed, or the state file cannot be used. Nothing was sent. */
export class BuildError extends WharfError {
  override name = "BuildError";
}

/**
 * The server refused the request as a whole and decided nothing: 401 (credential), 413 (too
 * large; split a batch), 400, another 4xx, or a batch body refused as one (422). Retrying the
 * same request does not help until the cause is fixed; the envelopes stay pending.
 */
export class RefusedError extends WharfError {
  override name = "RefusedError";
  constructor(
    readonly status: number,
    readonly code: string,
    readonly reason: string,
    readonly correlationId: string,
    readonly acknowledgedSequence?: number,
  ) {
    super(`HTTP ${status}: ${code}: ${reason} (correlation id ${correlationId})`);
  }
}

/**
 * Every attempt ended without a decision (transport failures, 429, 502, 503, 504). The
 * envelope may or may not have been committed; it stays pending, and sending the same one again
 * later is safe.
 */
export class ExhaustedError extends WharfError {
  override name = "ExhaustedError";
  constructor(
    readonly attempts: number,
    readonly last: string,
    /** The last HTTP status, when the last attempt got one. */
    readonly status?: number,
    /** The last `Retry-After` in seconds, when the last answer carried one. */
    readonly retryAfterS?: number,
  ) {
    super(`no decision after ${attempts} attempts: ${last}`);
  }
}

export function parseOriginal(raw: unknown): Original | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  return { outcome: parseOutcome(r.outcome), correlationId: String(r.correlation_id) };
}
