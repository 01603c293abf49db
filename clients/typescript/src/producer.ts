/**
 * A producer: build, sign, persist, send and retry envelopes of one stream.
 *
 * Owns the producer's side of docs/protocol.md §5–§7: the HTTP exchange (Node's built-in
 * `fetch`), which answers are retried and how long to wait, and the state file that keeps the
 * next sequence, the acknowledged sequence and every envelope built but not yet decided. Knows
 * no server rule: an outcome is what the server said, read as it is.
 *
 * Retries send the **same bytes**: an envelope is built and signed once, written to the state
 * file before it is returned, and resent from there after a lost answer or a restart
 * ({@link Producer.resendPending}). The server answers a copy it already committed with
 * `ignore-duplicate`, so nothing is stored twice and a sequence is never reused.
 *
 * One producer per stream and state file.
 */

import { mkdir, open, readFile, rename, stat, unlink } from "node:fs/promises";
import { dirname, join, basename } from "node:path";
import { randomBytes, type KeyObject } from "node:crypto";

import { CanonicalError, type JsonValue } from "./canonical.js";
import * as env from "./envelope.js";
import {
  BuildError,
  ExhaustedError,
  RefusedError,
  isAcknowledged,
  parseOriginal,
  parseOutcome,
  type Answer,
  type BatchAnswer,
  type ItemAnswer,
} from "./outcomes.js";

export const VERSION = "0.1.0";
/** Largest answer body read; a batch answer of 1,000 results is about 200 KiB. */
export const RESPONSE_BYTES_MAX = 16 * 1024 * 1024;
/** Largest state file read. */
export const STATE_FILE_BYTES_MAX = 256 * 1024 * 1024;
/** Statuses that say nothing was decided and a later attempt may be: resend the same bytes. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);
/** Statuses that carry a decision. */
export const DECIDED_STATUSES: ReadonlySet<number> = new Set([200, 409, 422]);
const STATE_FORMAT = 1;

/** How a producer reaches its stream and signs. */
export interface ProducerConfig {
  baseUrl: string;
  tenant: string;
  project: string;
  /** The bearer credential from `wharf credential issue`. */
  token: string;
  /** The key id the server holds the public key under. */
  keyId: string;
  /** The 32-byte Ed25519 seed, or its standard base64 (`wharf key generate` prints it). */
  seed: Uint8Array | string;
  /** Default `wharf-client-ts/<version>`. */
  producerVersion?: string;
  /** Attempts per send, the first included. Default 8. */
  attemptsMax?: number;
  /** First wait between attempts, doubling up to `backoffCapMs`. Default 200 ms, cap 10 s, ±20 %. */
  backoffBaseMs?: number;
  backoffCapMs?: number;
  jitterFraction?: number;
  /** Longest `Retry-After` obeyed. Default 60 s. */
  retryAfterMaxMs?: number;
  /** Whole-request timeout. Default 30 s. */
  requestTimeoutMs?: number;
  /** Most envelopes built but not yet decided. Default 1,000. */
  pendingMax?: number;
}

export interface ProducerOptions {
  /** Where to keep the state; without one it lives in memory only. */
  statePath?: string;
  /** The first sequence when there is no state file yet. Default 1. */
  nextSequence?: number;
  /** How to wait (tests pass a recorder). */
  sleep?: (ms: number) => Promise<void>;
}

interface State {
  nextSequence: number;
  acknowledgedSequence: number;
  /** sequence → the envelope's wire text, exactly as it is (re)sent. */
  pending: Map<number, string>;
}

interface Settings {
  producerVersion: string;
  attemptsMax: number;
  backoffBaseMs: number;
  backoffCapMs: number;
  jitterFraction: number;
  retryAfterMaxMs: number;
  requestTimeoutMs: number;
  pendingMax: number;
}

const sleepReal = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface BuildOptions {
  idempotencyKey?: string;
  occurredAt?: string;
  eventId?: string;
}

