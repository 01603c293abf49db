// Canonical JSON rows (docs/protocol.md §2): input, expected text or refusal.
import assert from "node:assert/strict";
import { test } from "node:test";

import { CanonicalError, DEPTH_MAX, canonicalText } from "../dist/index.js";

const ROWS = [
  // [what, value, RFC 8785, legacy Go]
  ["null", null, "null", "null"],
  ["booleans", [true, false], "[true,false]", "[true,false]"],
  ["minus zero", -0, "0", "0"],
  ["largest safe integer", Number.MAX_SAFE_INTEGER, "9007199254740991", "9007199254740991"],
  ["i64 min as a bigint", -(2n ** 63n), "-9223372036854775808", "-9223372036854775808"],
  ["u64 max as a bigint", 2n ** 64n - 1n, "18446744073709551615", "18446744073709551615"],
  ["no whitespace, sorted", { b: 1, a: [1, 2] }, '{"a":[1,2],"b":1}', '{"a":[1,2],"b":1}'],
  ["short escapes", '"\\\b\f\n\r\t', '"\\"\\\\\\b\\f\\n\\r\\t"', '"\\"\\\\\\b\\f\\n\\r\\t"'],
  ["other controls in lowercase hex", "\u0000\u0007\u001f", '"\\u0000\\u0007\\u001f"', '"\\u0000\\u0007\\u001f"'],
  ["DEL and slash are themselves", "\u007f/", '"\u007f/"', '"\u007f/"'],
  ["html characters", "<a&b>", '"<a&b>"', '"\\u003ca\\u0026b\\u003e"'],
  ["line and paragraph separators", "\u2028\u2029", '"\u2028\u2029"', '"\\u2028\\u2029"'],
  ["non-ASCII is UTF-8", "é😀", '"é😀"', '"é😀"'],
  ["keys escape too", { "<": 1 }, '{"<":1}', '{"\\u003c":1}'],
  // U+FF61 sorts after U+1F600 by code point but before it by UTF-16 code units (D83D).
  ["keys sort by UTF-16 code units", { "\uff61": 1, "\u{1f600}": 2 }, '{"😀":2,"｡":1}', '{"😀":2,"｡":1}'],
  ["empty containers", { a: {}, b: [] }, '{"a":{},"b":[]}', '{"a":{},"b":[]}'],
];

for (const [what, value, rfc, legacy] of ROWS) {
  test(`canonical: ${what}`, () => {
    assert.equal(canonicalText(value), rfc);
    assert.equal(canonicalText(value, { legacyGo: true }), legacy);
  });
}

function nested(levels) {
  let value = 1;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

const REFUSED = [
  ["a fraction", { a: 1.5 }],
  ["an unsafe integer as a number", 2 ** 53],
  ["NaN", Number.NaN],
  ["Infinity", Number.POSITIVE_INFINITY],
  ["below i64", -(2n ** 63n) - 1n],
  ["above u64", 2n ** 64n],
  ["a lone high surrogate", "\ud800"],
  ["a lone low surrogate", "x\udc00"],
  ["undefined", undefined],
  ["an undefined member", { a: undefined }],
  ["a Date", new Date(0)],
  ["a Map", new Map()],
  ["one level too deep", nested(DEPTH_MAX + 1)],
];

for (const [what, value] of REFUSED) {
  test(`refused: ${what}`, () => {
    assert.throws(() => canonicalText(value), CanonicalError);
  });
}

test("the deepest nesting allowed is written", () => {
  assert.equal(canonicalText(nested(DEPTH_MAX)), "[".repeat(DEPTH_MAX) + "1" + "]".repeat(DEPTH_MAX));
});

test("a surrogate pair is a character, not a lone surrogate", () => {
  assert.equal(canonicalText("\ud83d\ude00"), '"😀"');
});
