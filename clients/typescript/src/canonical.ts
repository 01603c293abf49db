/**
 * Canonical JSON: RFC 8785 (JCS) restricted to integers, and the legacy Go escaping form.
 *
 * Owns the exact bytes that are signed and digested (docs/protocol.md §2). Knows JSON values and
 * nothing about envelopes or keys.
 *
 * - Object members sorted by key as UTF-16 code units (JavaScript's own string order).
 * - Strings escape only `"`, `\` and characters below U+0020 (`\b \f \n \r \t`, others `\u00xx`
 *   in lowercase hex); everything else is written as UTF-8.
 * - Integers only: a `number` must be a safe integer (a fraction, an exponent's worth of
 *   magnitude, NaN or Infinity has no canonical form); larger integers are `bigint`s within the
 *   server's range (i64 minimum to u64 maximum).
 * - `legacyGo` also escapes `<`, `>`, `&`, U+2028, U+2029 as Go's `encoding/json` does.
 *   Verification accepts that form; signing never emits it.
 */

/** A JSON value as this package reads and writes it. */
export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [key: string]: JsonValue };

/** Deepest nesting of arrays and objects (the server refuses deeper ones). */
export const DEPTH_MAX = 64;
/** The integer range the server's parser accepts. */
export const INTEGER_MIN = -(2n ** 63n);
export const INTEGER_MAX = 2n ** 64n - 1n;

/** A value has no canonical form. Retrying never helps. */
export class CanonicalError extends Error {
  override name = "CanonicalError";
}

const SHORT: Record<string, string> = {
  '"': '\\"',
  "\\": "\\\\",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
};
const LEGACY: Record<string, string> = {
  "<": "\\u003c",
  ">": "\\u003e",
  "&": "\\u0026",
  "\u2028": "\\u2028",
  "\u2029": "\\u2029",
};
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;
const NEEDS_ESCAPE_LEGACY = /["\\\u0000-\u001f<>&\u2028\u2029]/;

/** Whether `s` has a UTF-8 form (no lone surrogate). */
export function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

function writeString(s: string, legacyGo: boolean, out: string[]): void {
  if (!isWellFormed(s)) {
    throw new CanonicalError("string holds a lone surrogate; it has no UTF-8 form");
  }
  if (!(legacyGo ? NEEDS_ESCAPE_LEGACY : NEEDS_ESCAPE).test(s)) {
    out.push('"', s, '"');
    return;
  }
  let text = '"';
  for (const ch of s) {
    const escaped = SHORT[ch] ?? (legacyGo ? LEGACY[ch] : undefined);
    if (escaped !== undefined) {
      text += escaped;
    } else if (ch < " ") {
      text += "\\u" + ch.charCodeAt(0).toString(16).padStart(4, "0");
    } else {
      text += ch;
    }
  }
  out.push(text + '"');
}

function compareKeys(a: string, b: string): number {
  // JavaScript compares strings by UTF-16 code units: exactly JCS's order.
  return a < b ? -1 : a > b ? 1 : 0;
}

function isPlainObject(v: object): boolean {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function writeValue(v: unknown, legacyGo: boolean, depth: number, out: string[]): void {
  if (v === null) {
    out.push("null");
  } else if (v === true) {
    out.push("true");
  } else if (v === false) {
    out.push("false");
  } else if (typeof v === "number") {
    if (!Number.isSafeInteger(v)) {
      throw new CanonicalError(
        `${v} is not a safe integer; only integers are canonical (use a bigint above 2^53 - 1)`,
      );
    }
    out.push(String(v)); // String(-0) is "0", as JCS writes it
  } else if (typeof v === "bigint") {
    if (v < INTEGER_MIN || v > INTEGER_MAX) {
      throw new CanonicalError(`integer ${v} is outside ${INTEGER_MIN}..${INTEGER_MAX}`);
    }
    out.push(v.toString());
  } else if (typeof v === "string") {
    writeString(v, legacyGo, out);
  } else if (Array.isArray(v)) {
    if (depth >= DEPTH_MAX) throw new CanonicalError(`JSON nests deeper than ${DEPTH_MAX} levels`);
    out.push("[");
    v.forEach((item, i) => {
      if (i > 0) out.push(",");
      writeValue(item, legacyGo, depth + 1, out);
    });
    out.push("]");
  } else if (typeof v === "object" && isPlainObject(v)) {
    if (depth >= DEPTH_MAX) throw new CanonicalError(`JSON nests deeper than ${DEPTH_MAX} levels`);
    const record = v as Record<string, unknown>;
    const keys = Object.keys(record).sort(compareKeys);
    out.push("{");
    keys.forEach((key, i) => {
      if (i > 0) out.push(",");
      writeString(key, legacyGo, out);
      out.push(":");
      const item = record[key];
      if (item === undefined) throw new CanonicalError(`member ${JSON.stringify(key)} is undefined`);
      writeValue(item, legacyGo, depth + 1, out);
    });
    out.push("}");
  } else {
    throw new CanonicalError(`${typeof v} is not a JSON value`);
  }
}

/** The canonical JSON text of `value` (RFC 8785, or the legacy Go form). */
export function canonicalText(value: unknown, options: { legacyGo?: boolean } = {}): string {
  const out: string[] = [];
  writeValue(value, options.legacyGo ?? false, 0, out);
  return out.join("");
}

/** The canonical JSON of `value` as UTF-8 bytes. */
export function canonicalize(value: unknown, options: { legacyGo?: boolean } = {}): Buffer {
  return Buffer.from(canonicalText(value, options), "utf8");
}
