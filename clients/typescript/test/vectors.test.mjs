// The published test vectors (crates/wharf-core/testdata/vectors.json), read as another
// implementation would: only the file, checked byte for byte (docs/protocol.md §9).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { sign as edSign } from "node:crypto";
import { test } from "node:test";

import * as wharf from "../dist/index.js";

// clients/ci.sh runs a copy of this package elsewhere and names the file; in the checkout the
// relative path finds it.
const VECTORS = process.env.WHARF_VECTORS ?? new URL("../../../crates/wharf-core/testdata/vectors.json", import.meta.url);
const DOC = JSON.parse(readFileSync(VECTORS, "utf8"));
const SEED = Buffer.from(DOC.key.seed_hex, "hex");
const PUBLIC = Buffer.from(DOC.key.public_key_hex, "hex");

test("the file holds the vectors this suite expects", () => {
  assert.deepEqual(
    DOC.vectors.map((v) => v.name),
    ["plain-ascii", "html-and-unicode", "escapes-and-controls", "large-integers"],
  );
  assert.deepEqual(wharf.publicKeyBytes(wharf.privateKey(SEED)), PUBLIC);
});

for (const v of DOC.vectors) {
  test(`${v.name}: signing bytes in both forms`, () => {
    assert.equal(wharf.signingBytes(v.envelope).toString("utf8"), v.signing_bytes_rfc8785);
    assert.equal(wharf.signingBytes(v.envelope, { legacyGo: true }).toString("utf8"), v.signing_bytes_legacy_go);
  });

  test(`${v.name}: signing the envelope gives its signatures`, () => {
    const key = wharf.privateKey(SEED);
    const signed = wharf.sign(v.envelope, key, DOC.key.key_id);
    assert.deepEqual(signed, v.envelope);
    assert.equal(signed.integrity.signature, v.signature_rfc8785);
    const legacy = edSign(null, Buffer.from(v.signing_bytes_legacy_go, "utf8"), key).toString("base64");
    assert.equal(legacy, v.signature_legacy_go);
  });

  test(`${v.name}: both signatures verify and report their form`, () => {
    assert.equal(wharf.verify(v.envelope, PUBLIC), "rfc8785");
    const legacy = { ...v.envelope, integrity: { ...v.envelope.integrity, signature: v.signature_legacy_go } };
    const differs = v.signing_bytes_rfc8785 !== v.signing_bytes_legacy_go;
    assert.equal(wharf.verify(legacy, PUBLIC), differs ? "legacy-go" : "rfc8785");
  });

  test(`${v.name}: digests`, () => {
    assert.equal(wharf.contentDigest(v.envelope).toString("hex"), v.content_digest_hex);
    assert.equal(wharf.eventIdDigestHex(v.envelope.event_id), v.event_id_sha256_hex);
  });

  test(`${v.name}: a tampered copy or another key does not verify`, () => {
    const tampered = structuredClone(v.envelope);
    tampered.producer_sequence -= 1;
    assert.throws(() => wharf.verify(tampered, PUBLIC), wharf.EnvelopeError);
    const other = wharf.publicKeyBytes(wharf.privateKey(Buffer.alloc(32)));
    assert.throws(() => wharf.verify(v.envelope, other), wharf.EnvelopeError);
  });

  test(`${v.name}: the wire form is the canonical text`, () => {
    wharf.validate(v.envelope);
    const wire = wharf.wireBytes(v.envelope).toString("utf8");
    assert.deepEqual(JSON.parse(wire), v.envelope);
    const expected = v.signing_bytes_rfc8785.replace('"signature":""', `"signature":"${v.signature_rfc8785}"`);
    assert.equal(wire, expected);
  });
}

test("the legacy form differs exactly where the spec says", () => {
  const v = DOC.vectors.find((x) => x.name === "html-and-unicode");
  const rfc = v.signing_bytes_rfc8785;
  const legacy = v.signing_bytes_legacy_go;
  for (const [raw, escaped] of [["<", "\\u003c"], [">", "\\u003e"], ["&", "\\u0026"], ["\u2028", "\\u2028"], ["\u2029", "\\u2029"]]) {
    assert.ok(rfc.includes(raw) && !legacy.includes(raw), raw);
    assert.ok(legacy.includes(escaped) && !rfc.includes(escaped), escaped);
  }
  assert.ok(rfc.includes("\u{1f600}") && legacy.includes("\u{1f600}"));
});