/** One stream's producer. See the module docs. */
export class Producer {
  readonly singleUrl: string;
  readonly batchUrl: string;
  readonly config: Readonly<ProducerConfig>;
  readonly #settings: Settings;
  readonly #key: KeyObject;
  readonly #statePath: string | undefined;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #state: State;
  #saving: Promise<void> = Promise.resolve();

  private constructor(config: ProducerConfig, key: KeyObject, state: State, options: ProducerOptions) {
    this.config = config;
    this.#key = key;
    this.#state = state;
    this.#statePath = options.statePath;
    this.#sleep = options.sleep ?? sleepReal;
    this.#settings = {
      producerVersion: config.producerVersion ?? `wharf-client-ts/${VERSION}`,
      attemptsMax: Math.max(1, config.attemptsMax ?? 8),
      backoffBaseMs: config.backoffBaseMs ?? 200,
      backoffCapMs: config.backoffCapMs ?? 10_000,
      jitterFraction: config.jitterFraction ?? 0.2,
      retryAfterMaxMs: config.retryAfterMaxMs ?? 60_000,
      requestTimeoutMs: config.requestTimeoutMs ?? 30_000,
      pendingMax: config.pendingMax ?? 1000,
    };
    const base = config.baseUrl.replace(/\/+$/, "");
    this.singleUrl = `${base}/v1/tenants/${config.tenant}/projects/${config.project}/envelopes`;
    this.batchUrl = `${this.singleUrl}:batch`;
  }

  /** A producer, its state read from `options.statePath` when that file exists. */
  static async open(config: ProducerConfig, options: ProducerOptions = {}): Promise<Producer> {
    for (const [what, value] of [
      ["tenant", config.tenant],
      ["project", config.project],
    ] as const) {
      if (!env.IDENTITY.test(value)) throw new BuildError(`${what} ${JSON.stringify(value)} is not a wharf identity`);
    }
    let key: KeyObject;
    try {
      key = env.privateKey(config.seed);
    } catch (e) {
      throw new BuildError((e as Error).message);
    }
    const state: State = {
      nextSequence: Math.max(1, options.nextSequence ?? 1),
      acknowledgedSequence: 0,
      pending: new Map(),
    };
    if (options.statePath !== undefined) await loadState(options.statePath, config, state);
    return new Producer(config, key, state, options);
  }

  /** The sequence the next {@link build} uses. */
  get nextSequence(): number {
    return this.#state.nextSequence;
  }

  /** The highest contiguous cursor the server reported for this stream. */
  get acknowledgedSequence(): number {
    return this.#state.acknowledgedSequence;
  }

  /** Envelopes built but not yet decided, in sequence order. */
  pending(): env.Envelope[] {
    return [...this.#state.pending.entries()].sort(([a], [b]) => a - b).map(([, text]) => JSON.parse(text));
  }

  /** The 32-byte public key of this producer's seed. */
  publicKey(): Buffer {
    return env.publicKeyBytes(this.#key);
  }

  /**
   * Builds and signs the stream's next envelope and records it (and the next sequence) in the
   * state file before returning it. A bad envelope uses no sequence. The sequence is spent once
   * this returns: send what you build ({@link resendPending} does after a restart).
   */
  async build(eventType: string, payload: { [key: string]: JsonValue }, options: BuildOptions = {}): Promise<env.Envelope> {
    const state = this.#state;
    if (state.pending.size >= this.#settings.pendingMax) {
      throw new BuildError(
        `${state.pending.size} envelopes are pending (pendingMax ${this.#settings.pendingMax}); send them before building more`,
      );
    }
    const sequence = state.nextSequence;
    let signed: env.Envelope;
    let text: string;
    try {
      const draft = env.build({
        eventType,
        tenantId: this.config.tenant,
        projectId: this.config.project,
        producerSequence: sequence,
        payload,
        producerVersion: this.#settings.producerVersion,
        ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {}),
        ...(options.eventId !== undefined ? { eventId: options.eventId } : {}),
        ...(options.occurredAt !== undefined ? { occurredAt: options.occurredAt } : {}),
      });
      signed = env.sign(draft, this.#key, this.config.keyId);
      text = env.wireBytes(signed).toString("utf8");
    } catch (e) {
      if (e instanceof env.EnvelopeError || e instanceof CanonicalError) throw new BuildError(e.message);
      throw e;
    }
    // Taken synchronously, so concurrent builds never share a sequence.
    state.pending.set(sequence, text);
    state.nextSequence = sequence + 1;
    try {
      await this.#save();
    } catch (e) {
      // Not persisted: not built. Hand the sequence out again unless another build took the next.
      state.pending.delete(sequence);
      if (state.nextSequence === sequence + 1) state.nextSequence = sequence;
      throw e;
    }
    return signed;
  }

  /**
   * Sends one envelope, resending the same bytes until the server decides it. Resolves to the
   * decision (accepted, duplicate, or refused: look at `outcome`); rejects with
   * {@link RefusedError} or {@link ExhaustedError} when nothing was decided.
   */
  async send(envelope: env.Envelope): Promise<Answer> {
    const body = this.#wire(envelope);
    const { status, raw, attempts } = await this.#exchange(this.singleUrl, body);
    const decided = parseJson(raw, status, attempts);
    let answer: Answer;
    try {
      const outcome = parseOutcome(decided.outcome);
      const original = parseOriginal(decided.original);
      answer = {
        outcome,
        reason: String(decided.reason),
        correlationId: String(decided.correlation_id),
        acknowledgedSequence: integer(decided.acknowledged_sequence),
        httpStatus: status,
        attempts,
        acknowledged: isAcknowledged(outcome),
        ...(original !== undefined ? { original } : {}),
      };
    } catch (e) {
      throw new ExhaustedError(attempts, `HTTP ${status} with an unreadable answer: ${(e as Error).message}`, status);
    }
    await this.#decided([[envelope, body]], answer.acknowledgedSequence);
    return answer;
  }

  /**
   * Sends envelopes of this stream in one request (one transaction on the server), resending
   * the same bytes until it is decided. Each item has its own outcome.
   */
  async sendBatch(envelopes: env.Envelope[]): Promise<BatchAnswer> {
    const items: [env.Envelope, Buffer][] = envelopes.map((e) => [e, this.#wire(e)]);
    const body = Buffer.concat([
      Buffer.from('{"envelopes":['),
      ...items.flatMap(([, b], i) => (i > 0 ? [Buffer.from(","), b] : [b])),
      Buffer.from("]}"),
    ]);
    const { status, raw, attempts } = await this.#exchange(this.batchUrl, body);
    const decided = parseJson(raw, status, attempts);
    if (status !== 200) {
      // The body was refused as a whole (not a bounded list of envelopes): nothing decided.
      const ack = decided.acknowledged_sequence;
      throw new RefusedError(
        status,
        String(decided.outcome ?? "unknown"),
        String(decided.reason ?? ""),
        String(decided.correlation_id ?? ""),
        typeof ack === "number" ? ack : undefined,
      );
    }
    let answer: BatchAnswer;
    try {
      const results = decided.results;
      if (!Array.isArray(results)) throw new TypeError("no results");
      answer = {
        correlationId: String(decided.correlation_id),
        acknowledgedSequence: integer(decided.acknowledged_sequence),
        attempts,
        items: results.map((r: Record<string, unknown>): ItemAnswer => {
          const outcome = parseOutcome(r.outcome);
          const original = parseOriginal(r.original);
          return {
            index: integer(r.index),
            outcome,
            reason: String(r.reason),
            acknowledged: isAcknowledged(outcome),
            ...(typeof r.event_id === "string" ? { eventId: r.event_id } : {}),
            ...(typeof r.producer_sequence === "number" ? { producerSequence: r.producer_sequence } : {}),
            ...(original !== undefined ? { original } : {}),
          };
        }),
      };
    } catch (e) {
      throw new ExhaustedError(attempts, `HTTP ${status} with an unreadable answer: ${(e as Error).message}`, status);
    }
    if (answer.items.length !== items.length) {
      throw new ExhaustedError(attempts, "the batch answer does not have one result per envelope", status);
    }
    await this.#decided(items, answer.acknowledgedSequence);
    return answer;
  }

  /**
   * Sends every pending envelope again, in sequence order, one request each (after a restart,
   * or after an {@link ExhaustedError}). Stops at the first error.
   */
  async resendPending(): Promise<Answer[]> {
    const answers: Answer[] = [];
    for (const envelope of this.pending()) answers.push(await this.send(envelope));
    return answers;
  }

  #wire(envelope: env.Envelope): Buffer {
    try {
      env.validate(envelope);
      return env.wireBytes(envelope);
    } catch (e) {
      if (e instanceof env.EnvelopeError || e instanceof CanonicalError) throw new BuildError(e.message);
      throw e;
    }
  }

  /** Forgets decided envelopes (a refusal is never helped by the same bytes) and records the cursor. */
  async #decided(sent: [env.Envelope, Buffer][], acknowledgedSequence: number): Promise<void> {
    const state = this.#state;
    for (const [envelope, body] of sent) {
      const seq = envelope.producer_sequence;
      if (state.pending.get(seq) === body.toString("utf8")) state.pending.delete(seq);
    }
    state.acknowledgedSequence = Math.max(state.acknowledgedSequence, acknowledgedSequence);
    await this.#save();
  }

  /** Writes the state as it stands now, after every earlier write (so a later state always wins). */
  #save(): Promise<void> {
    const path = this.#statePath;
    if (path === undefined) return Promise.resolve();
    const snapshot = JSON.stringify({
      format: STATE_FORMAT,
      tenant: this.config.tenant,
      project: this.config.project,
      next_sequence: this.#state.nextSequence,
      acknowledged_sequence: this.#state.acknowledgedSequence,
      pending: Object.fromEntries([...this.#state.pending.entries()].sort(([a], [b]) => a - b)),
    });
    const write = this.#saving.then(() => writeAtomically(path, snapshot));
    this.#saving = write.catch(() => undefined);
    return write;
  }

  async #post(url: string, body: Buffer): Promise<{ status: number; headers: Headers; raw: Buffer }> {
    const response = await fetch(url, {
      method: "POST",
      body,
      headers: {
        authorization: `Bearer ${this.config.token}`,
        "content-type": "application/json",
        "user-agent": this.#settings.producerVersion,
      },
      // A redirect would resend the credential to wherever it points.
      redirect: "manual",
      signal: AbortSignal.timeout(this.#settings.requestTimeoutMs),
    });
    const raw = await readBounded(response);
    return { status: response.status, headers: response.headers, raw };
  }

  /** POSTs until a decided status (200, 409, 422) or a refusal no retry can change. */
  async #exchange(url: string, body: Buffer): Promise<{ status: number; raw: Buffer; attempts: number }> {
    const attemptsMax = this.#settings.attemptsMax;
    let last = "";
    let lastStatus: number | undefined;
    let lastRetryAfter: number | undefined;
    for (let attempt = 1; attempt <= attemptsMax; attempt++) {
      let retryAfterMs: number | undefined;
      let answered: { status: number; headers: Headers; raw: Buffer } | undefined;
      try {
        answered = await this.#post(url, body);
      } catch (e) {
        // Connect failures, timeouts, resets: nothing says whether the server decided, and
        // resending the same bytes is safe either way.
        const cause = (e as { cause?: { code?: string } }).cause?.code;
        last = `transport: ${(e as Error).message}${cause ? ` (${cause})` : ""}`;
        lastStatus = undefined;
        lastRetryAfter = undefined;
      }
      if (answered !== undefined) {
        const { status, headers, raw } = answered;
        if (DECIDED_STATUSES.has(status)) return { status, raw, attempts: attempt };
        if (!RETRY_STATUSES.has(status)) {
          let error: Record<string, unknown> = {};
          try {
            const parsed: unknown = JSON.parse(raw.toString("utf8"));
            if (typeof parsed === "object" && parsed !== null) error = parsed as Record<string, unknown>;
          } catch {
            // Not JSON (a proxy's page): the status says enough.
          }
          throw new RefusedError(
            status,
            String(error.code ?? "unknown"),
            String(error.reason ?? ""),
            String(error.correlation_id ?? ""),
          );
        }
        last = `HTTP ${status}`;
        lastStatus = status;
        lastRetryAfter = retryAfterS(headers.get("retry-after"));
        if (lastRetryAfter !== undefined) retryAfterMs = Math.min(lastRetryAfter * 1000, this.#settings.retryAfterMaxMs);
      }
      if (attempt < attemptsMax) await this.#sleep(this.#waitMs(attempt, retryAfterMs));
    }
    throw new ExhaustedError(attemptsMax, last, lastStatus, lastRetryAfter);
  }

  #waitMs(attempt: number, retryAfterMs: number | undefined): number {
    const s = this.#settings;
    const backoff = Math.min(s.backoffCapMs, s.backoffBaseMs * 2 ** (attempt - 1));
    const jittered = backoff * (1 + (Math.random() * 2 - 1) * s.jitterFraction);
    return retryAfterMs === undefined ? jittered : Math.max(retryAfterMs, jittered);
  }
}

/** wharf sends whole seconds; an HTTP date (from a proxy) is left to the backoff. */
function retryAfterS(value: string | null): number | undefined {
  if (value === null || !/^[0-9]{1,10}$/.test(value.trim())) return undefined;
  return Number(value.trim());
}

function integer(v: unknown): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v)) throw new TypeError(`${JSON.stringify(v)} is not an integer`);
  return v;
}

