// The v1a webhook verifier (docs/protocol.md §8): rows of request → accepted or the refusal.
import assert from "node:assert/strict";
import { sign } from "node:crypto";
import { test } from "node:test";

import { WebhookVerificationError, WebhookVerifier, parsePublicKey, privateKey, publicKeyBytes } from "../dist/index.js";

const NOW = 1_700_000_000;
const BODY = Buffer.from('{"order":42,"note":"café <&>"}', "utf8");
const key = (seed) => privateKey(Buffer.alloc(32, seed));
const whpk = (k) => "whpk_" + publicKeyBytes(k).toString("base64");
const signature = (k, id, ts, body) =>
  "v1a," + sign(null, Buffer.concat([Buffer.from(`${id}.${ts}.`), body]), k).toString("base64");

function headers({ id = "order-42-paid", ts = NOW, sig, body = BODY } = {}) {
  return { "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": sig ?? signature(key(1), id, ts, body) };
}
const without = (name) => Object.fromEntries(Object.entries(headers()).filter(([k]) => k !== name));
const VERIFIER = new WebhookVerifier(whpk(key(1)));

const ROWS = [
  ["a valid webhook", headers(), BODY, null],
  ["header names in any case", Object.fromEntries(Object.entries(headers()).map(([k, v]) => [k.toUpperCase(), v])), BODY, null],
  ["a Headers object", new Headers(headers()), BODY, null],
  ["the body as a string", headers(), BODY.toString("utf8"), null],
  ["at the edge of the tolerance, in the past", headers({ ts: NOW - 300 }), BODY, null],
  ["at the edge of the tolerance, in the future", headers({ ts: NOW + 300 }), BODY, null],
  ["one second past it", headers({ ts: NOW - 301 }), BODY, "stale-timestamp"],
  ["one second ahead of it", headers({ ts: NOW + 301 }), BODY, "stale-timestamp"],
  ["a tampered body", headers(), Buffer.from(BODY.toString().replace("42", "43")), "bad-signature"],
  ["a body re-serialised", headers(), Buffer.from(JSON.stringify(JSON.parse(BODY), null, 1)), "bad-signature"],
  ["another id", { ...headers(), "webhook-id": "order-43-paid" }, BODY, "bad-signature"],
  ["another timestamp", { ...headers(), "webhook-timestamp": String(NOW + 1) }, BODY, "bad-signature"],
  ["signed by another key", headers({ sig: signature(key(2), "order-42-paid", NOW, BODY) }), BODY, "bad-signature"],
  ["rotation: another key's signature, then ours", headers({ sig: `${signature(key(2), "order-42-paid", NOW, BODY)} ${signature(key(1), "order-42-paid", NOW, BODY)}` }), BODY, null],
  ["a v1 (symmetric) entry is ignored", headers({ sig: "v1," + Buffer.alloc(32).toString("base64") }), BODY, "bad-signature"],
  ["entries of other versions beside ours", headers({ sig: `v1,AAAA v2a,BBBB ${signature(key(1), "order-42-paid", NOW, BODY)}` }), BODY, null],
  ["a signature of 63 bytes", headers({ sig: "v1a," + Buffer.alloc(63).toString("base64") }), BODY, "bad-signature"],
  ["not base64", headers({ sig: "v1a,!!!!" }), BODY, "bad-signature"],
  ["no id", without("webhook-id"), BODY, "missing-header"],
  ["no timestamp", without("webhook-timestamp"), BODY, "missing-header"],
  ["no signature", without("webhook-signature"), BODY, "missing-header"],
  ["a negative timestamp", { ...headers(), "webhook-timestamp": "-1" }, BODY, "bad-timestamp"],
  ["twenty digits", { ...headers(), "webhook-timestamp": "1".repeat(20) }, BODY, "bad-timestamp"],
  ["a timestamp with a fraction", { ...headers(), "webhook-timestamp": `${NOW}.5` }, BODY, "bad-timestamp"],
];

for (const [what, hdrs, body, refusal] of ROWS) {
  test(`verify: ${what}`, () => {
    if (refusal === null) {
      VERIFIER.verify(hdrs, body, { nowS: NOW });
    } else {
      assert.throws(
        () => VERIFIER.verify(hdrs, body, { nowS: NOW }),
        (e) => e instanceof WebhookVerificationError && e.code === refusal,
      );
    }
  });
}

test("a verifier with both keys of a rotation accepts either", () => {
  const both = new WebhookVerifier([whpk(key(1)), whpk(key(2))]);
  for (const k of [key(1), key(2)]) both.verify(headers({ id: "m", sig: signature(k, "m", NOW, BODY) }), BODY, { nowS: NOW });
  assert.throws(() => both.verify(headers({ id: "m", sig: signature(key(3), "m", NOW, BODY) }), BODY, { nowS: NOW }));
});

test("the tolerance is configurable and the clock defaults to now", () => {
  const strict = new WebhookVerifier(whpk(key(1)), { toleranceS: 0 });
  strict.verify(headers(), BODY, { nowS: NOW });
  assert.throws(() => strict.verify(headers(), BODY, { nowS: NOW + 1 }), (e) => e.code === "stale-timestamp");
  assert.throws(() => VERIFIER.verify(headers(), BODY), (e) => e.code === "stale-timestamp");
  const fresh = Math.floor(Date.now() / 1000);
  VERIFIER.verify(headers({ ts: fresh }), BODY);
});

test("Node's IncomingMessage-style header arrays and pairs are read", () => {
  VERIFIER.verify(Object.entries(headers()), BODY, { nowS: NOW });
  const h = headers();
  VERIFIER.verify({ ...h, "webhook-signature": ["v1,AAAA", h["webhook-signature"]] }, BODY, { nowS: NOW });
});

for (const bad of ["", "whpk_", "whpk_" + Buffer.alloc(31).toString("base64"), "whpk_!!!", "whsk_" + Buffer.alloc(32).toString("base64")]) {
  test(`malformed public key refused: ${JSON.stringify(bad)}`, () => {
    assert.throws(() => parsePublicKey(bad), RangeError);
  });
}

test("the prefix is optional and matches the Rust form", () => {
  const text = "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";
  const raw = parsePublicKey(text).export({ format: "der", type: "spki" }).subarray(12);
  assert.equal(raw.toString("hex"), "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  assert.deepEqual(parsePublicKey(text.slice(5)).export({ format: "der", type: "spki" }).subarray(12), raw);
});
