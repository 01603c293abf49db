// Envelope bounds at their edges (docs/protocol.md §1), event ids, signing round trips.
import assert from "node:assert/strict";
import { test } from "node:test";

import * as wharf from "../dist/index.js";

const KEY = wharf.privateKey(Buffer.from(Array.from({ length: 32 }, (_, i) => i)));
const PUBLIC = wharf.publicKeyBytes(KEY);

function draft(changes = {}) {
  return {
    ...wharf.build({
      eventType: "sync_cursor",
      tenantId: "acme",
      projectId: "p1",
      producerSequence: 1,
      payload: { producer_id: "p", acknowledged_sequence: 0, acknowledged_event_id: null, version: 1 },
      producerVersion: "tests/1",
      eventId: "01JXA0000000000000000000A1",
      occurredAt: "2025-06-01T12:00:00Z",
    }),
    ...changes,
  };
}

const signed = (changes) => wharf.sign(draft(changes), KEY, "k1");

const OK = [
  ["as built", {}],
  ["identity of 128 bytes", { tenant_id: "a".repeat(128) }],
  ["identity punctuation", { project_id: "p.1_x:y-z" }],
  ["event type of 64 bytes", { event_type: "a".repeat(64) }],
  ["the largest sequence this client holds", { producer_sequence: Number.MAX_SAFE_INTEGER }],
  ["idempotency key of 256 bytes", { idempotency_key: "é".repeat(128) }],
  ["producer version of 64 bytes", { producer_version: "v".repeat(64) }],
  ["an offset and a fraction", { occurred_at: "2025-06-01T11:59:59.123456789+02:00" }],
  ["a leap second", { occurred_at: "2016-12-31T23:59:60Z" }],
  ["29 February of a leap year", { occurred_at: "2024-02-29T00:00:00Z" }],
];

const REFUSED = [
  ["identity of 129 bytes", { tenant_id: "a".repeat(129) }, "tenant_id"],
  ["identity starting with punctuation", { tenant_id: "-acme" }, "tenant_id"],
  ["non-ASCII identity", { project_id: "prøj" }, "project_id"],
  ["lowercase ULID", { event_id: "01jxa0000000000000000000a1" }, "event_id"],
  ["ULID with I", { event_id: "01JXA000000000000000000IA1" }, "event_id"],
  ["ULID starting with 8", { event_id: "81JXA0000000000000000000A1" }, "event_id"],
  ["event type of 65 bytes", { event_type: "a".repeat(65) }, "event_type"],
  ["event type with uppercase", { event_type: "Sync" }, "event_type"],
  ["sequence 0", { producer_sequence: 0 }, "producer_sequence"],
  ["sequence beyond 2^53 - 1", { producer_sequence: 2 ** 53 }, "producer_sequence"],
  ["sequence with a fraction", { producer_sequence: 1.5 }, "producer_sequence"],
  ["sequence as a string", { producer_sequence: "1" }, "producer_sequence"],
  ["idempotency key of 257 bytes", { idempotency_key: "é".repeat(128) + "x" }, "idempotency_key"],
  ["empty idempotency key", { idempotency_key: "" }, "idempotency_key"],
  ["control character in the key", { idempotency_key: "a\nb" }, "idempotency_key"],
  ["C1 control in the version", { producer_version: "v\u0085" }, "producer_version"],
  ["producer version of 65 bytes", { producer_version: "v".repeat(65) }, "producer_version"],
  ["occurred_at without a zone", { occurred_at: "2025-06-01T12:00:00" }, "occurred_at"],
  ["occurred_at on 31 February", { occurred_at: "2025-02-31T12:00:00Z" }, "occurred_at"],
  ["29 February of a common year", { occurred_at: "2025-02-29T00:00:00Z" }, "occurred_at"],
  ["occurred_at with a space", { occurred_at: "2025-06-01 12:00:00Z" }, "occurred_at"],
  ["occurred_at of 65 bytes", { occurred_at: "2025-06-01T12:00:00." + "1".repeat(44) + "Z" }, "occurred_at"],
  ["payload not an object", { payload: [1] }, "payload"],
  ["unknown member", { extra: 1 }, "extra"],
  ["schema version as text", { schema_version: "1" }, "schema_version"],
];