function parseJson(raw: Buffer, status: number, attempts: number): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(raw.toString("utf8"));
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new ExhaustedError(attempts, `HTTP ${status} with an unreadable answer`, status);
}

async function readBounded(response: Response): Promise<Buffer> {
  if (response.body === null) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > RESPONSE_BYTES_MAX) throw new Error(`answer larger than ${RESPONSE_BYTES_MAX} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}

async function loadState(path: string, config: ProducerConfig, state: State): Promise<void> {
  let text: string;
  try {
    const info = await stat(path);
    if (info.size > STATE_FILE_BYTES_MAX) throw new BuildError(`${path} is larger than ${STATE_FILE_BYTES_MAX} bytes`);
    text = await readFile(path, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    throw e;
  }
  try {
    const data = JSON.parse(text) as Record<string, unknown>;
    if (data.format !== STATE_FORMAT) throw new Error(`unknown format ${JSON.stringify(data.format)}`);
    if (data.tenant !== config.tenant || data.project !== config.project) {
      throw new Error(`it belongs to ${String(data.tenant)}/${String(data.project)}`);
    }
    state.nextSequence = integer(data.next_sequence);
    state.acknowledgedSequence = integer(data.acknowledged_sequence);
    const pending = data.pending as Record<string, unknown>;
    if (typeof pending !== "object" || pending === null) throw new Error("no pending map");
    state.pending = new Map(
      Object.entries(pending).map(([k, v]) => {
        if (typeof v !== "string") throw new Error("a pending envelope is not text");
        return [integer(Number(k)), v];
      }),
    );
  } catch (e) {
    throw new BuildError(`state file ${path} cannot be used: ${(e as Error).message}`);
  }
}

/** Write, flush to disk, then rename over the old file: a crash leaves the old state or the new one. */
async function writeAtomically(path: string, text: string): Promise<void> {
  const directory = dirname(path);
  await mkdir(directory, { recursive: true });
  const tmp = join(directory, `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  const file = await open(tmp, "w", 0o600);
  try {
    await file.writeFile(text, "utf8");
    await file.sync();
  } finally {
    await file.close();
  }
  try {
    await rename(tmp, path);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  const dir = await open(directory, "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