for (const [what, changes] of OK) {
  test(`signs and verifies: ${what}`, () => {
    const e = signed(changes);
    wharf.validate(e);
    assert.equal(wharf.verify(e, PUBLIC), "rfc8785");
  });
}

for (const [what, changes, field] of REFUSED) {
  test(`never signed: ${what}`, () => {
    assert.throws(() => signed(changes), (e) => e instanceof wharf.EnvelopeError && e.field === field);
  });
}

test("the payload bound is its canonical size", () => {
  // {"a":"…"} is 8 bytes around the string.
  signed({ payload: { a: "x".repeat(1024 * 1024 - 8) } });
  assert.throws(() => signed({ payload: { a: "x".repeat(1024 * 1024 - 7) } }), (e) => e.field === "payload");
  assert.throws(() => signed({ payload: { a: 0.5 } }), wharf.CanonicalError);
});

test("key id bounds", () => {
  wharf.sign(draft(), KEY, "k".repeat(128));
  for (const bad of ["", "k".repeat(129), "k\t1"]) {
    assert.throws(() => wharf.sign(draft(), KEY, bad), (e) => e.field === "integrity.key_id");
  }
});

test("the signature must be canonical base64 of 64 bytes", () => {
  const e = signed();
  const good = e.integrity.signature;
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const index = alphabet.indexOf(good.at(-3));
  assert.equal(index % 16, 0);
  const sloppy = good.slice(0, -3) + alphabet[index + 1] + "==";
  assert.deepEqual(Buffer.from(sloppy, "base64"), Buffer.from(good, "base64"));
  for (const bad of [good.replace(/=+$/, ""), sloppy, Buffer.alloc(63).toString("base64"), "!".repeat(88)]) {
    const tampered = structuredClone(e);
    tampered.integrity.signature = bad;
    assert.throws(() => wharf.validate(tampered), (x) => x.field === "integrity.signature", bad);
  }
});

test("any change breaks the signature, a re-signature keeps the content digest", () => {
  const e = signed();
  for (const [field, value] of [
    ["producer_sequence", 2],
    ["occurred_at", "2025-06-01T12:00:01Z"],
    ["payload", { ...e.payload, version: 2 }],
  ]) {
    const tampered = { ...e, [field]: value };
    assert.throws(() => wharf.verify(tampered, PUBLIC), wharf.EnvelopeError);
    assert.notDeepEqual(wharf.contentDigest(tampered), wharf.contentDigest(e));
  }
  const resigned = wharf.sign(e, wharf.privateKey(Buffer.alloc(32, 9)), "k2");
  assert.notEqual(resigned.integrity.signature, e.integrity.signature);
  assert.deepEqual(wharf.contentDigest(resigned), wharf.contentDigest(e));
});

test("event ids are ULIDs ordered by time", () => {
  const first = wharf.newEventId(1_700_000_000_000, Buffer.alloc(10));
  assert.equal(first, "01HF7YAT00" + "0".repeat(16));
  assert.ok(first < wharf.newEventId(1_700_000_000_001, Buffer.alloc(10)));
  assert.equal(wharf.newEventId(2 ** 48 - 1, Buffer.alloc(10, 0xff)), "7" + "Z".repeat(25));
  const fresh = new Set(Array.from({ length: 100 }, () => wharf.newEventId()));
  assert.equal(fresh.size, 100);
  for (const id of fresh) wharf.validate(signed({ event_id: id }));
});

test("build uses the event id as idempotency key and the current time", () => {
  const e = wharf.build({ eventType: "sync_cursor", tenantId: "acme", projectId: "p1", producerSequence: 3, payload: {}, producerVersion: "v" });
  assert.equal(e.idempotency_key, e.event_id);
  assert.match(e.occurred_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  wharf.validate(wharf.sign(e, KEY, "k1"));
});

test("seeds: raw, base64, and refusals", () => {
  const b64 = Buffer.alloc(32, 1).toString("base64");
  assert.deepEqual(wharf.publicKeyBytes(wharf.privateKey(b64)), wharf.publicKeyBytes(wharf.privateKey(Buffer.alloc(32, 1))));
  for (const bad of ["short", Buffer.alloc(31), "!".repeat(44)]) assert.throws(() => wharf.privateKey(bad), RangeError);
});
